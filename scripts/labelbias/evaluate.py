"""One model: merge the shards, calibrate (CC, DC, LOOC), add the LoRA scores, compute every metric,
under both label scorings (``scoring``: paper, corrected; one inference run gives both)."""

from unsure.forkserver import hand_off

hand_off()

import pandas as pd

from unsure.io import read_parquet, write_parquet
from unsure.labelbias.scoring import SCORINGS
from unsure.labelbias.tables import explode_scores, method_probabilities, task_metrics, under_scoring
from unsure.logs import logged

with logged(snakemake.log[0]) as log:
    model = snakemake.wildcards.lb_model
    tasks = pd.read_parquet(snakemake.input.tasks)
    labels = {r.task: tuple(r.labels) for r in tasks[tasks["selected"]].itertuples()}
    scored = pd.concat([read_parquet(f) for f in snakemake.input.shards], ignore_index=True)
    long = explode_scores(scored, pd.read_parquet(snakemake.input.score_items))
    lora_parts = [pd.read_parquet(f) for f in snakemake.input.lora]
    lora = pd.concat(lora_parts, ignore_index=True) if lora_parts else None
    probs, metrics = [], []
    for scoring in SCORINGS:
        p = method_probabilities(
            under_scoring(long, scoring), labels, under_scoring(lora, scoring) if lora is not None else None
        )
        probs.append(p.assign(scoring=scoring))
        metrics.append(task_metrics(p, labels).assign(scoring=scoring))
    write_parquet(snakemake.output.scores, long.assign(model=model))
    write_parquet(snakemake.output.methods, pd.concat(probs, ignore_index=True).assign(model=model))
    metric_rows = pd.concat(metrics, ignore_index=True).assign(model=model)
    write_parquet(snakemake.output.metrics, metric_rows)
    log.info("%s: %d scored contexts, %d metric rows (both scorings)", model, len(long), len(metric_rows))

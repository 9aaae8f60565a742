"""One model: merge the shards, calibrate (CC, DC, LOOC), add the LoRA scores, compute every metric."""

import pandas as pd

from unsure.io import write_parquet
from unsure.labelbias.evaluate import explode_scores, method_probabilities, task_metrics
from unsure.logs import logged

with logged(snakemake.log[0]) as log:
    model = snakemake.wildcards.lb_model
    tasks = pd.read_parquet(snakemake.input.tasks)
    labels = {r.task: tuple(r.labels) for r in tasks[tasks["selected"]].itertuples()}
    scored = pd.concat([pd.read_parquet(f) for f in snakemake.input.shards], ignore_index=True)
    long = explode_scores(scored, pd.read_parquet(snakemake.input.score_items))
    lora = [pd.read_parquet(f) for f in snakemake.input.lora]
    probs = method_probabilities(long, labels, pd.concat(lora, ignore_index=True) if lora else None)
    metrics = task_metrics(probs, labels)
    write_parquet(snakemake.output.scores, long.assign(model=model))
    write_parquet(snakemake.output.methods, probs.assign(model=model))
    write_parquet(snakemake.output.metrics, metrics.assign(model=model))
    log.info("%s: %d scored contexts, %d metric rows", model, len(long), len(metrics))

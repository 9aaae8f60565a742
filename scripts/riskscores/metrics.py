"""All per-row scores in one file (labels and splits joined), and every metric per
model x task x prompting and for the baselines."""

from unsure.forkserver import hand_off

hand_off()

import pandas as pd

from unsure.io import read_parquet, write_parquet
from unsure.logs import logged
from unsure.report import write_table
from unsure.riskscores.tables import merge_scores, metrics_frame

with logged(snakemake.log[0]) as log:
    p, inp = snakemake.params, snakemake.input
    rows = {
        t: pd.read_parquet(path, columns=["row_id", "split", "label"])
        for t, path in zip(p.tasks, inp.rows, strict=True)
    }
    runs = [run | {"scores": pd.concat([read_parquet(s) for s in run["shards"]], ignore_index=True)} for run in p.runs]
    scores = pd.concat([merge_scores(rows, runs), *(pd.read_parquet(b) for b in inp.baselines)], ignore_index=True)
    log.info("%d scored rows of %d runs", len(scores), scores.groupby(["model", "task", "prompting"]).ngroups)
    write_parquet(snakemake.output.scores, scores)
    metrics = metrics_frame(scores)
    write_parquet(snakemake.output.metrics, metrics)
    write_table(metrics, snakemake.output.table[0], caption="Risk-score metrics per model, task and prompting.")

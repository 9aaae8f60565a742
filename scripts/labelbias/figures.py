"""Figures 2-4 and the per-family appendix figures."""

from pathlib import Path

import pandas as pd

from unsure.labelbias.plots import write_figures
from unsure.logs import logged

with logged(snakemake.log[0]):
    tasks = pd.read_parquet(snakemake.input.tasks)
    per_task = pd.concat([pd.read_parquet(f) for f in snakemake.input.metrics], ignore_index=True)
    write_figures(
        per_task,
        pd.DataFrame(snakemake.params.models),
        set(tasks.loc[tasks["selected"] & tasks["interchangeable"], "task"]),
        Path(snakemake.output[0]).parent,
    )

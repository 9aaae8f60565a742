"""Figures 2-4 and the appendix figures in the paper's lineup, plus the pooled views, under the
protocol's label scoring, macro-F1 and Fig. 4 subset."""

from unsure.forkserver import hand_off

hand_off()

from pathlib import Path

import pandas as pd

from unsure.labelbias.plots import write_figures
from unsure.logs import logged

with logged(snakemake.log[0]) as log:
    p = snakemake.params
    tasks = pd.read_parquet(snakemake.input.tasks)
    per_task = pd.concat([pd.read_parquet(f) for f in snakemake.input.metrics], ignore_index=True)
    paper = p.protocol == "paper"
    column = "semantically_equivalent" if paper else "interchangeable"
    drawn = write_figures(
        per_task[per_task["scoring"] == p.scoring],
        pd.DataFrame(p.models),
        set(tasks.loc[tasks["selected"] & tasks[column], "task"]),
        Path(snakemake.output[0]).parent,
        subset_name="semantically equivalent labels" if paper else "interchangeable labels",
        figure_family=p.figure_family,
        f1_column="macro_f1_paper" if paper else "macro_f1",
        seed=p.seed,
    )
    log.info("drew %s", ", ".join(drawn))

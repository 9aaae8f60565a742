"""The paper's per-task tables: table 1 (ACSIncome) and tables A1-A4, one per task."""

from pathlib import Path

import pandas as pd

from unsure.logs import logged
from unsure.report import write_table
from unsure.riskscores.tables import paper_table

with logged(snakemake.log[0]):
    metrics = pd.read_parquet(snakemake.input[0])
    outdir = Path(snakemake.output[0]).parent
    for task, table in snakemake.params.tables.items():
        frame = paper_table(metrics, task)
        write_table(
            frame, outdir / table, caption=f"{task}: ECE, Brier score, ROC AUC and accuracy per model and prompting."
        )

"""Write the study's tables (CSV, Markdown, LaTeX) from the per-unit metrics, and the reproduction ledger."""

from unsure.forkserver import hand_off

hand_off()

from pathlib import Path

import pandas as pd

from unsure.logs import logged
from unsure.report import write_table
from unsure.subgroups.reproduction import DIFFERENCES, reproduction_table
from unsure.subgroups.tables import write_tables

with logged(snakemake.log[0]):
    p = snakemake.params
    importance = {s: pd.read_parquet(path) for s, path in zip(p.sources, snakemake.input.importance, strict=True)}
    outdir = Path(snakemake.output[0]).parent
    tables = write_tables(pd.read_parquet(snakemake.input.units), importance, outdir, small_n=p.small_n)
    write_table(
        reproduction_table(tables["table2"], tables["table3"], protocol=p.protocol, sources=p.ledger_sources),
        outdir / "reproduction",
        caption="Printed cells of the paper's Tables 2 and 3 beside ours under each protocol. Differences: "
        + " ".join(f"{k}: {v}" for k, v in DIFFERENCES.items()),
        float_format="{:.4g}",
    )

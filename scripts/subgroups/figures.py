"""Draw the study's figures (PNG and PDF) from the per-unit metrics and one source's estimates."""

from unsure.forkserver import hand_off

hand_off()

from pathlib import Path

import pandas as pd

from unsure.logs import logged
from unsure.subgroups.plots import write_figures

with logged(snakemake.log[0]):
    p = snakemake.params
    write_figures(
        pd.read_parquet(snakemake.input.units),
        pd.read_parquet(snakemake.input.estimates),
        Path(snakemake.output[0]).parent,
        small_n=p.small_n,
        alpha=p.alpha,
        seed=p.seed,
    )

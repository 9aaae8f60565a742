"""Average each source's estimates over repetitions into per-unit MSE, coverage and width."""

from unsure.forkserver import hand_off

hand_off()

import pandas as pd

from unsure.io import write_parquet
from unsure.logs import logged
from unsure.subgroups.tables import unit_metrics

with logged(snakemake.log[0]):
    sources = snakemake.params.sources
    frames = [unit_metrics(pd.read_parquet(path), s) for s, path in zip(sources, snakemake.input, strict=True)]
    write_parquet(snakemake.output[0], pd.concat(frames, ignore_index=True))

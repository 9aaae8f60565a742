"""Merge sampled shards into a samples file (JSON Lines, the pre-collected format) and sampling totals."""

import pandas as pd

from unsure.io import write_json
from unsure.logs import logged
from unsure.nextword.data import write_samples
from unsure.nextword.inference import sample_counts

with logged(snakemake.log[0]) as log:
    counts, stats = sample_counts([pd.read_parquet(path) for path in snakemake.input])
    write_samples(snakemake.output.samples, counts)
    write_json(snakemake.output.stats, stats)
    log.info("%s", stats)

"""Sentence-embedding cosine similarity between each instance's prompt and each of its choices."""

from unsure.forkserver import hand_off

hand_off()

import pandas as pd

from unsure.decisionrisk.infer import similarities
from unsure.io import write_parquet
from unsure.logs import logged

with logged(snakemake.log[0]) as log:
    rows = pd.concat([pd.read_parquet(f) for f in snakemake.input.instances], ignore_index=True)
    write_parquet(snakemake.output[0], similarities(rows, snakemake.params.embedder))
    log.info("similarities of %d rows with %s", len(rows), snakemake.params.embedder)

"""Merge sampled shards into a samples file (JSON Lines, the pre-collected format; words as generated) and totals."""

from unsure.forkserver import hand_off

hand_off()

from unsure.io import read_parquet, write_json
from unsure.logs import logged
from unsure.nextword.data import write_samples
from unsure.nextword.inference import sample_counts, surface_counts

with logged(snakemake.log[0]) as log:
    shards = [read_parquet(path) for path in snakemake.input]
    _, stats = sample_counts(shards)
    write_samples(snakemake.output.samples, surface_counts(shards))  # the biased estimator scores these surfaces
    write_json(snakemake.output.stats, stats)
    log.info("%s", stats)

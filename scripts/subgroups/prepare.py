"""Validate a source's per-instance file; form subgroups, truths and unit features."""

from unsure.forkserver import hand_off

hand_off()

from unsure.io import write_parquet
from unsure.logs import logged
from unsure.subgroups.features import read_and_prepare

with logged(snakemake.log[0]) as log:
    p = snakemake.params
    prepared = read_and_prepare(snakemake.input[0], snakemake.wildcards.source, **p.options)
    write_parquet(snakemake.output.rows, prepared.rows)
    write_parquet(snakemake.output.units, prepared.units)
    log.info("%d units, %d rows kept", len(prepared.units), len(prepared.rows))

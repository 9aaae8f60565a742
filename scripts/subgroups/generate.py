"""Write a generated per-instance input (the source study's schema) and the means it was drawn from."""

from unsure.forkserver import hand_off

hand_off()

from unsure.io import write_parquet
from unsure.logs import logged
from unsure.subgroups.generate import generate

with logged(snakemake.log[0]) as log:
    p = snakemake.params
    data = generate(snakemake.wildcards.source, p.models, rows=p.rows, subgroups=p.subgroups, seed=p.seed)
    write_parquet(snakemake.output.instances, data.instances)
    write_parquet(snakemake.output.means, data.means)
    log.info("generated %d rows for source %s", len(data.instances), snakemake.wildcards.source)

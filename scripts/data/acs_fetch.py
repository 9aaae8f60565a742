"""Download (or copy from data.acs.local_dir) one ACS PUMS file: a state zip or the dictionary."""

from unsure.forkserver import hand_off

hand_off()

from unsure import sources
from unsure.logs import logged

with logged(snakemake.log[0]) as log:
    p = snakemake.params
    if hasattr(snakemake.wildcards, "state"):
        source = sources.acs_pums_person(p.year, snakemake.wildcards.state.upper(), p.horizon)
    else:
        source = sources.acs_data_dictionary(p.year, p.horizon)
    sources.obtain(source, snakemake.output[0], local_dir=p.local_dir, mirror=p.mirror)
    log.info("obtained %s", source.key)

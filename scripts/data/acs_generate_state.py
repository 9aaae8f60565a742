"""Write one generated ACS PUMS state zip in the Census layout."""

from unsure.forkserver import hand_off

hand_off()

from unsure.generate import acs
from unsure.logs import logged

with logged(snakemake.log[0]):
    p = snakemake.params
    acs.write_state_zip(
        snakemake.output[0], state=snakemake.wildcards.state.upper(), year=p.year, n_rows=p.rows, seed=p.seed
    )

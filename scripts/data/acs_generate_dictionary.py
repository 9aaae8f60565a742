"""Write the generated ACS PUMS data dictionary in the Census CSV layout."""

from unsure.forkserver import hand_off

hand_off()

from unsure.generate import acs
from unsure.logs import logged

with logged(snakemake.log[0]):
    acs.write_data_dictionary(snakemake.output[0], year=snakemake.params.year)

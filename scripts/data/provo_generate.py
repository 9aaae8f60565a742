"""Write generated Provo Corpus predictability norms in the OSF layout."""

from unsure.forkserver import hand_off

hand_off()

from unsure.generate import provo
from unsure.logs import logged

with logged(snakemake.log[0]):
    provo.write_norms(snakemake.output[0], n_passages=snakemake.params.passages, seed=snakemake.params.seed)

"""Download (or copy from data.provo.local_dir) the Provo Corpus predictability norms."""

from unsure.forkserver import hand_off

hand_off()

from unsure import sources
from unsure.logs import logged

with logged(snakemake.log[0]):
    sources.obtain(
        sources.provo_norms(), snakemake.output[0], local_dir=snakemake.params.local_dir, mirror=snakemake.params.mirror
    )

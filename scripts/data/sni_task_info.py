"""Download (or copy from data.sni.local_dir) the label-bias study's SNI task metadata."""

from unsure.forkserver import hand_off

hand_off()

from unsure import sources
from unsure.logs import logged

with logged(snakemake.log[0]):
    p = snakemake.params
    sources.obtain(sources.sni_task_info(), snakemake.output[0], local_dir=p.local_dir, mirror=p.mirror)

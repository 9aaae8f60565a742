"""Download (or copy from data.sni.local_dir) the label-bias study's per-task input templates."""

from unsure.forkserver import hand_off

hand_off()

from unsure import sources
from unsure.logs import logged

with logged(snakemake.log[0]):
    p = snakemake.params
    sources.obtain(sources.sni_input_templates(), snakemake.output[0], local_dir=p.local_dir, mirror=p.mirror)

"""Download (or copy from data.sni.local_dir) the SNI splits and task files."""

from unsure.forkserver import hand_off

hand_off()

from unsure.logs import logged
from unsure.rawdata import obtain_sni

with logged(snakemake.log[0]):
    p = snakemake.params
    obtain_sni(snakemake.output[0], tasks=list(p.tasks), ref=p.ref, local_dir=p.local_dir, mirror=p.mirror)

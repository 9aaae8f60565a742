"""Download (or copy from data.mcqa.local_dir) one benchmark's official files."""

from unsure.forkserver import hand_off

hand_off()

from unsure.logs import logged
from unsure.rawdata import obtain_mcqa

with logged(snakemake.log[0]):
    obtain_mcqa(
        snakemake.wildcards.benchmark,
        snakemake.output[0],
        local_dir=snakemake.params.local_dir,
        mirror=snakemake.params.mirror,
    )

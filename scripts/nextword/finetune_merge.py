"""The fine-tuned model as one system (Table 1's GPT2_F): each fold's held-out samples, merged into one file."""

from unsure.forkserver import hand_off

hand_off()

from unsure.logs import logged
from unsure.nextword.data import merge_sample_files

with logged(snakemake.log[0]) as log:
    n = merge_sample_files(list(snakemake.input), snakemake.output[0])
    log.info("%d positions from %d held-out folds", n, len(snakemake.input))

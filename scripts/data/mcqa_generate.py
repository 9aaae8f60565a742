"""Write one generated multiple-choice benchmark in its official layout."""

from unsure.forkserver import hand_off

hand_off()

from unsure.generate import mcqa
from unsure.io import atomic_dir
from unsure.logs import logged

with logged(snakemake.log[0]), atomic_dir(snakemake.output[0]) as tmp:
    p = snakemake.params
    mcqa.write_benchmark(tmp, benchmark=snakemake.wildcards.benchmark, n_train=p.n_train, n_val=p.n_val, seed=p.seed)

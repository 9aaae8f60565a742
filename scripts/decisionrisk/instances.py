"""Load one benchmark's training and validation splits and add their risk-injected copies."""

from unsure.forkserver import hand_off

hand_off()

import pandas as pd

from unsure.decisionrisk.data import load_benchmark, sample, with_injections
from unsure.io import write_parquet
from unsure.logs import logged

with logged(snakemake.log[0]) as log:
    p = snakemake.params
    benchmark = snakemake.wildcards.benchmark
    parts = []
    for code, (split, n) in enumerate((("train", p.n_train), ("val", p.n_val))):
        original = sample(load_benchmark(snakemake.input[0], benchmark, split), n, seed=p.seed)
        parts.append(with_injections(original, tuple(p.injections), seed=p.seed * 2 + code))
        log.info("%s %s: %d original instances, injections %s", benchmark, split, len(original), p.injections)
    write_parquet(snakemake.output[0], pd.concat(parts, ignore_index=True))

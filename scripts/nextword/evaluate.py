"""Every headline metric of every system (samples files, pre-collected or from the engine), human and oracle."""

from unsure.forkserver import hand_off

hand_off()

import pandas as pd

from unsure.io import write_parquet
from unsure.logs import logged
from unsure.nextword.data import read_samples
from unsure.nextword.tables import evaluate_systems

with logged(snakemake.log[0]) as log:
    i, p = snakemake.input, snakemake.params
    human = pd.read_parquet(i.human)
    systems = {}
    for name, path in zip(p.systems, i.systems, strict=True):
        systems[name] = read_samples(path, known=human)
    metrics, tvds = evaluate_systems(
        systems, human, pd.read_parquet(i.corpus), pd.read_parquet(i.splits), n_bins=p.n_bins
    )
    write_parquet(snakemake.output.metrics, metrics)
    write_parquet(snakemake.output.tvd, tvds)
    log.info("\n%s", metrics.groupby("estimator", sort=False).mean(numeric_only=True).round(4).to_string())

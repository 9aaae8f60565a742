"""The per-instance results the subgroups study reads (unsure.subgroups.schema)."""

from unsure.forkserver import hand_off

hand_off()

import pandas as pd

from unsure.io import write_parquet
from unsure.labelbias.tables import subgroups_instances
from unsure.logs import logged
from unsure.subgroups.schema import validate_instances

with logged(snakemake.log[0]) as log:
    p = snakemake.params
    probs = pd.concat([pd.read_parquet(f) for f in snakemake.input.methods], ignore_index=True)
    probs = probs[probs["scoring"] == p.scoring]
    frame = subgroups_instances(probs, pd.read_parquet(snakemake.input.score_items), k=p.k, s=p.set)
    out = snakemake.output[0]
    write_parquet(out, validate_instances(frame, "labelbias", out))
    log.info("%d rows for %d models", len(frame), frame["model"].nunique())

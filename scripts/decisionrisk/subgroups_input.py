"""Per-instance results on the original validation instances, in the subgroups study's schema."""

from unsure.forkserver import hand_off

hand_off()

import pandas as pd

from unsure.decisionrisk.tables import subgroups_input
from unsure.io import write_parquet
from unsure.logs import logged
from unsure.subgroups.schema import validate_instances

with logged(snakemake.log[0]) as log:
    instances = pd.concat([pd.read_parquet(f) for f in snakemake.input.instances], ignore_index=True)
    confidences = pd.concat([pd.read_parquet(f) for f in snakemake.input.confidences], ignore_index=True)
    frame = subgroups_input(instances, confidences)
    validate_instances(frame, "decisionrisk", snakemake.output[0])
    write_parquet(snakemake.output[0], frame)
    log.info("%d rows for the subgroups study", len(frame))

"""Fit the decision rules on the encoder's training features; decide on every model's validation rows."""

from unsure.forkserver import hand_off

hand_off()

from pathlib import Path

import pandas as pd

from unsure.decisionrisk.rules import ForestSettings
from unsure.decisionrisk.tables import decide_benchmark, encoder_confidences, generative_confidences
from unsure.io import read_parquet, write_parquet
from unsure.logs import logged

with logged(snakemake.log[0]) as log:
    p = snakemake.params
    parts = [encoder_confidences(p.encoder, pd.read_parquet(snakemake.input.encoder))]
    for model in p.models:  # shard files are .../generative/<model>/shard-k-of-K.parquet
        paths = [f for f in snakemake.input.generative if Path(f).parts[-2] == model]
        parts.append(generative_confidences(model, pd.concat([read_parquet(f) for f in paths], ignore_index=True)))
    instances = pd.read_parquet(snakemake.input.instances)
    confidences = pd.concat(parts, ignore_index=True)
    confidences = confidences[confidences["row_id"].isin(instances["row_id"])].reset_index(drop=True)
    write_parquet(snakemake.output.confidences, confidences)
    decisions = decide_benchmark(
        instances,
        confidences,
        pd.read_parquet(snakemake.input.similarity),
        encoder=p.encoder,
        injections=p.injections,
        forest=ForestSettings(**p.forest),
        seed=p.seed,
        protocol=p.protocol,
    )
    write_parquet(snakemake.output.decisions, decisions.assign(benchmark=snakemake.wildcards.benchmark))
    log.info("%d decisions", len(decisions))

"""One shard of a generative model's confidences on every benchmark's validation instances."""

from unsure.forkserver import hand_off

hand_off()

import pandas as pd

from unsure.config import Model
from unsure.decisionrisk.infer import generative_scorer
from unsure.engine import load_engine
from unsure.engine.shards import request_cache, run_shard
from unsure.logs import logged

with logged(snakemake.log[0]):
    p, wc = snakemake.params, snakemake.wildcards
    entry = Model.model_validate(p.entry)
    rows = pd.concat([pd.read_parquet(f) for f in snakemake.input.instances], ignore_index=True)
    rows = rows[rows["split"] == "val"]
    engine = load_engine(entry)
    score = generative_scorer(engine, instruct=entry.instruct, normalize=p.normalize, max_new_tokens=p.max_new_tokens)
    run_shard(
        rows,
        score,
        snakemake.output[0],
        shard=int(wc.shard),
        n_shards=int(wc.n_shards),
        chunk_rows=p.chunk_rows,
        fingerprint={"normalize": p.normalize},  # the prompts key each row (score.requests)
        model=entry,
        tokens=engine.tokens_processed,
        cache=request_cache(snakemake.config),
        requests=score.requests,
    )

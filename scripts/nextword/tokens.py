"""Token level (appendix D): the model's next-token log-probabilities of the human responses' first tokens."""

from unsure.forkserver import hand_off

hand_off()

import pandas as pd
import torch

from unsure.config import Model
from unsure.engine import load_engine
from unsure.engine.shards import request_cache, run_shard
from unsure.logs import logged
from unsure.nextword.inference import position_rows, token_scorer

torch.set_num_threads(snakemake.threads)

with logged(snakemake.log[0]):
    p, wc = snakemake.params, snakemake.wildcards
    entry = Model.model_validate(p.entry)
    if entry.backend != "hf":
        raise ValueError(
            f"studies.nextword.token_models: {wc.model!r} is not a Hugging Face model (no token log-probabilities)"
        )
    engine = load_engine(entry)
    score = token_scorer(engine, pd.read_parquet(snakemake.input.human))
    run_shard(
        position_rows(pd.read_parquet(snakemake.input.positions)),
        score,
        snakemake.output[0],
        shard=0,
        n_shards=1,
        chunk_rows=64,
        # each position's context ids, read tokens and human words key it (score.requests); the
        # fingerprint names the table its rows make, so that the biased estimator's never share its cache
        fingerprint={"scorer": "tokens"},
        model=entry,
        tokens=engine.tokens_processed,
        cache=request_cache(snakemake.config),
        requests=score.requests,
    )

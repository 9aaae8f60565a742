"""Sample next words for one shard of the positions: unbiased/tempered sampling or a chat prompting mode."""

from unsure.forkserver import hand_off

hand_off()

import pandas as pd
import torch

from unsure.config import Model
from unsure.engine import load_engine
from unsure.engine.shards import request_cache, run_shard
from unsure.logs import logged
from unsure.nextword.inference import chat_scorer, position_rows, sample_scorer

torch.set_num_threads(snakemake.threads)

with logged(snakemake.log[0]) as log:
    p, wc = snakemake.params, snakemake.wildcards
    entry = Model.model_validate(p.entry)
    rows = position_rows(pd.read_parquet(snakemake.input.positions))
    engine = load_engine(entry)
    if wc.mode in ("single", "list"):
        score = chat_scorer(engine, mode=wc.mode, n=p.n, seed=p.seed, max_new_tokens=p.max_new_tokens)
    else:
        temperature = float(wc.mode[1:])
        score = sample_scorer(engine, n=p.n, temperature=temperature, seed=p.seed, max_new_tokens=p.max_new_tokens)
    log.info("%s, %s: %d samples per context", wc.model, wc.mode, p.n)
    run_shard(
        rows,
        score,
        snakemake.output[0],
        shard=int(wc.shard),
        n_shards=p.n_shards,
        chunk_rows=16,
        fingerprint={"mode": wc.mode},  # n, seeds, lengths and prompts key each row (score.requests)
        model=entry,
        tokens=engine.tokens_processed,
        cache=request_cache(snakemake.config),
        requests=score.requests,
    )

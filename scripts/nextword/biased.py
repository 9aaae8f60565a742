"""The biased estimator (appendix A) for one shard: support from samples, nucleus, greedy, corpus and human words."""

import pandas as pd
import torch

from unsure.engine import load_engine
from unsure.engine.shards import run_shard
from unsure.logs import logged
from unsure.nextword.data import read_samples
from unsure.nextword.inference import biased_scorer, position_rows

torch.set_num_threads(snakemake.threads)

with logged(snakemake.log[0]):
    p, wc = snakemake.params, snakemake.wildcards
    if p.entry.backend != "hf":
        raise ValueError(
            f"studies.nextword.biased_models: {wc.model!r} is not a Hugging Face model (no log-probabilities)"
        )
    engine = load_engine(p.entry)
    score = biased_scorer(
        engine,
        samples=read_samples(snakemake.input.samples),
        human=pd.read_parquet(snakemake.input.human),
        corpus=pd.read_parquet(snakemake.input.corpus),
        nucleus=p.nucleus,
        nucleus_samples=p.nucleus_samples,
        seed=p.seed,
        max_new_tokens=p.max_new_tokens,
    )
    run_shard(
        position_rows(pd.read_parquet(snakemake.input.positions)),
        score,
        snakemake.output[0],
        shard=int(wc.shard),
        n_shards=p.n_shards,
        chunk_rows=16,
        fingerprint={"model": p.entry.model_dump(), "nucleus": p.nucleus, "n": p.nucleus_samples, "seed": p.seed},
        tokens=engine.tokens_processed,
    )

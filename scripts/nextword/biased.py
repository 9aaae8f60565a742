"""The biased estimator (appendix A), one shard: surface forms of samples, nucleus, greedy, corpus and typed words."""

from unsure.forkserver import hand_off

hand_off()

import pandas as pd
import torch

from unsure.config import Model
from unsure.engine import load_engine
from unsure.engine.shards import request_cache, run_shard
from unsure.logs import logged
from unsure.nextword.data import read_surface_samples
from unsure.nextword.inference import biased_scorer, position_rows

torch.set_num_threads(snakemake.threads)

with logged(snakemake.log[0]):
    p, wc = snakemake.params, snakemake.wildcards
    entry = Model.model_validate(p.entry)
    if entry.backend != "hf":
        raise ValueError(
            f"studies.nextword.biased_models: {wc.model!r} is not a Hugging Face model (no log-probabilities)"
        )
    engine = load_engine(entry)
    positions = pd.read_parquet(snakemake.input.positions)
    score = biased_scorer(
        engine,
        samples=read_surface_samples(snakemake.input.samples),
        human=pd.read_parquet(snakemake.input.typed),
        corpus=positions[["text_id", "word_num"]].assign(surface=positions["corpus_word"]),
        nucleus=p.nucleus,
        nucleus_samples=p.nucleus_samples,
        seed=p.seed,
        max_new_tokens=p.max_new_tokens,
    )
    run_shard(
        position_rows(positions),
        score,
        snakemake.output[0],
        shard=int(wc.shard),
        n_shards=p.n_shards,
        chunk_rows=16,
        # each position's sampling requests (nucleus, sample count, seeds, lengths) and its support's
        # surfaces (samples, typed responses, corpus word) key it (score.requests); the fingerprint
        # names the table its rows make, so that the token level's rows never share its cache folder
        fingerprint={"scorer": "biased"},
        model=entry,
        tokens=engine.tokens_processed,
        cache=request_cache(snakemake.config),
        requests=score.requests,
    )

"""Score one shard of the items under every k / demonstration-set context with one model."""

from unsure.forkserver import hand_off

hand_off()

import pandas as pd

from unsure.config import Model
from unsure.engine import load_engine
from unsure.engine.shards import request_cache, run_shard
from unsure.labelbias.prompts import pools
from unsure.labelbias.scoring import ItemScorer, chat_wrapper, plain, prompt_fit, task_prompting
from unsure.logs import logged

with logged(snakemake.log[0]):
    p = snakemake.params
    entry = Model.model_validate(p.entry)
    tasks = pd.read_parquet(snakemake.input.tasks)
    items = pd.read_parquet(snakemake.input.score_items)
    engine = load_engine(entry)
    chat = p.chat and entry.instruct
    scorer = ItemScorer(
        engine,
        task_prompting(tasks, pools(pd.read_parquet(snakemake.input.instances))),
        shots=p.shots,
        sets=p.sets,
        wrap=chat_wrapper(engine) if chat else plain,
        paper_prompt=p.protocol == "paper",
        fit=prompt_fit(engine, p.max_prompt_tokens) if p.protocol == "paper" else None,
    )
    run_shard(
        items,
        scorer,
        snakemake.output[0],
        shard=int(snakemake.wildcards.lb_shard),
        n_shards=p.shards,
        chunk_rows=p.chunk_rows,
        # the prompts key each item (scorer.requests: definitions, demonstrations, template, fit);
        # the fingerprint holds the (k, set) lists each result row carries
        fingerprint={"shots": list(p.shots), "sets": p.sets},
        model=entry,
        tokens=engine.tokens_processed,
        cache=request_cache(snakemake.config),
        requests=scorer.requests,
    )

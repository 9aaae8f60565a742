"""Risk scores of one model on one shard of one task's rows, with one prompting kind."""

import pandas as pd

from unsure.config import Model
from unsure.engine import load_engine
from unsure.engine.shards import request_cache, run_shard
from unsure.logs import logged
from unsure.riskscores.dictionary import read_dictionary
from unsure.riskscores.prompts import draw_shots
from unsure.riskscores.scoring import make_scorer
from unsure.riskscores.tasks import scored_rows, task_from_spec

with logged(snakemake.log[0]) as log:
    p, wc = snakemake.params, snakemake.wildcards
    task = task_from_spec(wc.rs_task, p.spec, read_dictionary(snakemake.input.dictionary))
    rows = pd.read_parquet(snakemake.input.rows)
    shots = draw_shots(rows[rows["split"] == "train"], p.few_shot, p.seed)
    entry = Model.model_validate(p.model)
    engine = load_engine(entry)
    score = make_scorer(
        engine,
        task,
        wc.rs_prompting,
        year=p.year,
        instruct=entry.instruct,
        both_orders=p.both_orders,
        shots=shots,
        protocol=p.protocol,
    )
    fingerprint = {"model": p.model, "task": repr(task), "prompting": wc.rs_prompting, "both_orders": p.both_orders,
                   "shots": [s.text for s in shots], "year": p.year, "protocol": p.protocol}  # fmt: skip
    run_shard(
        scored_rows(rows, p.threshold_rows)[["row_id", "text"]],
        score,
        snakemake.output[0],
        shard=int(wc.rs_shard),
        n_shards=p.shards,
        chunk_rows=p.chunk_rows,
        fingerprint=fingerprint,
        model=entry,
        tokens=engine.tokens_processed,
        cache=request_cache(snakemake.config),
    )

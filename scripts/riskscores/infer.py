"""Risk scores of one model on one shard of every task's rows, with every prompting kind: the
model loads once per job."""

from unsure.forkserver import hand_off

hand_off()

from functools import partial

import pandas as pd

from unsure.config import Model
from unsure.engine import load_engine
from unsure.engine.shards import request_cache, run_shard
from unsure.logs import logged
from unsure.riskscores.dictionary import read_dictionary
from unsure.riskscores.prompts import draw_shots, row_texts
from unsure.riskscores.scoring import make_scorer
from unsure.riskscores.tasks import scored_rows, task_from_spec

with logged(snakemake.log[0]) as log:
    p, wc = snakemake.params, snakemake.wildcards
    dictionary = read_dictionary(snakemake.input.dictionary)
    entry = Model.model_validate(p.model)
    engine = load_engine(entry)
    outputs = iter(snakemake.output)  # RS_SCORED's order: each task, then each prompting
    for task_name, rows_path in zip(p.tasks, snakemake.input.rows, strict=True):
        task = task_from_spec(task_name, p.specs[task_name], dictionary)
        rows = pd.read_parquet(rows_path)
        texts = partial(row_texts, features=task.features, dictionary=dictionary, protocol=p.protocol)
        shots = draw_shots(rows[rows["split"] == "train"], p.few_shot, p.seed, texts)
        scored = scored_rows(rows, p.threshold_rows)
        scored = scored.assign(text=texts(scored))[["row_id", "text"]]
        for prompting in p.prompting:
            score = make_scorer(
                engine,
                task,
                prompting,
                year=p.year,
                instruct=entry.instruct,
                both_orders=p.both_orders,
                shots=shots,
                protocol=p.protocol,
            )
            # the prompts key each row (score.requests); the fingerprint holds what reads the answers
            fingerprint = {"task": repr(task), "prompting": prompting, "both_orders": p.both_orders,
                           "protocol": p.protocol}  # fmt: skip
            log.info("%s, %s, %s: shard %s", wc.rs_model, task_name, prompting, wc.rs_shard)
            run_shard(
                scored,
                score,
                next(outputs),
                shard=int(wc.rs_shard),
                n_shards=p.shards,
                chunk_rows=p.chunk_rows,
                fingerprint=fingerprint,
                model=entry,
                tokens=engine.tokens_processed,
                cache=request_cache(snakemake.config),
                requests=score.requests,
            )

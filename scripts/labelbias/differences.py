"""One model: each prompt-changing difference between the protocols flipped alone. The prompts a
difference changes are scored as the other protocol renders them (nothing else is rescored), and
the per-task metrics are recomputed with those rows replaced, for tables/reproduction."""

from unsure.forkserver import hand_off

hand_off()

import pandas as pd

from unsure.config import Model
from unsure.engine import load_engine
from unsure.io import write_parquet
from unsure.labelbias.prompts import build_items, pools, read_templates
from unsure.labelbias.reproduction import flip_evidence, flipped_metrics, prompt_flips
from unsure.labelbias.scoring import chat_wrapper, plain, prompt_fit, score_contexts_both, task_prompting
from unsure.logs import logged

with logged(snakemake.log[0]) as log:
    p, model = snakemake.params, snakemake.wildcards.lb_model
    entry = Model.model_validate(p.entry)
    tasks = pd.read_parquet(snakemake.input.tasks)
    instances = pd.read_parquet(snakemake.input.instances)
    other_items = build_items(
        instances,
        shots=p.shots,
        sets=p.sets,
        content_free=p.content_free,
        n_domain=p.domain_inputs,
        seed=p.seed,
        protocol="corrected" if p.protocol == "paper" else "paper",
        templates=read_templates(snakemake.input.templates[0] if snakemake.input.templates else None),
    )
    engine = load_engine(entry)
    try:
        fit = prompt_fit(engine, p.max_prompt_tokens)
    except ValueError as err:
        log.warning("prompt limit not measured: %s", err)
        fit = None
    prompting = task_prompting(tasks, pools(instances))
    flips = prompt_flips(
        pd.read_parquet(snakemake.input.score_items),
        other_items,
        prompting,
        shots=p.shots,
        sets=p.sets,
        protocol=p.protocol,
        fit=fit,
    )
    rescored = pd.concat([f.prompts.assign(difference=f.difference) for f in flips], ignore_index=True)
    wrap = chat_wrapper(engine) if p.chat and entry.instruct else plain
    probs, probs_paper = score_contexts_both(
        engine, [wrap(x) for x in rescored["prompt"]], [prompting[t].labels for t in rescored["task"]]
    )
    rescored["probs"] = [q.tolist() for q in probs]
    rescored["probs_paper"] = [q.tolist() for q in probs_paper]
    labels = {name: t.labels for name, t in prompting.items()}
    metrics = flipped_metrics(pd.read_parquet(snakemake.input.scores), flips, rescored, labels, [p.scoring])
    write_parquet(snakemake.output.metrics, metrics.assign(model=model))
    evidence = flip_evidence(flips).assign(model=model)
    write_parquet(snakemake.output.evidence, evidence)
    for row in evidence.itertuples(index=False):
        log.info(
            "%s: %s of %s prompts differ (%s); methods %s; longest prompt %s tokens (paper) / %s (corrected)",
            row.difference,
            row.changed,
            row.compared,
            row.changed_kinds or "none",
            row.methods or "none",
            row.longest_paper,
            row.longest_corrected,
        )
    log.info("%s: %d prompts rescored under the other protocol", model, len(rescored))

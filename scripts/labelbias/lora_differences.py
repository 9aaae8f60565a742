"""One model: each LoRA difference between the protocols (targets, examples) flipped alone. The
tasks are fine-tuned again at one (k, set), the first the run fine-tunes where the difference
changes the training examples, with the run's seed and settings, and their ``lora`` metrics
computed for tables/reproduction (the adapters are thrown away)."""

from unsure.forkserver import hand_off

hand_off()

import tempfile
from pathlib import Path

import pandas as pd

from unsure.config import Model
from unsure.io import write_parquet
from unsure.labelbias.finetune import LoraProtocol, finetune_and_score, lora_flip_plan, lora_settings
from unsure.labelbias.prompts import pools
from unsure.labelbias.reproduction import lora_flip_evidence, lora_flip_metrics
from unsure.labelbias.scoring import task_prompting
from unsure.logs import logged

with logged(snakemake.log[0]) as log:
    p, model = snakemake.params, snakemake.wildcards.lb_model
    entry = Model.model_validate(p.entry)
    prompting = task_prompting(
        pd.read_parquet(snakemake.input.tasks), pools(pd.read_parquet(snakemake.input.instances))
    )
    items = pd.read_parquet(snakemake.input.score_items)
    choices = LoraProtocol.of(p.protocol)
    flips = lora_flip_plan(prompting, [(int(k), int(s)) for k, s in p.runs], n_train=p.lora["n_train"], choices=choices)
    parts = []
    with tempfile.TemporaryDirectory(prefix="lora-flip-") as adapters:
        for flip in flips:
            if flip.unmeasured:
                log.info("%s: not fine-tuned again: %s", flip.difference, flip.unmeasured)
                continue
            log.info(
                "%s flipped: fine-tuning %d tasks at k=%d set=%d (%d of %d training examples differ)",
                flip.difference,
                len(prompting),
                flip.k,
                flip.set,
                flip.changed,
                flip.compared,
            )
            scores = finetune_and_score(
                entry,
                prompting,
                items,
                runs=[(flip.k, flip.set)],
                n_train=p.lora["n_train"],
                settings=lora_settings(p.lora, p.seed),
                adapters=Path(adapters, flip.difference),
                chat=p.chat and entry.instruct,
                choices=choices.flipped(flip.difference),
                max_prompt_tokens=p.max_prompt_tokens,
            )
            parts.append(scores.assign(difference=flip.difference))
    rescored = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["difference"])
    labels = {name: t.labels for name, t in prompting.items()}
    metrics = lora_flip_metrics(rescored, items, labels, [p.scoring])
    write_parquet(snakemake.output.metrics, metrics.assign(model=model))
    write_parquet(snakemake.output.evidence, lora_flip_evidence(flips).assign(model=model))
    log.info("%s: %d LoRA differences fine-tuned again, %d metric rows", model, len(parts), len(metrics))

"""Fine-tune LoRA adapters for the tasks of one part under every (k, set) context the config fine-tunes,
and score with them: the base model is loaded once for all of them."""

from unsure.forkserver import hand_off

hand_off()

import pandas as pd

from unsure.config import Model
from unsure.engine.shards import shard_of
from unsure.io import write_parquet
from unsure.labelbias.finetune import LoraProtocol, finetune_and_score, lora_settings
from unsure.labelbias.prompts import pools
from unsure.labelbias.scoring import task_prompting
from unsure.logs import logged

with logged(snakemake.log[0]) as log:
    p, wc = snakemake.params, snakemake.wildcards
    entry = Model.model_validate(p.entry)
    tasks = pd.read_parquet(snakemake.input.tasks)
    prompting = task_prompting(tasks, pools(pd.read_parquet(snakemake.input.instances)))
    names = pd.Series(sorted(prompting))
    mine = names[shard_of(names, p.parts) == int(wc.lb_part)]
    settings = lora_settings(p.lora, p.seed)
    runs = [(int(k), int(s)) for k, s in p.runs]
    log.info(
        "fine-tuning %d of %d tasks (part %s of %d) under %d (k, set) contexts",
        len(mine),
        len(names),
        wc.lb_part,
        p.parts,
        len(runs),
    )
    scores = finetune_and_score(
        entry,
        {name: prompting[name] for name in mine},
        pd.read_parquet(snakemake.input.score_items),
        runs=runs,
        n_train=p.lora["n_train"],
        settings=settings,
        adapters=snakemake.output.adapters,
        chat=p.chat and entry.instruct,
        choices=LoraProtocol.of(p.protocol),
        max_prompt_tokens=p.max_prompt_tokens,
    )
    write_parquet(snakemake.output.scores, scores)

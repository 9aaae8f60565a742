"""Fine-tune the model as a language model on the passages of every fold but one (appendix F); keep the loss curves."""

from unsure.forkserver import hand_off

hand_off()

import torch

from unsure.config import Model
from unsure.io import write_parquet
from unsure.logs import logged
from unsure.nextword.data import read_norms
from unsure.nextword.finetuning import finetune_lm, passage_folds, passage_texts

torch.set_num_threads(snakemake.threads)

with logged(snakemake.log[0]) as log:
    p, s = snakemake.params, snakemake.params.settings
    entry = Model.model_validate(p.entry)
    fold = int(snakemake.wildcards.fold)
    folds = passage_folds(*s["passages"], s["folds"])
    texts = passage_texts(read_norms(snakemake.input.norms))  # every passage: validation is outside the studied ones
    train = [t for i, f in enumerate(folds) if i != fold for t in f]
    first, last = s["validation_passages"]
    validation = [t for t in range(first, last + 1) if t in texts]
    missing = [t for t in train if t not in texts]
    if missing:
        raise ValueError(f"studies.nextword.finetune.passages: passage(s) {missing} are not in {snakemake.input.norms}")
    log.info("fold %d (%s): train on %s, validate on %s", fold, p.protocol, train, validation)
    losses = finetune_lm(
        entry.id,
        [texts[t] for t in train],
        [texts[t] for t in validation],
        snakemake.output.model,
        protocol=p.protocol,
        settings=s,
        revision=entry.revision,
    )
    log.info("%d trainable parameters\n%s", int(losses["trainable_parameters"].iloc[0]), losses)
    write_parquet(snakemake.output.losses, losses.assign(fold=fold))

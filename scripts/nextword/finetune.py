"""Fine-tune the model on the human responses of every fold but one (appendix F); keep the loss curves."""

import pandas as pd
import torch

from unsure.engine.finetune import FinetuneSettings, finetune
from unsure.io import write_parquet
from unsure.logs import logged
from unsure.nextword.finetuning import passage_folds, response_examples

torch.set_num_threads(snakemake.threads)

with logged(snakemake.log[0]) as log:
    p, s = snakemake.params, snakemake.params.settings
    fold = int(snakemake.wildcards.fold)
    folds = passage_folds(*s["passages"], s["folds"])
    positions, human = pd.read_parquet(snakemake.input.positions), pd.read_parquet(snakemake.input.human)
    train = [t for i, f in enumerate(folds) if i != fold for t in f]
    log.info("fold %d: train on passages %s, hold out %s", fold, train, folds[fold])
    settings = FinetuneSettings(**{k: s[k] for k in FinetuneSettings.__dataclass_fields__})
    losses = finetune(
        p.entry.id,
        response_examples(positions, human, train),
        snakemake.output.model,
        settings=settings,
        heldout=response_examples(positions, human, folds[fold]),
        revision=p.entry.revision,
    )
    write_parquet(snakemake.output.losses, losses.assign(fold=fold))

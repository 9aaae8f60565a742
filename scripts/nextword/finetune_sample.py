"""Sample the held-out fold from the fine-tuned model and from the model before fine-tuning."""

from unsure.forkserver import hand_off

hand_off()

import pandas as pd
import torch

from unsure.config import Model
from unsure.engine.hf import HFEngine
from unsure.logs import logged
from unsure.nextword.data import write_samples
from unsure.nextword.finetuning import passage_folds
from unsure.nextword.inference import position_rows, sample_counts, sample_scorer, surface_counts

torch.set_num_threads(snakemake.threads)

with logged(snakemake.log[0]) as log:
    p, s = snakemake.params, snakemake.params.settings
    entry = Model.model_validate(p.entry)
    fold = int(snakemake.wildcards.fold)
    rows = position_rows(pd.read_parquet(snakemake.input.positions), passage_folds(*s["passages"], s["folds"])[fold])
    for name, engine in (("base", HFEngine.from_config(entry)), ("tuned", HFEngine(snakemake.input.tuned))):
        shard = sample_scorer(engine, n=s["n_samples"], seed=p.seed, max_new_tokens=p.max_new_tokens)(rows)
        _, stats = sample_counts([shard])
        write_samples(snakemake.output[name], surface_counts([shard]))  # words as generated, as every samples file
        log.info("fold %d, %s: %s", fold, name, stats)

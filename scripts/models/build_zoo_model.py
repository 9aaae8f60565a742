"""Build one zoo model into resources/models/<name> (trained briefly when zoo.training or its own training is set)."""

from unsure.forkserver import hand_off

hand_off()

import torch

from unsure.config import ZooModel, ZooTraining
from unsure.logs import logged
from unsure.zoo.build import build, training_texts

torch.set_num_threads(snakemake.threads)

with logged(snakemake.log[0]) as log:
    p = snakemake.params
    name = snakemake.wildcards.name
    spec = ZooModel(**p.spec)
    texts = training_texts(seed=p.zoo_seed, n_sentences=p.corpus_sentences) if spec.trains_tokenizer else []
    training = None if p.training is None else ZooTraining.model_validate(p.training)
    base = snakemake.input.base[0] if snakemake.input.base else None
    build(name, spec, texts, snakemake.output[0], zoo_seed=p.zoo_seed, training=training, studies=p.studies, base=base)
    log.info("built zoo model %s into %s", name, snakemake.output[0])

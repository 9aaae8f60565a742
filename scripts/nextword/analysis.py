"""Follow-up analyses of one model: k% study, hard contexts (ARD), sample size, POS and meaning level."""

from unsure.forkserver import hand_off

hand_off()

import os

import pandas as pd

from unsure.generate import text
from unsure.io import write_json, write_parquet
from unsure.logs import logged
from unsure.nextword.analysis import (
    HARDNESS_CATEGORICAL,
    HARDNESS_NUMERIC,
    ard_regression,
    hardness_features,
    improvement_study,
    sample_size_study,
    summarize_improvement,
)
from unsure.nextword.data import read_samples
from unsure.nextword.semantic import (
    corpus_sentences,
    last_word_pos,
    load_word_vectors,
    nltk_tagger,
    train_tagger,
    train_word2vec,
)
from unsure.nextword.tables import group_tvds

with logged(snakemake.log[0]) as log:
    i, p, o = snakemake.input, snakemake.params, snakemake.params.options
    positions, splits = pd.read_parquet(i.positions), pd.read_parquet(i.splits)
    human = pd.read_parquet(i.human)
    model = read_samples(i.model, known=human)
    notes = {"system": p.system}
    if o["pos_tagger"] == "nltk":
        os.environ["NLTK_DATA"] = p.nltk_data
        tagger = nltk_tagger()
    else:
        tagger = train_tagger(o["corpus_sentences"], seed=o["seed"])
    notes["pos_tagger"] = tagger.source
    if o["word_vectors"] == "generated":
        vectors = train_word2vec(corpus_sentences(text.corpus_text(seed=o["seed"], n_sentences=o["corpus_sentences"])))
        notes["word_vectors"] = f"word2vec trained with gensim on {o['corpus_sentences']} generated sentences (demo)"
    else:
        vectors = load_word_vectors(p.vectors)
        notes["word_vectors"] = f"{o['word_vectors']} ({p.vectors})"
    log.info("POS tagger: %s; word vectors: %s", notes["pos_tagger"], notes["word_vectors"])
    seeds = range(o["seed"], o["seed"] + o["improvement_seeds"])
    study = improvement_study(model, human, ks=o["improvement_ks"], sizes=o["improvement_sizes"], seeds=seeds)
    write_parquet(snakemake.output.improvement, summarize_improvement(study))
    positions = positions.assign(last_pos=last_word_pos(positions["context"], tagger))
    features = hardness_features(positions, human, model, splits, seed=int(splits["seed"].min()))
    write_parquet(snakemake.output.hardness, features)
    ard = ard_regression(features, "tvd_model_oracle", HARDNESS_NUMERIC, HARDNESS_CATEGORICAL)
    write_parquet(snakemake.output.ard, ard)
    notes["ard"] = {k: v for k, v in ard.attrs.items()}
    sizes = [n for n in o["sample_sizes"]]
    seeds = range(o["seed"], o["seed"] + o["sample_size_seeds"])
    write_parquet(snakemake.output.sample_size, sample_size_study(model, human, sizes=sizes, seeds=seeds))
    groups = group_tvds(
        model,
        splits,
        positions,
        tagger=tagger,
        vectors=vectors,
        k_max=o["meaning_k_max"],
        seed=o["seed"],
        human=human if o["protocol"] == "paper" else None,  # the authors: model vs all responses
    )
    write_parquet(snakemake.output.groups, groups)
    write_json(snakemake.output.notes, notes)

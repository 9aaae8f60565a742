"""Increasing evidence: AUC, ECE, score spread and per-row scores as features are added two at
a time (least important first, by mean permutation importance over every model analysed), for
one model (or XGBoost) on one task."""

from unsure.forkserver import hand_off

hand_off()

import pandas as pd

from unsure.config import Model
from unsure.engine import load_engine
from unsure.io import write_parquet
from unsure.logs import logged
from unsure.riskscores.analysis import evidence_order, increasing_evidence
from unsure.riskscores.baselines import fit_baseline, positive_scores
from unsure.riskscores.dictionary import read_dictionary
from unsure.riskscores.scoring import feature_scorer
from unsure.riskscores.tasks import task_from_spec

with logged(snakemake.log[0]) as log:
    p, wc = snakemake.params, snakemake.wildcards
    dictionary = read_dictionary(snakemake.input.dictionary)
    task = task_from_spec(wc.rs_task, p.spec, dictionary)
    rows = pd.read_parquet(snakemake.input.rows)
    evaluation = rows[rows["split"] == "eval"].head(p.rows).reset_index(drop=True)
    order = evidence_order(pd.concat([pd.read_parquet(path) for path in snakemake.input.order]))
    log.info("features added in this order (least important first): %s", order)
    if p.model is None:
        train = rows[rows["split"] == "train"]

        def score(frame, features):
            model = fit_baseline("xgboost", train, features, dictionary, seed=p.seed)
            return positive_scores(model, frame, features)
    else:
        entry = Model.model_validate(p.model)
        score = feature_scorer(
            load_engine(entry),
            task,
            dictionary,
            year=p.year,
            instruct=entry.instruct,
            both_orders=p.both_orders,
            protocol=p.protocol,
        )
    result = increasing_evidence(score, evaluation, order)
    result.insert(0, "task", task.name)
    result.insert(0, "model", wc.rs_model)
    log.info("%s on %s:\n%s", wc.rs_model, task.name, result[["n_features", "auc", "ece", "score_std"]].to_string())
    write_parquet(snakemake.output[0], result)

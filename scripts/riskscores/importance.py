"""Permutation importance (AUC drop) of each feature for one model (or XGBoost) on one task."""

from unsure.forkserver import hand_off

hand_off()

import pandas as pd

from unsure.config import Model
from unsure.engine import load_engine
from unsure.io import write_parquet
from unsure.logs import logged
from unsure.riskscores.analysis import permutation_importance
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
    features = list(task.features)
    if p.model is None:
        model = fit_baseline("xgboost", rows[rows["split"] == "train"], features, dictionary, seed=p.seed)

        def score(frame):
            return positive_scores(model, frame, features)
    else:
        entry = Model.model_validate(p.model)
        run = feature_scorer(
            load_engine(entry),
            task,
            dictionary,
            year=p.year,
            instruct=entry.instruct,
            both_orders=p.both_orders,
            protocol=p.protocol,
        )

        def score(frame):
            return run(frame, features)

    result = permutation_importance(score, evaluation, features, seed=p.seed)
    result.insert(0, "task", task.name)
    result.insert(0, "model", wc.rs_model)
    log.info("%s on %s: %s", wc.rs_model, task.name, result.set_index("feature")["auc_drop"].round(4).to_dict())
    write_parquet(snakemake.output[0], result)

"""Logistic regression and XGBoost on the training split, scored on the same rows as the models."""

from unsure.forkserver import hand_off

hand_off()

import pandas as pd

from unsure.io import write_parquet
from unsure.logs import logged
from unsure.riskscores.baselines import BASELINES, fit_baseline, positive_scores
from unsure.riskscores.dictionary import read_dictionary
from unsure.riskscores.tasks import scored_rows, task_from_spec

with logged(snakemake.log[0]) as log:
    p = snakemake.params
    dictionary = read_dictionary(snakemake.input.dictionary)
    task = task_from_spec(snakemake.wildcards.rs_task, p.spec, dictionary)
    rows = pd.read_parquet(snakemake.input.rows)
    scored = scored_rows(rows, p.threshold_rows)
    train = rows[(rows["split"] == "train") & ~rows["row_id"].isin(scored["row_id"])]
    frames = []
    for name in BASELINES:
        model = fit_baseline(name, train, task.features, dictionary, seed=p.seed)
        out = scored[["row_id", "split", "label"]].copy()
        out["p_hat"] = positive_scores(model, scored, task.features)
        out.insert(0, "prompting", "supervised")
        out.insert(0, "task", task.name)
        out.insert(0, "model", name)
        frames.append(out)
        log.info("%s on %s: trained on %d rows", name, task.name, len(train))
    write_parquet(snakemake.output[0], pd.concat(frames, ignore_index=True))

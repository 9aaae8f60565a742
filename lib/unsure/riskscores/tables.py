"""Metric frames and the paper's per-task tables (table 1: ACSIncome; A1-A4: the other tasks)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from unsure.riskscores.baselines import BASELINES
from unsure.riskscores.dictionary import DataDictionary
from unsure.riskscores.metrics import evaluate, fit_threshold
from unsure.riskscores.text import value_text

KEYS = ["model", "task", "prompting"]
PAPER_COLUMNS = {
    "ece": "ECE",
    "brier": "Brier",
    "auc": "AUC",
    "accuracy": "Accuracy",
    "accuracy_fitted": "Accuracy (fitted threshold)",
}
BASELINE_NAMES = {"logistic_regression": "LR", "xgboost": "XGBoost"}
PROMPTING_NAMES = {"multiple_choice": "multiple-choice", "numeric": "numeric", "supervised": "supervised"}


def merge_scores(rows: Mapping[str, pd.DataFrame], runs: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Per-row scores of every run (``model``, ``task``, ``prompting``, ``scores``) with the
    rows' label and split (training rows scored for the threshold become ``threshold``)."""
    frames = []
    for run in runs:
        task_rows = rows[run["task"]]
        merged = task_rows.merge(run["scores"], on="row_id", how="inner", validate="one_to_one")
        if len(merged) != len(run["scores"]):
            raise ValueError(f"{run['model']} / {run['task']} / {run['prompting']}: scores of rows not in the task")
        merged["split"] = merged["split"].where(merged["split"] == "eval", "threshold")
        frames.append(merged.assign(model=run["model"], task=run["task"], prompting=run["prompting"]))
    if not frames:
        return pd.DataFrame(columns=[*KEYS, "row_id", "split", "label", "p_hat"])
    out = pd.concat(frames, ignore_index=True)
    return out[[*KEYS, *[c for c in out.columns if c not in KEYS]]]


def metrics_frame(scores: pd.DataFrame) -> pd.DataFrame:
    """One row of :func:`~unsure.riskscores.metrics.evaluate` per (model, task, prompting).

    Metrics use the ``eval`` rows; the threshold is fitted on the ``threshold`` rows.
    A score that is NaN or outside [0, 1] (a failed or unparseable answer) is an
    error naming the run and its rows: dropping the row would compare models on
    different rows, and no imputed score is neutral for every metric. An
    evaluation set of one class has AUC NaN, with a warning.
    """
    records = []
    for key, group in scores.groupby(KEYS, sort=False):
        name = " / ".join(map(str, key))
        p = pd.to_numeric(group["p_hat"], errors="coerce")
        bad = p.isna() | (p < 0) | (p > 1)
        if bad.any():
            rows = ", ".join(map(repr, group.loc[bad, "row_id"].head(3)))
            raise ValueError(
                f"{name}: {int(bad.sum())} of {len(group)} scores (p_hat) are NaN or outside [0, 1], e.g. "
                f"row_id {rows}; rerun that inference, or leave the model out of this prompting"
            )
        ev = group[group["split"] == "eval"]
        if ev.empty:
            raise ValueError(f"{name}: no evaluation rows scored")
        fit = group[group["split"] == "threshold"]
        threshold = fit_threshold(fit["label"], fit["p_hat"]) if len(fit) else 0.5
        metrics = evaluate(ev["label"], ev["p_hat"], threshold=threshold, name=name)
        records.append(dict(zip(KEYS, key, strict=True)) | metrics)
    return pd.DataFrame(records)


def paper_table(metrics: pd.DataFrame, task: str) -> pd.DataFrame:
    """A task's table: ECE, Brier, AUC and accuracy of every model and prompting, then LR and XGBoost."""
    rows = metrics[metrics["task"] == task].copy()
    rows["_baseline"] = rows["model"].isin(BASELINES)
    rows = rows.sort_values(["_baseline", "prompting"], kind="stable")
    rows["model"] = rows["model"].map(lambda m: BASELINE_NAMES.get(m, m))
    rows["prompting"] = rows["prompting"].map(PROMPTING_NAMES)
    out = rows[["model", "prompting", *PAPER_COLUMNS]].rename(
        columns=PAPER_COLUMNS | {"model": "Model", "prompting": "Prompting"}
    )
    return out.reset_index(drop=True)


def subgroups_instances(rows: pd.DataFrame, scores: pd.DataFrame, dictionary: DataDictionary) -> pd.DataFrame:
    """Evaluation rows in the subgroups study's tabular schema (``unsure.subgroups.schema``).

    ``rows`` are the task rows (with ``task``), ``scores`` the per-row scores of
    every model; race and sex are the dictionary's words, age is ``AGEP``.
    """
    ev = scores[scores["split"] == "eval"]
    people = rows[["task", "row_id", "text", "RAC1P", "SEX", "AGEP"]]
    out = ev.merge(people, on=["task", "row_id"], how="left", validate="many_to_one", indicator=True)
    stray = out[out.pop("_merge") == "left_only"]
    if len(stray):
        first = stray.iloc[0]
        raise ValueError(
            f"{first['model']} / {first['task']}: {len(stray)} scored rows are not in the task's rows, e.g. "
            f"row_id {first['row_id']!r} (scores from another run of the task?)"
        )
    return pd.DataFrame(
        {
            "dataset": out["task"],
            "model": out["model"],
            "task": out["task"],
            "row_id": out["row_id"],
            "text": out["text"],
            "y_true": out["label"].astype(int),
            "p_hat": out["p_hat"].astype(float),
            "race": out["RAC1P"].map(lambda v: value_text("RAC1P", v, dictionary)),
            "sex": out["SEX"].map(lambda v: value_text("SEX", v, dictionary)),
            "age": out["AGEP"].astype(float),
        }
    )

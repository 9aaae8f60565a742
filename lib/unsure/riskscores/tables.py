"""Metric frames and the paper's per-task tables (table 1: ACSIncome; A1-A4: the other tasks); the
reproduction ledger is :mod:`unsure.riskscores.reproduction`."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from unsure.config import Protocol
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
FITTED_ACCURACY: dict[str, str] = {"corrected": "accuracy_fitted", "paper": "accuracy_fitted_balanced"}
"""The fitted-threshold accuracy each protocol's tables show: our accuracy-maximising threshold,
or folktexts' balanced-accuracy-maximising one."""
BASELINE_NAMES = {"logistic_regression": "LR", "xgboost": "XGBoost"}
PROMPTING_NAMES = {"multiple_choice": "multiple-choice", "numeric": "numeric", "supervised": "supervised"}

log = logging.getLogger(__name__)


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

    Metrics use the ``eval`` rows; both thresholds (accuracy- and balanced-accuracy-maximising)
    are fitted on the ``threshold`` rows.
    A NaN score (a reply with no probability, no answer letter among an API's
    top tokens) is left out and counted: ``n_unparsed`` evaluation rows beside
    the ``n`` scored ones, with a warning naming the run and rows, so that one
    unparseable reply does not stop every table while a model that fails often
    (or a bug that makes NaNs) stays in plain sight. A run with no parsed score
    is a row of NaN metrics. A number outside [0, 1] is an error naming the run
    and its rows: no scorer writes one. An evaluation set of one class has AUC
    NaN, with a warning.
    """
    records = []
    for key, group in scores.groupby(KEYS, sort=False):
        name = " / ".join(map(str, key))
        p = pd.to_numeric(group["p_hat"], errors="coerce")
        bad = p.notna() & ((p < 0) | (p > 1))
        if bad.any():
            raise ValueError(
                f"{name}: {int(bad.sum())} of {len(group)} scores (p_hat) are outside [0, 1], e.g. "
                f"row_id {_first_rows(group, bad)}; rerun that inference"
            )
        is_eval = group["split"] == "eval"
        if not is_eval.any():
            raise ValueError(f"{name}: no evaluation rows scored")
        unparsed, unparsed_fit = int((p.isna() & is_eval).sum()), int((p.isna() & ~is_eval).sum())
        if unparsed or unparsed_fit:
            log.warning(
                "%s: %d of %d evaluation scores (and %d of %d threshold scores) are NaN, e.g. row_id %s: "
                "left out of the metrics and counted in n_unparsed",
                name, unparsed, int(is_eval.sum()), unparsed_fit, int((~is_eval).sum()), _first_rows(group, p.isna()),
            )  # fmt: skip
        ev, fit = group[is_eval & p.notna()], group[~is_eval & p.notna()]
        metrics: dict[str, float] = {"n": 0.0}
        if not ev.empty:
            threshold = fit_threshold(fit["label"], fit["p_hat"]) if len(fit) else 0.5
            balanced = fit_threshold(fit["label"], fit["p_hat"], "balanced_accuracy") if len(fit) else 0.5
            metrics = evaluate(ev["label"], ev["p_hat"], threshold=threshold, threshold_balanced=balanced, name=name)
        records.append(dict(zip(KEYS, key, strict=True)) | {"n": metrics.pop("n"), "n_unparsed": unparsed} | metrics)
    return pd.DataFrame(records)


def _first_rows(group: pd.DataFrame, mask: pd.Series) -> str:
    return ", ".join(map(repr, group.loc[mask, "row_id"].head(3)))


def paper_table(metrics: pd.DataFrame, task: str, *, protocol: Protocol) -> pd.DataFrame:
    """A task's table: ECE, Brier, AUC and accuracy of every model and prompting, then LR and XGBoost.

    The fitted-threshold accuracy is the protocol's (:data:`FITTED_ACCURACY`)."""
    rows = metrics[metrics["task"] == task].copy()
    if protocol == "paper" and "accuracy_fitted_balanced" in rows.columns:
        rows["accuracy_fitted"] = rows["accuracy_fitted_balanced"]
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
    every model; race and sex are the dictionary's words, age is ``AGEP``. NaN
    scores (unparsed answers, counted in the metrics' ``n_unparsed``) are left out.
    """
    ev = scores[scores["split"] == "eval"]
    if unparsed := int(ev["p_hat"].isna().sum()):
        log.warning("%d NaN scores (unparsed answers) left out of the subgroups study's input", unparsed)
        ev = ev[ev["p_hat"].notna()]
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


HEADLINE_PROMPTINGS = {"multiple_choice": "multiple choice", "numeric": "numeric"}
"""The promptings of the language models (``supervised`` is the baselines'), as the profile names them."""


def headline(metrics_path: str | os.PathLike[str], *, protocol: Protocol) -> pd.DataFrame:
    """AUC and ECE (10 equal-width bins) of every language model per task and prompting, read from
    ``scores/metrics.parquet``: the study's numbers in the cross-study profile (:mod:`unsure.profile`).

    One row per (model, measure, task): ``model, study, measure, setting, value, protocol, better,
    calibration``; ``protocol`` is the one the prompts were built under (``studies.riskscores.protocol``).
    The baselines (LR, XGBoost) are no language model and are left out.
    """
    metrics = pd.read_parquet(metrics_path)
    llm = metrics[metrics["prompting"].isin(list(HEADLINE_PROMPTINGS))]
    parts = []
    for column, name, better, calibration in (("auc", "AUC", "higher", False), ("ece", "ECE", "lower", True)):
        parts.append(
            pd.DataFrame(
                {
                    "model": llm["model"].astype(str),
                    "study": "riskscores",
                    "measure": [f"{name}, {HEADLINE_PROMPTINGS[p]}" for p in llm["prompting"]],
                    "setting": llm["task"].astype(str),
                    "value": llm[column].astype(float),
                    "protocol": protocol,
                    "better": better,
                    "calibration": calibration,
                }
            )
        )
    out = pd.concat(parts, ignore_index=True)
    return out[out["value"].notna()].reset_index(drop=True)

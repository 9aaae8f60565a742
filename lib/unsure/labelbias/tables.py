"""From per-item label probabilities to calibrated predictions and metrics per task, k, set and method."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import pandas as pd

from unsure.config import Protocol
from unsure.labelbias import calibration, metrics

METHODS = ("none", "cc", "dc", "looc", "lora")
"""No mitigation, contextual, domain-context and leave-one-out calibration, LoRA fine-tuning."""
METRICS = ("accuracy", "macro_f1", "macro_f1_paper", "rsd", "bias_score")
"""``macro_f1`` averages over the labels that occur as gold or prediction (ours), ``macro_f1_paper``
over the gold labels only (the authors')."""
GROUP = ["task", "k", "set"]


def explode_scores(scored: pd.DataFrame, items: pd.DataFrame) -> pd.DataFrame:
    """One row per (item, context): the inference output's lists unrolled and joined with the items."""
    if scored.empty:
        raise ValueError("no scored items")
    lists = ["k", "set", "probs"] + (["probs_paper"] if "probs_paper" in scored else [])
    long = scored.explode(lists, ignore_index=True)
    long["k"] = long["k"].astype(np.int64)
    long["set"] = long["set"].astype(np.int64)
    missing = set(long["row_id"]) - set(items["row_id"])
    if missing:
        raise ValueError(f"scored row_id {sorted(missing)[0]!r} is not one of the prepared items")
    meta = items.drop(columns=["k", "set"])
    out = long.merge(meta, on="row_id", how="left", validate="many_to_one")
    columns = ["task", "row_id", "kind", "gold", "k", "set", "left_out", "probs"]
    if "probs_paper" in out:
        out["probs_paper"] = [np.asarray(p, dtype=np.float64).tolist() for p in out["probs_paper"]]
        columns.append("probs_paper")
    out["probs"] = [np.asarray(p, dtype=np.float64).tolist() for p in out["probs"]]
    return out[columns]


def under_scoring(frame: pd.DataFrame, scoring: str) -> pd.DataFrame:
    """``frame`` with ``probs`` holding the label distributions of one scoring (``corrected``:
    ``probs``; ``paper``: ``probs_paper``), so the evaluation runs once per scoring."""
    if scoring == "corrected":
        return frame.drop(columns=["probs_paper"], errors="ignore")
    if scoring != "paper":
        raise ValueError(f"unknown label scoring {scoring!r} (paper or corrected)")
    if "probs_paper" not in frame:
        raise ValueError("these scores carry no paper-scoring probabilities (probs_paper); rerun the inference")
    return frame.drop(columns=["probs"]).rename(columns={"probs_paper": "probs"})


def _index(rows: pd.DataFrame, column: str, labels: Sequence[str]) -> np.ndarray:
    """Positions of ``rows[column]`` (gold or predicted labels) in the task's label set."""
    lookup = {lab: i for i, lab in enumerate(labels)}
    bad = ~rows[column].isin(list(lookup))
    if bad.any():
        row = rows[bad].iloc[0]
        raise ValueError(
            f"task {row['task']!r}, row_id {row['row_id']!r}: {column} label {row[column]!r} is not in the "
            f"task's label set {list(labels)} (were the items prepared from another SNI copy?)"
        )
    out: np.ndarray = np.asarray(rows[column].map(lookup), dtype=np.int64)
    return out


def _stack(probs: pd.Series) -> np.ndarray:
    return np.stack([np.asarray(p, dtype=np.float64) for p in probs])


def method_probabilities(
    long: pd.DataFrame, labels: dict[str, Sequence[str]], lora: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Evaluation and held-out probabilities under every method, per task, k and set.

    Returns ``task, row_id, kind, gold, k, set, method, probs, pred, correct,
    confidence`` (``pred`` the argmax label, ``confidence`` its probability).
    LOOC needs demonstrations, so it is absent for k = 0; ``lora`` rows (from
    the fine-tuned models, ``task, row_id, k, set, probs``) are added as they come.
    """
    parts = []
    instances = long[long["kind"].isin(["eval", "heldout"])]
    calib = {key: part for key, part in long[long["kind"].isin(["cc", "dc", "looc"])].groupby(GROUP, sort=False)}
    for key, part in instances.groupby(GROUP, sort=True):
        task = str(key[0])
        p = _stack(part["probs"])
        base = part[["task", "row_id", "kind", "gold", "k", "set"]]
        cal = calib.get(key, long.iloc[:0])
        estimates: dict[str, np.ndarray | None] = {"none": None}
        for kind in ("cc", "dc"):
            rows = cal[cal["kind"] == kind]
            if len(rows):
                estimates[kind] = calibration.mean_prediction(_stack(rows["probs"]))
        looc = cal[cal["kind"] == "looc"]
        if len(looc):
            estimates["looc"] = calibration.leave_one_out_estimate(
                _stack(looc["probs"]), _index(looc, "gold", labels[task])
            )
        for method, p_hat in estimates.items():
            q = p if p_hat is None else calibration.calibrate(p, p_hat)
            parts.append(_with_predictions(base.assign(method=method), q, labels[task]))
    if lora is not None and len(lora):
        parts.extend(_lora_parts(lora, instances, labels))
    out = pd.concat(parts, ignore_index=True)
    return out.sort_values(["task", "k", "set", "method", "kind", "row_id"], kind="stable", ignore_index=True)


def lora_probabilities(lora: pd.DataFrame, items: pd.DataFrame, labels: dict[str, Sequence[str]]) -> pd.DataFrame:
    """The ``lora`` method's rows of :func:`method_probabilities` alone, from fine-tuned models' scores
    (``task, row_id, k, set, probs``) and the items they score (``task, row_id, kind, gold``): what a
    second fine-tuning run (a LoRA difference flipped) needs, with no in-context scores at hand."""
    instances = items[items["kind"].isin(["eval", "heldout"])]
    out = pd.concat(_lora_parts(lora, instances, labels), ignore_index=True)
    return out.sort_values(["task", "k", "set", "method", "kind", "row_id"], kind="stable", ignore_index=True)


def _lora_parts(lora: pd.DataFrame, instances: pd.DataFrame, labels: dict[str, Sequence[str]]) -> list[pd.DataFrame]:
    meta = instances[["task", "row_id", "kind", "gold"]].drop_duplicates("row_id")
    tuned = lora.merge(meta, on=["task", "row_id"], how="inner", validate="many_to_one")
    parts = []
    for key, part in tuned.groupby(GROUP, sort=True):
        base = part[["task", "row_id", "kind", "gold", "k", "set"]].assign(method="lora")
        parts.append(_with_predictions(base, _stack(part["probs"]), labels[str(key[0])]))
    return parts


def _with_predictions(base: pd.DataFrame, q: np.ndarray, labels: Sequence[str]) -> pd.DataFrame:
    pred = q.argmax(axis=1)
    out = base.copy()
    out["probs"] = list(q)
    out["pred"] = [labels[i] for i in pred]
    out["correct"] = (out["pred"] == out["gold"]).astype(np.int8)
    out["confidence"] = q[np.arange(len(q)), pred]
    return out


def task_metrics(probs: pd.DataFrame, labels: dict[str, Sequence[str]]) -> pd.DataFrame:
    """Accuracy, macro-F1 and RSD on the evaluation instances, BiasScore on the held-out ones.

    One row per (task, k, set, method).
    """
    rows = []
    for (task, k, s, method), part in probs.groupby([*GROUP, "method"], sort=True):
        labs = labels[str(task)]
        ev = part[part["kind"] == "eval"]
        ho = part[part["kind"] == "heldout"]
        y, yhat = _index(ev, "gold", labs), _index(ev, "pred", labs)
        rows.append(
            {
                "task": task,
                "k": k,
                "set": s,
                "method": method,
                "n_eval": len(ev),
                "n_heldout": len(ho),
                "accuracy": metrics.accuracy(y, yhat) if len(ev) else np.nan,
                "macro_f1": metrics.macro_f1(y, yhat) if len(ev) else np.nan,
                "macro_f1_paper": metrics.macro_f1(y, yhat, gold_only=True) if len(ev) else np.nan,
                "rsd": metrics.rsd(y, yhat) if len(ev) else np.nan,
                "bias_score": metrics.bias_score(_index(ho, "gold", labs), _stack(ho["probs"])) if len(ho) else np.nan,
            }
        )
    return pd.DataFrame(rows)


def summarize(
    per_task: pd.DataFrame,
    models: pd.DataFrame,
    interchangeable: set[str],
    semantically_equivalent: set[str] | None = None,
) -> pd.DataFrame:
    """Metrics averaged over tasks and demonstration sets, per model, k and method, for all tasks,
    for the tasks with interchangeable labels and (given) for the paper's tasks with semantically
    equivalent labels (``subset``)."""
    tagged = per_task.merge(models, on="model", how="left")
    subsets = [
        tagged.assign(subset="all"),
        tagged[tagged["task"].isin(interchangeable)].assign(subset="interchangeable"),
    ]
    if semantically_equivalent is not None:
        subsets.append(tagged[tagged["task"].isin(semantically_equivalent)].assign(subset="semantically_equivalent"))
    both = pd.concat(subsets, ignore_index=True)
    keys = ["subset", "model", "family", "size", "variant", "k", "method"]
    out = both.groupby(keys, sort=False)[list(METRICS)].mean().reset_index()
    out["n_tasks"] = both.groupby(keys, sort=False)["task"].nunique().to_numpy()
    method_order = {m: i for i, m in enumerate(METHODS)}
    model_order = {m: i for i, m in enumerate(models["model"])}
    return out.sort_values(
        ["subset", "model", "method", "k"],
        key=lambda c: c.map(model_order) if c.name == "model" else c.map(method_order) if c.name == "method" else c,
        ignore_index=True,
    )


def subgroups_instances(probs: pd.DataFrame, items: pd.DataFrame, *, k: int, s: int) -> pd.DataFrame:
    """Per-instance results for the subgroups study (``unsure.subgroups.schema``): the evaluation
    instances of every model without mitigation, under one (k, set) context."""
    chosen = probs[(probs["kind"] == "eval") & (probs["method"] == "none") & (probs["k"] == k) & (probs["set"] == s)]
    if chosen.empty:
        raise ValueError(f"no evaluation scores for k = {k}, set {s} (studies.labelbias.subgroups_shots/_set)")
    text = items.set_index("row_id")["input"]
    return pd.DataFrame(
        {
            "dataset": "sni",
            "model": chosen["model"].to_numpy(),
            "task": chosen["task"].to_numpy(),
            "row_id": chosen["row_id"].to_numpy(),
            "text": text.loc[chosen["row_id"]].to_numpy(),
            "correct": chosen["correct"].to_numpy(np.int8),
            "confidence": chosen["confidence"].to_numpy(np.float64),
        }
    )


MITIGATION_NAMES = {"cc": "CC", "dc": "DC", "looc": "LOOC", "lora": "LoRA"}


def headline(summary_path: str | os.PathLike[str], *, protocol: Protocol) -> pd.DataFrame:
    """BiasScore and RSD of each model without mitigation and under its best mitigation, read from
    ``tables/summary.csv`` (all tasks, ``protocol``'s label scoring): the study's numbers in the
    cross-study profile (:mod:`unsure.profile`).

    The best mitigation is the (method, k) with the lowest RSD (the paper's measure of label bias),
    and "before" is no mitigation at that same k, so the two differ by the mitigation alone.
    BiasScore (the label-averaged prediction's distance from uniform) is the study's calibration
    measure; ties go to the earlier method in :data:`METHODS`, then the smaller k.
    """
    summary = pd.read_csv(summary_path)
    summary = summary[summary["subset"] == "all"]
    rows = []
    for model, part in summary.groupby("model", sort=False):
        unmitigated = part[part["method"] == "none"].set_index("k")
        mitigated = part[part["method"].isin(list(MITIGATION_NAMES)) & part["k"].isin(unmitigated.index)]
        mitigated = mitigated.dropna(subset=["rsd"]).assign(_order=lambda d: d["method"].map(METHODS.index))
        if mitigated.empty:
            continue
        best = mitigated.sort_values(["rsd", "_order", "k"], kind="stable").iloc[0]
        k = int(best["k"])
        before = unmitigated.loc[best["k"]]
        for column, name, calibrates in (("bias_score", "BiasScore", True), ("rsd", "RSD", False)):
            for stage, setting, value in (
                ("no mitigation", f"k={k}", before[column]),
                ("best mitigation", f"{MITIGATION_NAMES[best['method']]}, k={k}", best[column]),
            ):
                rows.append(
                    {
                        "model": str(model),
                        "study": "labelbias",
                        "measure": f"{name}, {stage}",
                        "setting": setting,
                        "value": float(value),
                        "protocol": protocol,
                        "better": "lower",
                        # the model as it is: a mitigation's BiasScore is the mitigation's
                        "calibration": calibrates and stage == "no mitigation",
                    }
                )
    columns = ["model", "study", "measure", "setting", "value", "protocol", "better", "calibration"]
    out = pd.DataFrame(rows, columns=columns)
    return out[out["value"].notna()].reset_index(drop=True)

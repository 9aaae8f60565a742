"""From per-instance confidences to decisions, and from decisions to the study's tables.

Confidence sets are long frames: one row per (``model``, ``method``,
``row_id``) with ``confidences`` (a distribution over the choices) and
``parsed`` (false only for a chat reply that could not be parsed). Methods:
``softmax`` (the encoder), ``loglik`` and ``verbal`` (generative models).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from unsure.config import Protocol
from unsure.decisionrisk.data import ORIGINAL
from unsure.decisionrisk.metrics import (
    composite_risk,
    decision_accuracy,
    risk_coverage,
    significance_vs_random,
    stars,
)
from unsure.decisionrisk.rules import NONE, RULES, ForestSettings, decide, features, fit_rules

INSTANCE_COLUMNS = ["row_id", "split", "injection", "answerable", "prompt", "choices", "label", "category"]


def generative_confidences(model: str, scores: pd.DataFrame) -> pd.DataFrame:
    """A generative model's shard outputs (``loglik``, ``verbal``, ``parsed``) as long confidence rows."""
    parts = []
    for method in ("loglik", "verbal"):
        if method not in scores.columns or scores[method].isna().all():
            continue
        part = scores[["row_id", method]].rename(columns={method: "confidences"})
        part = part.assign(model=model, method=method, parsed=scores["parsed"] if method == "verbal" else True)
        parts.append(part)
    if not parts:
        raise ValueError(f"model {model!r}: its scores hold neither log-likelihood nor verbal confidences")
    return pd.concat(parts, ignore_index=True)


def encoder_confidences(model: str, scores: pd.DataFrame) -> pd.DataFrame:
    """The encoder's softmax confidences as long confidence rows."""
    return scores[["row_id", "confidences"]].assign(model=model, method="softmax", parsed=True)


def decide_benchmark(
    instances: pd.DataFrame,
    confidences: pd.DataFrame,
    similarities: pd.DataFrame,
    *,
    encoder: str,
    injections: Sequence[str],
    forest: ForestSettings | None = None,
    seed: int = 0,
    protocol: Protocol,
) -> pd.DataFrame:
    """Fit every rule on the encoder's training rows and decide on every model's validation rows.

    ``protocol``: ``paper`` (the paper's rules) or ``corrected`` (plus the correctness Calibrator).

    Returns one row per (model, method, rule, trained_on, validation row) with
    the decision ``dr``, the rule's ``score``, the selection ``prediction`` and
    whether it is ``correct``, and the instance's ``injection`` and ``answerable``.
    """
    base = instances[INSTANCE_COLUMNS].merge(similarities[["row_id", "similarities"]], on="row_id", how="left")
    if base["similarities"].isna().any():
        missing = base.loc[base["similarities"].isna(), "row_id"].iloc[0]
        raise ValueError(f"no prompt-choice similarities for row {missing!r}")
    enc = confidences[(confidences["model"] == encoder) & (confidences["method"] == "softmax")]
    train = features(base[base["split"] == "train"].merge(enc[["row_id", "confidences"]], on="row_id"))
    if train.empty:
        raise ValueError(f"no training rows with confidences of the encoder {encoder!r}")
    fitted = fit_rules(train, injections, forest=forest or ForestSettings(), seed=seed, protocol=protocol)
    val = base[base["split"] == "val"]
    out = []
    for (model, method), conf in confidences.groupby(["model", "method"], sort=False):
        rows = features(val.merge(conf[["row_id", "confidences"]], on="row_id"))
        if rows.empty:
            continue
        decisions = decide(fitted, rows)
        keep = rows[["row_id", "injection", "answerable", "prediction", "correct", "category"]]
        out.append(decisions.merge(keep, on="row_id").assign(model=model, method=method))
    result = pd.concat(out, ignore_index=True)
    result["correct"] = result["correct"].astype(bool)
    return result


def _accuracy_counts(part: pd.DataFrame) -> tuple[int, int]:
    right = (part["dr"].astype(bool) == part["answerable"].astype(bool)).sum()
    return int(right), len(part)


def decision_risk_table(
    decisions: pd.DataFrame, injections: Sequence[str], *, levels: Sequence[float] = (0.90, 0.95, 0.99)
) -> pd.DataFrame:
    """Table 1: decision accuracy in-domain and out-of-domain, with significance against Random.

    For a rule trained on injection function f (or on none), in-domain
    accuracy is measured on the original validation instances plus their
    f-injected copies; out-of-domain accuracy is the mean over every other
    function g of the same with g. Significance: :func:`significance_vs_random`
    on the pooled counts of each setting.
    """
    rows = []
    keys = ["benchmark", "model", "method"]
    for (benchmark, model, method), part in decisions.groupby(keys, sort=True):
        for trained_on in injections:
            for rule in RULES:
                sub = part[(part["rule"] == rule) & part["trained_on"].isin([trained_on, NONE])]
                if sub.empty:
                    continue
                acc, counts = {}, {}
                for g in injections:
                    ev = sub[sub["injection"].isin([ORIGINAL, g])]
                    acc[g] = decision_accuracy(ev["dr"], ev["answerable"])
                    counts[g] = _accuracy_counts(ev)
                others = [g for g in injections if g != trained_on]
                p_in = significance_vs_random(*counts[trained_on])
                right_out = sum(counts[g][0] for g in others)
                p_out = significance_vs_random(right_out, sum(counts[g][1] for g in others))
                rows.append(
                    {
                        "benchmark": benchmark,
                        "model": model,
                        "method": method,
                        "trained_on": trained_on,
                        "rule": rule,
                        "in_domain": acc[trained_on],
                        "in_domain_sig": stars(p_in, levels),
                        "out_of_domain": float(np.mean([acc[g] for g in others])),
                        "out_of_domain_sig": stars(p_out, levels),
                        "p_in_domain": p_in,
                        "p_out_of_domain": p_out,
                    }
                )
    return pd.DataFrame(rows)


def composite_risk_table(decisions: pd.DataFrame, *, level: float = 0.95) -> pd.DataFrame:
    """Table 2: sensitivity, specificity and relative risk ratio on the original instances."""
    original = decisions[decisions["injection"] == ORIGINAL]
    rows = []
    keys = ["model", "method", "rule", "trained_on", "benchmark"]
    for key, part in original.groupby(keys, sort=True):
        risk = composite_risk(part["dr"], part["correct"], level=level)
        rows.append(
            dict(zip(keys, key, strict=True))
            | {
                "sensitivity": risk.sensitivity,
                "specificity": risk.specificity,
                "rrr": risk.rrr,
                "rrr_low": risk.rrr_low,
                "rrr_high": risk.rrr_high,
                "answered": risk.answered,
                "abstained": risk.abstained,
            }
        )
    return pd.DataFrame(rows)


def rule_label(rule: str, trained_on: str) -> str:
    """``DwD (NQ)`` for a rule trained on an injection function, the rule's name otherwise."""
    return rule if trained_on == NONE else f"{rule} ({trained_on})"


def risk_coverage_curves(decisions: pd.DataFrame) -> pd.DataFrame:
    """Risk-coverage curves on the original instances, ordered by each rule's score.

    ConfStd's score (the standard deviation of the confidences) does not depend
    on the injection it was tuned on, so it has one curve.
    """
    original = decisions[decisions["injection"] == ORIGINAL]
    parts = []
    for (benchmark, model, method, rule, trained_on), part in original.groupby(
        ["benchmark", "model", "method", "rule", "trained_on"], sort=True
    ):
        if rule == "ConfStd":
            if trained_on != sorted(original.loc[original["rule"] == rule, "trained_on"].unique())[0]:
                continue
            label = rule
        else:
            label = rule_label(rule, trained_on)
        curve = risk_coverage(part["score"], part["correct"])
        parts.append(curve.assign(benchmark=benchmark, model=f"{model} ({method})", rule=label))
    return pd.concat(parts, ignore_index=True)


def verbal_parse_table(confidences: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Per chat model and benchmark: replies asked for, replies that could not be parsed, and their share."""
    rows = []
    for benchmark, conf in confidences.items():
        verbal = conf[conf["method"] == "verbal"]
        for model, part in verbal.groupby("model", sort=True):
            bad = int((~part["parsed"].astype(bool)).sum())
            rows.append(
                {"model": model, "benchmark": benchmark, "replies": len(part), "unparseable": bad,
                 "unparseable_share": bad / len(part)}
            )  # fmt: skip
    return pd.DataFrame(rows, columns=["model", "benchmark", "replies", "unparseable", "unparseable_share"])


def unparsed_notes(confidences: Mapping[str, pd.DataFrame]) -> dict[tuple[str, str], str]:
    """Per (``model (verbal)``, benchmark) with unparseable chat replies: a note for its figure panel."""
    notes = {}
    for benchmark, row in verbal_parse_table(confidences).set_index("benchmark").iterrows():
        if row["unparseable"]:  # short: it sits above a panel a quarter of the figure wide
            what = "all" if row["unparseable"] == row["replies"] else f"{row['unparseable']} of"
            notes[(f"{row['model']} (verbal)", str(benchmark))] = (
                f"{what} {row['replies']} replies unparseable: uniform"
            )
    return notes


def subgroups_input(instances: pd.DataFrame, confidences: pd.DataFrame) -> pd.DataFrame:
    """Per-instance rows for the subgroups study (schema in :mod:`unsure.subgroups.schema`).

    Original validation instances only; every generative model through its
    log-likelihood confidences (its verbal ones when it has none) and the
    encoder through its softmax. ``confidence`` is the probability of the
    selected choice.
    """
    val = instances[(instances["split"] == "val") & (instances["injection"] == ORIGINAL)]
    preferred = []
    for _, part in confidences.groupby("model", sort=False):
        methods = set(part["method"])
        method = next(m for m in ("softmax", "loglik", "verbal") if m in methods)
        preferred.append(part[part["method"] == method])
    conf = pd.concat(preferred, ignore_index=True)
    rows = val.merge(conf[["row_id", "model", "confidences"]], on="row_id")
    matrix = [np.asarray(c, dtype=np.float64) for c in rows["confidences"]]
    prediction = np.array([int(np.argmax(c)) for c in matrix])
    return pd.DataFrame(
        {
            "dataset": rows["benchmark"],
            "model": rows["model"],
            "task": rows["benchmark"],
            "row_id": rows["row_id"],
            "text": rows["prompt"],
            "correct": (prediction == rows["label"].to_numpy()).astype(np.int8),
            "confidence": [float(c[p]) for c, p in zip(matrix, prediction, strict=True)],
            "category": rows["category"],
        }
    )


HEADLINE_RULE = "DwD"
"""The paper's risk-adjusted confidence: the rule whose numbers the profile shows."""


def headline(
    table1_path: str | os.PathLike[str],
    table2_path: str | os.PathLike[str],
    *,
    protocol: Protocol,
) -> pd.DataFrame:
    """Risk-adjusted accuracy and composite risk of every generative model per benchmark, read from
    ``tables/table1.csv`` and ``tables/table2.csv``: the study's numbers in the cross-study profile
    (:mod:`unsure.profile`).

    Both are DwD's (the risk-adjusted confidence) trained on WQ, the injection the paper reports
    composite risk for (NQ-trained rules overfit), or on the first injection after NQ where WQ is
    not run: its in-domain decision accuracy (answering exactly the answerable instances) and its
    relative risk ratio P(wrong | answer) / P(right | abstain) on the original instances (below 1,
    answering is the safer side). A model's log-likelihood confidences are used, its verbal ones
    where it has none (as in its subgroups input); the encoder (softmax) is not a generative model.
    """
    t1, t2 = pd.read_csv(table1_path), pd.read_csv(table2_path)
    trained = sorted(set(t1.loc[t1["rule"] == HEADLINE_RULE, "trained_on"]))
    columns = ["model", "study", "measure", "setting", "value", "protocol", "better", "calibration"]
    if not trained:
        return pd.DataFrame(columns=columns)
    injection = "WQ" if "WQ" in trained else next((t for t in trained if t != "NQ"), trained[0])
    rows = []
    for table, column, name, better in (
        (t1, "in_domain", "risk-adjusted accuracy", "higher"),
        (t2, "rrr", "composite risk (RRR)", "lower"),
    ):
        chosen = table[(table["rule"] == HEADLINE_RULE) & (table["trained_on"] == injection)]
        for model, part in chosen.groupby("model", sort=False):
            methods = set(part["method"])
            method = next((m for m in ("loglik", "verbal") if m in methods), None)
            if method is None:
                continue
            for _, row in part[part["method"] == method].iterrows():
                rows.append(
                    {
                        "model": str(model),
                        "study": "decisionrisk",
                        "measure": f"{name}, {HEADLINE_RULE} ({injection})",
                        "setting": str(row["benchmark"]),
                        "value": float(row[column]),
                        "protocol": protocol,
                        "better": better,
                        "calibration": False,
                    }
                )
    out = pd.DataFrame(rows, columns=columns)
    return out[out["value"].notna()].reset_index(drop=True)

"""Which features a scorer relies on, and how its scores change with more evidence.

* Permutation importance: the drop in AUC when one feature's values are
  permuted across rows (the rest of the row unchanged), averaged over
  ``repeats`` permutations. A scorer is any function of a frame of rows.
* Increasing evidence: feature sets grown two features at a time, starting
  from the least important by mean importance over all models analysed (the
  paper's figure A8: "added in order of mean feature importance on all
  models", starting from place of birth and race); each set is scored and
  summarised by AUC, ECE and the spread (standard deviation) of the scores, and
  its per-row scores are kept for the score distributions of figure A7.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd

from unsure.riskscores.metrics import auc, ece

RowScorer = Callable[[pd.DataFrame], npt.NDArray[np.float64]]
"""Rows (feature columns) to scores; for LLMs it writes the text and asks the engine."""


def permuted(rows: pd.DataFrame, column: str, seed: int) -> pd.DataFrame:
    """``rows`` with ``column``'s values shuffled across rows (a seeded permutation)."""
    out = rows.copy()
    perm = np.random.default_rng(seed).permutation(len(rows))
    out[column] = rows[column].to_numpy()[perm]
    return out


def permutation_importance(
    score: RowScorer, rows: pd.DataFrame, features: Sequence[str], *, seed: int, repeats: int = 1
) -> pd.DataFrame:
    """Per feature: the AUC drop when it is permuted (mean over repeats), and the base AUC.

    Rows of one class have no AUC: every drop is then NaN (with a warning) and
    no permutation is scored.
    """
    y = rows["label"].to_numpy()
    base_scores = score(rows)
    base = _parsed_auc(y, base_scores, name="permutation importance")
    if np.isnan(base):
        return pd.DataFrame({"feature": list(features), "auc_drop": np.nan, "auc": np.nan})
    records = []
    for i, col in enumerate(features):
        drops = []
        for r in range(repeats):
            s = score(permuted(rows, col, seed + 1000 * r + i))
            both = np.isfinite(base_scores) & np.isfinite(s)  # the drop compares the same rows
            drops.append(_parsed_auc(y[both], base_scores[both], name=col) - _parsed_auc(y[both], s[both], name=col))
        records.append({"feature": col, "auc_drop": float(np.mean(drops)), "auc": base})
    return pd.DataFrame(records)


def _parsed_auc(y: npt.NDArray[np.int_], s: npt.NDArray[np.float64], *, name: str) -> float:
    """AUC over the rows with a score: a chat API's unparseable reply is NaN (counted where
    it is scored), and one such row must not void the feature's result."""
    keep = np.isfinite(s)
    return auc(y[keep], s[keep], name=name)


def evidence_order(importance: pd.DataFrame) -> list[str]:
    """Features from the least to the most important by mean AUC drop over every model in
    ``importance`` (rows: model, feature, auc_drop); ties keep the first-seen order, and a
    feature no model could rank (NaN throughout) comes last."""
    if importance.empty:
        raise ValueError("no permutation importance to order the features by")
    mean = importance.groupby("feature", sort=False)["auc_drop"].mean()
    return [str(f) for f in mean.sort_values(kind="stable", na_position="last").index]


def evidence_steps(order: Sequence[str], step: int = 2) -> list[tuple[str, ...]]:
    """Feature sets of growing size: the first 2, 4, ... features of ``order`` (then all)."""
    sizes = [*range(step, len(order), step), len(order)]
    return [tuple(order[:k]) for k in sizes]


def increasing_evidence(
    score_subset: Callable[[pd.DataFrame, tuple[str, ...]], npt.NDArray[np.float64]],
    rows: pd.DataFrame,
    order: Sequence[str],
    *,
    step: int = 2,
) -> pd.DataFrame:
    """AUC, ECE and score spread for each feature set of :func:`evidence_steps`, with the
    set's per-row ``scores`` and ``labels`` (lists; NaN scores kept) for its distribution."""
    y = rows["label"].to_numpy()
    records = []
    for features in evidence_steps(order, step):
        scores = score_subset(rows, features)
        keep = np.isfinite(scores)  # unparseable replies (chat APIs) are NaN: counted, not scored
        s, yy = scores[keep], y[keep]
        records.append(
            {
                "n_features": len(features),
                "features": ",".join(features),
                "auc": auc(yy, s, name=f"increasing evidence, {len(features)} features"),
                "ece": ece(yy, s) if len(s) else np.nan,
                "score_std": float(np.std(s)) if len(s) else np.nan,
                "score_mean": float(np.mean(s)) if len(s) else np.nan,
                "n_unparsed": int((~keep).sum()),
                "scores": scores.astype(np.float64).tolist(),
                "labels": y.astype(np.int64).tolist(),
            }
        )
    return pd.DataFrame(records)

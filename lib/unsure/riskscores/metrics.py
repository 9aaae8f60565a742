"""Calibration and discrimination metrics of risk scores (plain functions of arrays).

ECE follows the paper (and folktexts, which uses ``netcal``): scores are binned
into 10 bins on [0, 1] (equal-width, or at score quantiles), and
``ECE = sum_m |B_m|/n * |mean_{B_m}(y) - mean_{B_m}(s)|``. Bins are half-open
``[a, b)`` with the last one closed, and scores are clipped to
``[eps, 1 - eps]``, exactly as ``netcal`` does, so the two agree to rounding
even for scores that sit on a bin edge (verbalised ``0.30``).

The confidence bias is ``R_bias = sum_m |B_m|/n * (Conf(B_m) - Acc(B_m))``
with ``Conf`` the mean score of the likelier class, ``max(s, 1 - s)``, and
``Acc`` the accuracy of predicting the likelier class: positive means
over-confident. Its weights sum to one, so it equals the mean confidence
minus the accuracy at threshold 0.5 whatever the bins.

The fitted threshold is fitted on a small labelled sample by one of two
rules. ``accuracy`` (ours) maximises accuracy: the candidates are the
midpoints between consecutive distinct sample scores (and 0 and 1); among ties
the one closest to 0.5 wins. ``balanced_accuracy`` (folktexts', so the
``paper`` protocol's) maximises TPR - FPR, i.e. balanced accuracy, over the
ROC curve's thresholds (the sample scores themselves); among ties the highest
wins, and the threshold is capped at 1. Both are computed in every run.

The signed calibration error (the paper's Eq. 3) is
``SCE = 1/n sum_m sum_{i in B_m} (s_i - y_i)``; the bins cancel, so it is the
mean score minus the positive rate: positive means scores too high. Figure A6
compares groups by ``Delta_SCE = SCE_A - SCE_B`` (:func:`sce_differences`).

Reliability curves (:func:`calibration_points`) carry a 95% Wilson score
interval of each bin's positive rate (figure A5): unlike the normal
approximation it stays inside [0, 1] and is not empty when a small subgroup
bin is all one class.
"""

from __future__ import annotations

import warnings
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy.special import expit, logit
from sklearn.metrics import accuracy_score, brier_score_loss, roc_auc_score

Floats = npt.NDArray[np.float64]
Strategy = Literal["uniform", "quantile"]
ThresholdRule = Literal["accuracy", "balanced_accuracy"]
THRESHOLD_RULES: tuple[ThresholdRule, ...] = ("accuracy", "balanced_accuracy")


class UndefinedMetricWarning(UserWarning):
    """A metric is undefined for these inputs and reported as NaN (e.g. AUC with one class)."""


def _check(y: npt.ArrayLike, s: npt.ArrayLike) -> tuple[npt.NDArray[np.int64], Floats]:
    ss = np.asarray(s, dtype=np.float64)
    yf = np.asarray(y, dtype=np.float64)
    if yf.shape != ss.shape or yf.ndim != 1:
        raise ValueError(f"labels and scores must be 1-D of the same length, got {yf.shape} and {ss.shape}")
    bad = np.flatnonzero(~np.isin(yf, (0, 1)))
    if len(bad):
        raise ValueError(f"labels must be 0 or 1; {len(bad)} are not, the first at position {bad[0]}: {yf[bad[0]]}")
    bad = np.flatnonzero(~np.isfinite(ss) | (ss < 0) | (ss > 1))
    if len(bad):
        raise ValueError(
            f"scores must be finite numbers in [0, 1]; {len(bad)} are not, the first at position {bad[0]}: {ss[bad[0]]}"
        )
    return yf.astype(np.int64), ss


def bin_edges(s: Floats, n_bins: int, strategy: Strategy) -> Floats:
    """Bin edges on [0, 1]: equal width, or at the scores' quantiles (ends pinned to 0 and 1)."""
    grid = np.linspace(0.0, 1.0, n_bins + 1)
    if strategy == "uniform":
        return grid
    if strategy == "quantile":
        edges = np.quantile(s, grid)
        edges[0], edges[-1] = 0.0, 1.0
        return np.asarray(edges, dtype=np.float64)
    raise ValueError(f"unknown binning strategy {strategy!r} (uniform or quantile)")


def bin_index(s: Floats, edges: Floats) -> npt.NDArray[np.int64]:
    """Bin of each score: ``[a, b)`` bins, the last one closed."""
    idx = np.searchsorted(edges, s, side="right") - 1
    return np.clip(idx, 0, len(edges) - 2).astype(np.int64)


def _binned(
    y: npt.ArrayLike, s: npt.ArrayLike, n_bins: int, strategy: Strategy
) -> tuple[npt.NDArray[np.int64], Floats, npt.NDArray[np.int64]]:
    yy, ss = _check(y, s)
    eps = np.finfo(np.float64).eps
    ss = np.clip(ss, eps, 1 - eps)
    idx = bin_index(ss, bin_edges(ss, n_bins, strategy))
    return yy, ss, idx


def ece(y: npt.ArrayLike, s: npt.ArrayLike, *, n_bins: int = 10, strategy: Strategy = "uniform") -> float:
    """Expected calibration error of risk scores ``s`` for labels ``y``."""
    yy, ss, idx = _binned(y, s, n_bins, strategy)
    n = np.bincount(idx, minlength=n_bins)
    gap = np.abs(np.bincount(idx, yy, n_bins) - np.bincount(idx, ss, n_bins))
    return float(gap.sum() / n.sum())


def confidence_bias(y: npt.ArrayLike, s: npt.ArrayLike, *, n_bins: int = 10) -> float:
    """``R_bias``: mass-weighted mean over score bins of confidence minus accuracy."""
    yy, ss, idx = _binned(y, s, n_bins, "uniform")
    conf = np.maximum(ss, 1 - ss)
    correct = ((ss >= 0.5).astype(np.int64) == yy).astype(np.float64)
    n = np.bincount(idx, minlength=n_bins)
    diff = np.bincount(idx, conf, n_bins) - np.bincount(idx, correct, n_bins)
    return float(diff.sum() / n.sum())


def signed_calibration_error(y: npt.ArrayLike, s: npt.ArrayLike) -> float:
    """SCE (the paper's Eq. 3): mean of ``s - y``; positive when scores overestimate the positive class."""
    yy, ss = _check(y, s)
    if not len(yy):
        return float("nan")
    return float(np.mean(ss - yy))


def fit_threshold(y: npt.ArrayLike, s: npt.ArrayLike, rule: ThresholdRule = "accuracy") -> float:
    """The threshold on a labelled sample that maximises accuracy (ties: closest to 0.5) or,
    with ``rule="balanced_accuracy"``, TPR - FPR (ties: the highest; capped at 1; one class: 0.5)."""
    yy, ss = _check(y, s)
    if rule == "balanced_accuracy":
        return _balanced_threshold(yy, ss)
    if rule != "accuracy":
        raise ValueError(f"unknown threshold rule {rule!r} ({' or '.join(THRESHOLD_RULES)})")
    u = np.unique(ss)
    candidates = np.unique(np.concatenate([[0.0, 1.0 + 1e-12], (u[1:] + u[:-1]) / 2]))
    acc = np.array([np.mean((ss >= t) == yy) for t in candidates])
    best = candidates[acc == acc.max()]
    return float(min(best[np.argmin(np.abs(best - 0.5))], 1.0))


def _balanced_threshold(yy: npt.NDArray[np.int64], ss: Floats) -> float:
    from sklearn.metrics import roc_curve

    if len(np.unique(yy)) < 2:
        return 0.5
    fpr, tpr, thresholds = roc_curve(yy, ss)
    return float(min(thresholds[np.argmax(tpr - fpr)], 1.0))


def calibration_points(
    y: npt.ArrayLike, s: npt.ArrayLike, *, n_bins: int = 10, strategy: Strategy = "uniform"
) -> dict[str, Floats]:
    """Per non-empty bin: mean score, positive rate, size and the rate's 95% Wilson interval
    (``lower``, ``upper``): a reliability curve with its uncertainty."""
    yy, ss, idx = _binned(y, s, n_bins, strategy)
    n = np.bincount(idx, minlength=n_bins)
    keep = n > 0
    positives = np.bincount(idx, yy, n_bins)[keep]
    lower, upper = wilson_interval(positives, n[keep])
    return {
        "score": np.bincount(idx, ss, n_bins)[keep] / n[keep],
        "positive_rate": positives / n[keep],
        "n": n[keep].astype(np.float64),
        "lower": lower,
        "upper": upper,
    }


def wilson_interval(positives: npt.ArrayLike, n: npt.ArrayLike, *, confidence: float = 0.95) -> tuple[Floats, Floats]:
    """Wilson score interval of a binomial proportion ``positives / n`` (elementwise).

    ``(p + z²/2n ± z sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n)``; NaN where ``n`` is 0.
    """
    from scipy.stats import norm

    k = np.asarray(positives, dtype=np.float64)
    nn = np.asarray(n, dtype=np.float64)
    if np.any(k < 0) or np.any(k > nn):
        raise ValueError("positives must lie between 0 and n")
    z = float(norm.ppf(0.5 + confidence / 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        p = k / nn
        centre = (p + z**2 / (2 * nn)) / (1 + z**2 / nn)
        half = z * np.sqrt(p * (1 - p) / nn + z**2 / (4 * nn**2)) / (1 + z**2 / nn)
    # exact 0 and 1 at k = 0 and k = n, up to rounding that would make an error bar negative
    return np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)


def group_sce(y: npt.ArrayLike, s: npt.ArrayLike, groups: npt.ArrayLike) -> dict[str, float]:
    """The signed calibration error (Eq. 3) within each group: which groups' scores run high."""
    yy, ss = _check(y, s)
    g = np.asarray(groups).astype(str)
    if g.shape != yy.shape:
        raise ValueError(f"groups must have one entry per score, got {g.shape} for {yy.shape}")
    return {str(name): signed_calibration_error(yy[g == name], ss[g == name]) for name in np.unique(g)}


def sce_differences(
    y: npt.ArrayLike, s: npt.ArrayLike, groups: npt.ArrayLike, pairs: list[tuple[str, str]]
) -> dict[tuple[str, str], float]:
    """``Delta_SCE = SCE_A - SCE_B`` for each pair ``(A, B)`` (figure A6): positive when group A's
    scores are inflated more than B's, i.e. an undue score advantage of A when ``y = 1`` is the
    favourable outcome. NaN when either group has no rows."""
    per_group = group_sce(y, s, groups)
    nan = float("nan")
    return {(a, b): per_group.get(a, nan) - per_group.get(b, nan) for a, b in pairs}


def auc(y: npt.ArrayLike, s: npt.ArrayLike, *, name: str = "scores") -> float:
    """ROC AUC; NaN, with an :class:`UndefinedMetricWarning` naming ``name``, when one class is absent."""
    yy, ss = _check(y, s)
    if len(np.unique(yy)) < 2:
        only = f"every label is {yy[0]}" if len(yy) else "there are no rows"
        warnings.warn(f"{name}: AUC is undefined ({only}); reported as NaN", UndefinedMetricWarning, stacklevel=2)
        return float("nan")
    return float(roc_auc_score(yy, ss))


def evaluate(
    y: npt.ArrayLike,
    s: npt.ArrayLike,
    *,
    threshold: float = 0.5,
    threshold_balanced: float | None = None,
    n_bins: int = 10,
    name: str = "scores",
) -> dict[str, float]:
    """Every metric of the study for one set of scores.

    ``threshold`` is the one fitted to maximise accuracy (``accuracy_fitted``),
    ``threshold_balanced`` the one fitted to maximise balanced accuracy
    (``accuracy_fitted_balanced``; default: ``threshold``); ``accuracy`` always
    uses 0.5. AUC is NaN when only one class is present (an
    :class:`UndefinedMetricWarning` naming ``name`` says so); ECE, Brier and
    the rest are still defined then.
    """
    yy, ss = _check(y, s)
    balanced = threshold if threshold_balanced is None else threshold_balanced
    return {
        "n": float(len(yy)),
        "ece": ece(yy, ss, n_bins=n_bins),
        "ece_quantile": ece(yy, ss, n_bins=n_bins, strategy="quantile"),
        "brier": float(brier_score_loss(yy, ss, pos_label=1)),
        "auc": auc(yy, ss, name=name),
        "accuracy": float(accuracy_score(yy, ss >= 0.5)),
        "threshold": float(threshold),
        "accuracy_fitted": float(accuracy_score(yy, ss >= threshold)),
        "threshold_balanced": float(balanced),
        "accuracy_fitted_balanced": float(accuracy_score(yy, ss >= balanced)),
        "sce": signed_calibration_error(yy, ss),
        "r_bias": confidence_bias(yy, ss, n_bins=n_bins),
        "score_mean": float(ss.mean()),
        "score_std": float(ss.std()),
        "positive_rate": float(yy.mean()),
    }


def subgroup_gap(
    y: npt.ArrayLike, s: npt.ArrayLike, groups: npt.ArrayLike, *, grid: Floats | None = None, min_rows: int = 20
) -> dict[str, float]:
    """Mean score of each group minus the largest group's, at equal true probability.

    Each group's calibration map ``P(y = 1 | s)`` is fitted as a logistic
    regression on ``logit(s)`` (Platt) and inverted on a grid of true
    probabilities (0.1 .. 0.9): the gap is the mean, over the grid, of the
    score the group needs to reach that probability minus the reference
    group's. Groups with fewer than ``min_rows`` rows or one class are skipped.
    """
    from sklearn.linear_model import LogisticRegression

    yy, ss = _check(y, s)
    g = np.asarray(groups).astype(str)
    grid = np.linspace(0.1, 0.9, 9) if grid is None else grid
    eps = 1e-4
    x = logit(np.clip(ss, eps, 1 - eps))

    def inverse(mask: npt.NDArray[np.bool_]) -> Floats | None:
        if mask.sum() < min_rows or len(np.unique(yy[mask])) < 2:
            return None
        fit = LogisticRegression(C=1e6).fit(x[mask, None], yy[mask])
        a, b = float(fit.intercept_[0]), float(fit.coef_[0, 0])
        if abs(b) < 1e-9:
            return None
        out: Floats = expit((logit(grid) - a) / b)
        return out

    names, counts = np.unique(g, return_counts=True)
    ref = names[np.argmax(counts)]
    ref_curve = inverse(g == ref)
    gaps: dict[str, float] = {}
    if ref_curve is None:
        return gaps
    for name in names:
        curve = inverse(g == name)
        if curve is not None:
            gaps[str(name)] = float(np.mean(curve - ref_curve))
    return gaps

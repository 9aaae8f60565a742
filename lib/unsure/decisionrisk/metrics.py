"""Decision risk, composite risk and risk-coverage: plain functions of 0/1 arrays.

``dr`` is the decision (1 answer, 0 abstain), ``answerable`` whether the
instance has a right answer to give (original, not risk-injected), ``correct``
whether the model's selection (argmax) is right.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy import stats
from sklearn.metrics import accuracy_score

Array = npt.ArrayLike


def _binary(name: str, values: Array) -> npt.NDArray[np.bool_]:
    arr = np.asarray(values)
    if arr.ndim != 1 or not np.isin(arr, [0, 1]).all():
        raise ValueError(f"{name} must be a 1-d array of 0/1 (or bool) values")
    return arr.astype(bool)


def decision_accuracy(dr: Array, answerable: Array) -> float:
    """Share of instances where the rule answers exactly when there is a right answer."""
    return float(accuracy_score(_binary("answerable", answerable), _binary("dr", dr)))


def significance_vs_random(n_right: int, n: int) -> float:
    """One-sided p-value that a rule's decision accuracy beats the Random rule.

    The Random rule answers with probability 1/2 whatever the instance, so its
    expected accuracy is 1/2 on any mix of answerable and injected instances;
    the exact binomial test (``scipy.stats.binomtest``) asks whether ``n_right``
    correct decisions out of ``n`` exceed that.
    """
    if n == 0:
        return float("nan")
    return float(stats.binomtest(int(n_right), int(n), 0.5, alternative="greater").pvalue)


def stars(p: float, levels: Sequence[float] = (0.90, 0.95, 0.99)) -> str:
    """One ``*`` for every confidence level at which ``p`` is significant (p < 1 - level)."""
    return "" if np.isnan(p) else "*" * sum(p < 1 - level for level in levels)


@dataclass(frozen=True)
class CompositeRisk:
    """Sensitivity, specificity and the relative risk ratio with its interval."""

    sensitivity: float
    specificity: float
    rrr: float
    rrr_low: float
    rrr_high: float
    answered: int
    abstained: int


def relative_risk_ratio(
    wrong_answered: int, answered: int, correct_abstained: int, abstained: int, *, level: float = 0.95
) -> tuple[float, float, float]:
    """P(wrong | answered) / P(correct | abstained) and its log-scale (Katz) interval.

    The two proportions come from disjoint instances, so the variance of the log
    ratio is ``1/a - 1/n1 + 1/c - 1/n2`` (Katz et al., 1978). The interval is
    ``nan`` when a count is zero (the log ratio is then unbounded).
    """
    if answered == 0 or abstained == 0 or correct_abstained == 0:
        return float("nan"), float("nan"), float("nan")
    ratio = (wrong_answered / answered) / (correct_abstained / abstained)
    if wrong_answered == 0:
        return ratio, float("nan"), float("nan")
    se = np.sqrt(1 / wrong_answered - 1 / answered + 1 / correct_abstained - 1 / abstained)
    z = stats.norm.ppf(0.5 + level / 2)
    return ratio, float(ratio * np.exp(-z * se)), float(ratio * np.exp(z * se))


def composite_risk(dr: Array, correct: Array, *, level: float = 0.95) -> CompositeRisk:
    """Composite risk of a decision rule on original (answerable) instances.

    sensitivity ``P(dr = 1 | correct)``, specificity ``P(dr = 0 | wrong)``,
    and the relative risk ratio ``P(wrong | dr = 1) / P(correct | dr = 0)``:
    below 1, answering is the safer side of the rule's cut.
    """
    d, c = _binary("dr", dr), _binary("correct", correct)
    if len(d) != len(c):
        raise ValueError(f"dr has {len(d)} values but correct has {len(c)}")
    sens = float(d[c].mean()) if c.any() else float("nan")
    spec = float((~d[~c]).mean()) if (~c).any() else float("nan")
    rrr, low, high = relative_risk_ratio(
        int((d & ~c).sum()), int(d.sum()), int((~d & c).sum()), int((~d).sum()), level=level
    )
    return CompositeRisk(sens, spec, rrr, low, high, int(d.sum()), int((~d).sum()))


def risk_coverage(score: Array, correct: Array) -> pd.DataFrame:
    """Risk (error among answered) as coverage grows, answering the most confident first.

    Ties in ``score`` are answered together, so the curve does not depend on
    the order of tied instances.
    """
    s = np.asarray(score, dtype=np.float64)
    wrong = ~_binary("correct", correct)
    if len(s) != len(wrong):
        raise ValueError(f"score has {len(s)} values but correct has {len(wrong)}")
    if len(s) == 0:
        return pd.DataFrame({"coverage": [], "risk": []})
    order = np.argsort(-s, kind="stable")
    s, wrong = s[order], wrong[order]
    last_of_tie = np.r_[s[1:] != s[:-1], True]
    answered = np.arange(1, len(s) + 1)[last_of_tie]
    errors = np.cumsum(wrong)[last_of_tie]
    return pd.DataFrame({"coverage": answered / len(s), "risk": errors / answered})

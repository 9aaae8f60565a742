"""Decision rules: whether to answer (dr = 1) or abstain (dr = 0), with the argmax selection.

Each rule is fitted on the discriminative model's training instances and
applied to any model's confidences (the study's transfer setting):

* ``Random``: answers with probability 1/2;
* ``ConfStd``: answers when the standard deviation of the confidences reaches
  a threshold tuned for decision accuracy on the training split;
* ``Calibrator``: as the paper, a random forest predicting whether the
  instance is original (1) or injected (0) from the prompt length, the
  predicted answer's length and each choice's confidence, trained on equal
  numbers of original and injected instances, once per injection function;
* ``Calibrator-correct`` (protocol ``corrected`` only, not in the paper): the
  same forest predicting whether the selection is right, trained on the
  original instances only;
* ``DwD``: a random forest predicting whether the instance is answerable from
  the prompt length, the predicted answer's length, the standard deviation of
  the confidences, the prompt-choice embedding similarities and their standard
  deviation, trained on equal numbers of original and risk-injected
  instances. Its positive-class probability is the risk-adjusted confidence.

Rules that learn from injected instances (ConfStd, Calibrator, DwD) are fitted
once per injection function (``trained_on``); the others have
``trained_on = none``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pandas as pd
from sklearn.ensemble import RandomForestClassifier
from sklearn.metrics import roc_curve

from unsure.config import Protocol
from unsure.decisionrisk.data import ORIGINAL

RULES = ("Random", "ConfStd", "Calibrator", "DwD", "Calibrator-correct")
CORRECTNESS_CALIBRATOR = "Calibrator-correct"
"""The extra rule of the ``corrected`` protocol: P(the selection is right), original instances only."""
NONE = "none"
"""``trained_on`` of a rule that does not learn from injected instances."""


def _matrix(column: pd.Series, name: str) -> npt.NDArray[np.float64]:
    sizes = {len(v) for v in column}
    if len(sizes) != 1:
        raise ValueError(f"column {name!r}: every row needs the same number of values, got {sorted(sizes)}")
    return np.asarray(np.stack(column.to_numpy()), dtype=np.float64)


def features(rows: pd.DataFrame) -> pd.DataFrame:
    """The rules' features of each row (``prompt``, ``choices``, ``label``, ``confidences``, ``similarities``).

    Adds ``prediction`` (argmax), ``correct`` (the prediction is the gold
    choice; never on a no-right-answer instance), ``prompt_len`` and
    ``answer_len`` (characters), ``conf_<i>``, ``conf_std``, ``sim_<i>`` and
    ``sim_std``.
    """
    conf = _matrix(rows["confidences"], "confidences")
    sims = _matrix(rows["similarities"], "similarities")
    if conf.shape != sims.shape:
        raise ValueError(f"confidences have shape {conf.shape} but similarities {sims.shape}")
    pred = conf.argmax(axis=1)
    out = rows.reset_index(drop=True).copy()
    out["prediction"] = pred
    out["correct"] = pred == out["label"].to_numpy()
    out["prompt_len"] = out["prompt"].str.len()
    out["answer_len"] = [len(cs[p]) for cs, p in zip(out["choices"], pred, strict=True)]
    out["conf_std"] = conf.std(axis=1)
    out["sim_std"] = sims.std(axis=1)
    extra = {f"conf_{i}": conf[:, i] for i in range(conf.shape[1])}
    extra |= {f"sim_{i}": sims[:, i] for i in range(sims.shape[1])}
    return pd.concat([out, pd.DataFrame(extra)], axis=1)


def calibrator_columns(frame: pd.DataFrame) -> list[str]:
    conf = sorted((c for c in frame.columns if c.startswith("conf_") and c[5:].isdigit()), key=lambda c: int(c[5:]))
    return ["prompt_len", "answer_len", *conf]


def dwd_columns(frame: pd.DataFrame) -> list[str]:
    sims = sorted((c for c in frame.columns if c.startswith("sim_") and c[4:].isdigit()), key=lambda c: int(c[4:]))
    return ["prompt_len", "answer_len", "conf_std", *sims, "sim_std"]


@dataclass(frozen=True)
class ForestSettings:
    trees: int = 200
    max_depth: int | None = None
    min_samples_leaf: int = 5


def _forest(x: pd.DataFrame, y: npt.NDArray[np.bool_], settings: ForestSettings, seed: int) -> RandomForestClassifier:
    model = RandomForestClassifier(
        n_estimators=settings.trees,
        max_depth=settings.max_depth,
        min_samples_leaf=settings.min_samples_leaf,
        random_state=seed,
        n_jobs=1,
    )
    return model.fit(x.to_numpy(np.float64), y)


def _positive_proba(model: RandomForestClassifier, x: pd.DataFrame) -> npt.NDArray[np.float64]:
    """P(class 1); a forest that saw one class only predicts that class with certainty."""
    proba = model.predict_proba(x.to_numpy(np.float64))
    classes = list(model.classes_)
    if True in classes:
        return np.asarray(proba[:, classes.index(True)], dtype=np.float64)
    return np.zeros(len(x))


def tune_threshold(score: npt.ArrayLike, target: npt.ArrayLike) -> float:
    """The threshold ``t`` maximising the accuracy of ``score >= t`` against ``target``."""
    s, y = np.asarray(score, dtype=np.float64), np.asarray(target, dtype=bool)
    if y.all() or not y.any():
        return float(-np.inf) if y.all() else float(np.inf)
    fpr, tpr, thresholds = roc_curve(y, s, drop_intermediate=False)
    acc = (tpr * y.sum() + (1 - fpr) * (~y).sum()) / len(y)
    return float(thresholds[int(np.argmax(acc))])


def balanced(train: pd.DataFrame, injection: str, *, seed: int) -> pd.DataFrame:
    """Original instances and instances injected with ``injection``, in equal numbers (seeded)."""
    original = train[train["injection"] == ORIGINAL]
    injected = train[train["injection"] == injection]
    if original.empty or injected.empty:
        raise ValueError(f"training rows need original and {injection!r}-injected instances")
    n = min(len(original), len(injected))
    rng = np.random.default_rng(seed)
    pick = [part.iloc[np.sort(rng.choice(len(part), size=n, replace=False))] for part in (original, injected)]
    return pd.concat(pick, ignore_index=True)


@dataclass
class FittedRules:
    """Every rule fitted on one benchmark's training features."""

    seed: int
    thresholds: dict[str, float] = field(default_factory=dict)
    calibrator: dict[str, RandomForestClassifier] = field(default_factory=dict)
    correctness: RandomForestClassifier | None = None
    calibrator_columns: list[str] = field(default_factory=list)
    dwd: dict[str, RandomForestClassifier] = field(default_factory=dict)
    dwd_columns: list[str] = field(default_factory=list)


def fit_rules(
    train: pd.DataFrame,
    injections: Sequence[str],
    *,
    forest: ForestSettings | None = None,
    seed: int = 0,
    protocol: Protocol,
) -> FittedRules:
    """Fit ConfStd, Calibrator and DwD on training features (:func:`features`) with an ``injection`` column.

    ConfStd, Calibrator and DwD learn original (1) against injected (0) per
    injection function; ``protocol="corrected"`` adds the correctness
    Calibrator (:data:`CORRECTNESS_CALIBRATOR`).
    """
    forest = forest or ForestSettings()
    fitted = FittedRules(seed=seed)
    fitted.calibrator_columns = calibrator_columns(train)
    if protocol == "corrected":
        original = train[train["injection"] == ORIGINAL]
        target = original["correct"].to_numpy(bool)
        fitted.correctness = _forest(original[fitted.calibrator_columns], target, forest, seed)
    fitted.dwd_columns = dwd_columns(train)
    for injection in injections:
        data = balanced(train, injection, seed=seed)
        target = data["answerable"].to_numpy(bool)
        fitted.thresholds[injection] = tune_threshold(data["conf_std"], target)
        fitted.calibrator[injection] = _forest(data[fitted.calibrator_columns], target, forest, seed)
        fitted.dwd[injection] = _forest(data[fitted.dwd_columns], target, forest, seed)
    return fitted


def decide(fitted: FittedRules, rows: pd.DataFrame) -> pd.DataFrame:
    """Every rule's decision on every row: ``row_id, rule, trained_on, dr, score``.

    ``score`` is the rule's confidence that answering is right, which orders
    the risk-coverage curves: a uniform draw (Random), the standard deviation
    of the confidences (ConfStd), P(original) from the confidences (Calibrator),
    the risk-adjusted confidence P(answerable) (DwD) and P(correct)
    (Calibrator-correct).
    """
    ids = rows["row_id"].to_numpy()
    parts = []

    def add(rule: str, trained_on: str, dr: npt.ArrayLike, score: npt.ArrayLike) -> None:
        parts.append(pd.DataFrame({"row_id": ids, "rule": rule, "trained_on": trained_on, "dr": dr, "score": score}))

    draws = np.random.default_rng(fitted.seed).random(len(rows))
    add("Random", NONE, draws < 0.5, draws)
    std = rows["conf_std"].to_numpy(np.float64)
    for injection, threshold in fitted.thresholds.items():
        add("ConfStd", injection, std >= threshold, std)
    for injection, model in fitted.calibrator.items():
        p = _positive_proba(model, rows[fitted.calibrator_columns])
        add("Calibrator", injection, p >= 0.5, p)
    for injection, model in fitted.dwd.items():
        p = _positive_proba(model, rows[fitted.dwd_columns])
        add("DwD", injection, p >= 0.5, p)
    if fitted.correctness is not None:
        p = _positive_proba(fitted.correctness, rows[fitted.calibrator_columns])
        add(CORRECTNESS_CALIBRATOR, NONE, p >= 0.5, p)
    out = pd.concat(parts, ignore_index=True)
    out["dr"] = out["dr"].astype(np.int8)
    return out

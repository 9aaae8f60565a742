"""Performance and label-bias metrics of a classifier's label probabilities.

Labels are integer indices into the task's label set; probabilities are rows
over that set. All functions are plain array functions.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from sklearn.metrics import accuracy_score, f1_score

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]


def accuracy(y_true: Ints, y_pred: Ints) -> float:
    """Share of instances predicted right."""
    return float(accuracy_score(y_true, y_pred))


def macro_f1(y_true: Ints, y_pred: Ints, *, gold_only: bool = False) -> float:
    """F1 averaged over the labels that occur as gold or prediction (sklearn's macro average).

    ``gold_only`` averages over the labels that occur as gold only, as the
    authors' code does: a label predicted but never gold (F1 0) is left out.
    """
    labels = np.unique(y_true) if gold_only else None
    return float(f1_score(y_true, y_pred, labels=labels, average="macro", zero_division=0))


def class_accuracies(y_true: Ints, y_pred: Ints) -> Floats:
    """Recall of each gold label that occurs, in label order."""
    return np.array([np.mean(y_pred[y_true == c] == c) for c in np.unique(y_true)])


def rsd(y_true: Ints, y_pred: Ints) -> float:
    """Relative standard deviation of class-wise accuracy: std of per-class accuracies / overall accuracy.

    Zero when every class is predicted equally well; 0 by convention when the
    overall accuracy is 0 (as in the study).
    """
    acc = accuracy(y_true, y_pred)
    return 0.0 if acc == 0 else float(np.std(class_accuracies(y_true, y_pred)) / acc)


def bias_score(y_true: Ints, probs: Floats) -> float:
    """BiasScore: total variation distance between the label-averaged mean prediction and uniform.

    The predicted distributions are averaged within each gold label that occurs
    (labels absent from ``y_true`` are left out), those means are averaged, and
    the result is compared with the uniform distribution over all labels. 0 for
    a predictor that is unbiased on average, up to ``1 − 1/L`` for one that
    always puts all mass on one label.
    """
    probs = np.asarray(probs, dtype=np.float64)
    if probs.ndim != 2 or len(probs) != len(y_true) or len(probs) == 0:
        raise ValueError(f"need one probability row per gold label, got {probs.shape} for {len(y_true)} labels")
    means = np.stack([probs[y_true == c].mean(axis=0) for c in np.unique(y_true)])
    estimate = means.mean(axis=0)
    return float(0.5 * np.abs(estimate - 1.0 / probs.shape[1]).sum())

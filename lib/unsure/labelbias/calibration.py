"""Calibration of label probabilities against an estimate of the model's label bias.

Every method estimates the model's bias p̂ (a distribution over the labels) and
rescales each prediction: q ∝ p / p̂. They differ in where p̂ comes from:

* contextual calibration (CC): the mean prediction on content-free inputs;
* domain-context calibration (DC): the mean prediction on random in-domain words;
* leave-one-out calibration (LOOC): each demonstration scored with the other
  demonstrations as context, averaged within its gold label, then across labels.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]


def calibrate(probs: Floats, p_hat: Floats) -> Floats:
    """Rescale each row of ``probs`` by ``1 / p_hat`` and renormalise (q ∝ p / p̂)."""
    probs = np.asarray(probs, dtype=np.float64)
    p_hat = np.asarray(p_hat, dtype=np.float64)
    if p_hat.shape != probs.shape[-1:] or np.any(p_hat <= 0):
        raise ValueError(f"p_hat must be a positive vector over the {probs.shape[-1]} labels, got {p_hat}")
    q = probs / p_hat
    out: Floats = q / q.sum(axis=-1, keepdims=True)
    return out


def mean_prediction(probs: Floats) -> Floats:
    """p̂ of CC and DC: the mean predicted distribution over the calibration inputs."""
    probs = np.asarray(probs, dtype=np.float64)
    if probs.ndim != 2 or len(probs) == 0:
        raise ValueError(f"need at least one calibration prediction, got shape {probs.shape}")
    out: Floats = probs.mean(axis=0)
    return out


def leave_one_out_estimate(probs: Floats, gold: Ints) -> Floats:
    """p̂ of LOOC: predictions on the left-out demonstrations, averaged within gold labels, then across them.

    Averaging per label first keeps an unbalanced demonstration set from
    passing its label balance into the estimate.
    """
    probs = np.asarray(probs, dtype=np.float64)
    gold = np.asarray(gold)
    if probs.ndim != 2 or len(probs) != len(gold) or len(probs) == 0:
        raise ValueError(f"need one prediction per demonstration, got {probs.shape} for {len(gold)}")
    out: Floats = np.stack([probs[gold == c].mean(axis=0) for c in np.unique(gold)]).mean(axis=0)
    return out

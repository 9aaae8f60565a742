"""Cross-fitted encoder confidences of the training rows, so the decision rules learn from
confidences like those they meet at validation time.

An encoder scoring the rows it was fine-tuned on is overconfident on them (on
real PIQA, training accuracy 0.85 against 0.47 on validation), and rules fitted
on those confidences (ConfStd's threshold, the Calibrator's and DwD's forests)
do not transfer: ConfStd then abstains on nearly every validation row. So the
original training instances are split into ``k`` folds by instance, an encoder
is fine-tuned on every fold but one, and it scores the held-out fold's rows,
original and risk-injected alike (an injected copy shares its instance's
choices, so it goes with its instance). The validation rows are scored by the
encoder fine-tuned on all training instances (:data:`FULL`). This removes a
leak; it is not a change of the paper's method, so both protocols do it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import numpy.typing as npt
import pandas as pd

from unsure.decisionrisk.data import ORIGINAL

FULL = -1
"""The ``fold`` of a validation row: scored by the encoder fine-tuned on every training instance."""

Scorer = Callable[[pd.DataFrame], npt.NDArray[np.float64]]
"""Confidence sets (one row of choice probabilities per instance) of a fitted encoder."""


def instance_ids(rows: pd.DataFrame) -> pd.Series:
    """The original instance of each row: ``row_id`` without the ``-<injection>`` suffix of a copy."""
    ids = rows["row_id"].astype(str)
    injected = rows["injection"] != ORIGINAL
    suffix = "-" + rows["injection"].astype(str)
    bad = injected & ~pd.Series([i.endswith(s) for i, s in zip(ids, suffix, strict=True)], index=rows.index)
    if bad.any():
        raise ValueError(f"injected row {ids[bad].iloc[0]!r} does not end in its injection's name")
    base = [i[: -len(s)] if inj else i for i, s, inj in zip(ids, suffix, injected, strict=True)]
    return pd.Series(base, index=rows.index, name="instance")


def crossfit_folds(rows: pd.DataFrame, k: int, *, seed: int) -> npt.NDArray[np.int64]:
    """Fold (0..k-1) of each training row, by instance; :data:`FULL` for every validation row.

    The instances are permuted (seeded, in ``row_id`` order first so the fold
    does not depend on the rows' order) and dealt round-robin, so the folds
    differ in size by at most one instance.
    """
    if k < 2:
        raise ValueError(f"cross-fitting needs at least 2 folds, got {k}")
    train = (rows["split"] == "train").to_numpy()
    base = instance_ids(rows)
    instances = np.array(sorted(set(base[train])))
    if len(instances) < k:
        raise ValueError(f"{len(instances)} training instances cannot fill {k} folds")
    order = np.random.default_rng(seed).permutation(len(instances))
    fold_of = dict(zip(instances[order], np.arange(len(instances)) % k, strict=True))
    return np.array([fold_of[b] if t else FULL for b, t in zip(base, train, strict=True)], dtype=np.int64)


def fit_fold_encoders(
    rows: pd.DataFrame, folds: npt.NDArray[np.int64], fit: Callable[[pd.DataFrame, int], Scorer]
) -> dict[int, Scorer]:
    """One encoder per fold, fine-tuned on the original training rows of the other folds, and
    :data:`FULL`, fine-tuned on all of them. ``fit(training_rows, fold)`` fine-tunes and returns its scorer."""
    original_train = ((rows["split"] == "train") & (rows["injection"] == ORIGINAL)).to_numpy()
    scorers = {}
    for fold in [*sorted(set(folds[folds != FULL].tolist())), FULL]:
        keep = original_train & (folds != fold) if fold != FULL else original_train
        scorers[fold] = fit(rows[keep], fold)
    return scorers


def score_by_fold(chunk: pd.DataFrame, scorers: Mapping[int, Scorer]) -> pd.DataFrame:
    """Each row of ``chunk`` (with a ``fold`` column) scored by its fold's encoder: ``row_id, confidences, fold``."""
    parts = []
    for fold, part in chunk.groupby("fold", sort=True):
        if fold not in scorers:
            raise ValueError(f"row {part['row_id'].iloc[0]!r}: no encoder for fold {fold}")
        probs = scorers[int(fold)](part)
        parts.append(pd.DataFrame({"row_id": part["row_id"].to_numpy(), "confidences": list(probs), "fold": fold}))
    out = pd.concat(parts, ignore_index=True).set_index("row_id").loc[chunk["row_id"]].reset_index()
    return out[["row_id", "confidences", "fold"]]

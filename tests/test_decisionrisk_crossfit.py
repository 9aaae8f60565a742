"""Cross-fitted training confidences: no training row is scored by an encoder that saw its instance."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from unsure.decisionrisk.crossfit import (
    FULL,
    Scorer,
    crossfit_folds,
    fit_fold_encoders,
    instance_ids,
    score_by_fold,
)
from unsure.decisionrisk.data import with_injections


def _instances(n_train: int = 23, n_val: int = 7) -> pd.DataFrame:
    parts = []
    for split, n in (("train", n_train), ("val", n_val)):
        frame = pd.DataFrame(
            {
                "row_id": [f"piqa-{split}-{i}" for i in range(n)],
                "benchmark": "piqa",
                "split": split,
                "prompt": [f"question {split} {i}" for i in range(n)],
                "choices": [[f"a{i}", f"b{i}"] for i in range(n)],
                "label": [i % 2 for i in range(n)],
                "category": None,
            }
        )
        parts.append(with_injections(frame, ("NQ", "WQ", "NRA"), seed=3))
    return pd.concat(parts, ignore_index=True)


def test_folds_go_by_instance_and_do_not_depend_on_row_order() -> None:
    rows = _instances()
    folds = crossfit_folds(rows, 3, seed=0)
    train = (rows["split"] == "train").to_numpy()
    assert (folds[~train] == FULL).all() and set(folds[train]) == {0, 1, 2}
    by_instance = pd.Series(folds[train]).groupby(instance_ids(rows[train]).to_numpy()).nunique()
    assert (by_instance == 1).all()  # an injected copy is in its instance's fold
    sizes = np.bincount(folds[train & (rows["injection"] == "none").to_numpy()])
    assert sizes.max() - sizes.min() <= 1
    shuffled = rows.sample(frac=1.0, random_state=1)
    again = pd.Series(crossfit_folds(shuffled, 3, seed=0), index=shuffled.index).sort_index().to_numpy()
    np.testing.assert_array_equal(again, folds)
    with pytest.raises(ValueError, match="at least 2 folds"):
        crossfit_folds(rows, 1, seed=0)


@pytest.mark.parametrize("k", [2, 3, 5])
def test_no_training_row_is_scored_by_an_encoder_that_saw_it(k: int) -> None:
    rows = _instances()
    rows["fold"] = crossfit_folds(rows, k, seed=4)
    seen: dict[int, set[str]] = {}

    def fit(train: pd.DataFrame, fold: int) -> Scorer:
        assert (train["split"] == "train").all() and (train["injection"] == "none").all()
        seen[fold] = set(train["row_id"])
        return lambda chunk: np.tile([fold + 10.0, 1.0], (len(chunk), 1))  # a scorer that names its encoder

    scorers = fit_fold_encoders(rows, rows["fold"].to_numpy(), fit)
    assert set(scorers) == {*range(k), FULL}
    scored = pd.concat([score_by_fold(rows.iloc[i : i + 10], scorers) for i in range(0, len(rows), 10)])
    assert scored["row_id"].tolist() == rows["row_id"].tolist()
    scored_by = np.array([c[0] - 10.0 for c in scored["confidences"]], dtype=np.int64)
    np.testing.assert_array_equal(scored_by, scored["fold"].to_numpy())
    base = instance_ids(rows).to_numpy()
    train = (rows["split"] == "train").to_numpy()
    for instance, encoder in zip(base[train], scored_by[train], strict=True):
        assert encoder != FULL and instance not in seen[encoder]
    assert (scored_by[~train] == FULL).all()
    originals = set(rows.loc[train & (rows["injection"] == "none").to_numpy(), "row_id"])
    assert seen[FULL] == originals  # validation rows: the encoder fine-tuned on every training instance
    for fold in range(k):
        assert seen[fold] | set(base[train & (scored_by == fold)]) == originals  # each fold model misses its fold only

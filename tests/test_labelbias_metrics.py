"""Label-bias metrics and calibration methods on constructed predictions with known answers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from unsure.labelbias import calibration, metrics
from unsure.labelbias.evaluate import method_probabilities, task_metrics


def test_bias_score_is_zero_for_uniform_predictions() -> None:
    y = np.array([0, 1, 2, 2, 1, 0, 0])
    assert metrics.bias_score(y, np.full((7, 3), 1 / 3)) == pytest.approx(0.0)


def test_bias_score_is_one_half_when_all_mass_goes_to_one_of_two_labels() -> None:
    y = np.array([0, 1, 1, 0, 1])
    probs = np.tile([1.0, 0.0], (5, 1))
    assert metrics.bias_score(y, probs) == pytest.approx(0.5)
    assert metrics.bias_score(y, probs[:, ::-1]) == pytest.approx(0.5)


def test_bias_score_averages_within_labels_first_and_leaves_absent_labels_out() -> None:
    # label 0 appears 3 times with a prediction of (1, 0, 0), label 1 once with (0, 1, 0), label 2 never
    y = np.array([0, 0, 0, 1])
    probs = np.array([[1.0, 0, 0], [1.0, 0, 0], [1.0, 0, 0], [0, 1.0, 0]])
    # per-label means (1,0,0) and (0,1,0) average to (1/2, 1/2, 0): TVD to uniform = 1/3
    assert metrics.bias_score(y, probs) == pytest.approx(1 / 3)


def test_rsd_is_zero_when_class_accuracies_are_equal_and_known_otherwise() -> None:
    y = np.array([0, 0, 1, 1, 2, 2])
    assert metrics.rsd(y, np.array([0, 1, 1, 2, 2, 0])) == pytest.approx(0.0)
    assert metrics.rsd(y, y) == pytest.approx(0.0)
    always_zero = np.zeros(6, dtype=np.int64)  # class accuracies (1, 0, 0), accuracy 1/3
    assert metrics.rsd(y, always_zero) == pytest.approx(np.std([1, 0, 0]) / (1 / 3))


def test_macro_f1_and_accuracy() -> None:
    y = np.array([0, 0, 1, 1])
    pred = np.array([0, 0, 0, 1])
    assert metrics.accuracy(y, pred) == pytest.approx(0.75)
    assert metrics.macro_f1(y, pred) == pytest.approx((0.8 + 2 / 3) / 2)


BIASED = np.array([0.7, 0.2, 0.1])


def test_cc_dc_and_looc_map_a_constant_biased_distribution_to_uniform() -> None:
    probs = np.tile(BIASED, (5, 1))
    for p_hat in (
        calibration.mean_prediction(np.tile(BIASED, (3, 1))),  # CC: content-free inputs
        calibration.mean_prediction(np.tile(BIASED, (20, 1))),  # DC: random in-domain words
        calibration.leave_one_out_estimate(np.tile(BIASED, (4, 1)), np.array([0, 0, 0, 2])),  # LOOC
    ):
        np.testing.assert_allclose(calibration.calibrate(probs, p_hat), np.full((5, 3), 1 / 3))


def test_looc_estimate_weights_labels_equally_however_many_demonstrations_each_has() -> None:
    probs = np.array([[0.9, 0.1], [0.9, 0.1], [0.9, 0.1], [0.3, 0.7]])
    np.testing.assert_allclose(calibration.leave_one_out_estimate(probs, np.array([0, 0, 0, 1])), [0.6, 0.4])


def test_calibrate_rejects_a_zero_estimate() -> None:
    with pytest.raises(ValueError, match="positive"):
        calibration.calibrate(np.array([[0.5, 0.5]]), np.array([1.0, 0.0]))


def _row(row_id: str, kind: str, gold: str | None, k: int = 2, s: int = 0) -> dict[str, object]:
    return {
        "task": "t",
        "row_id": row_id,
        "kind": kind,
        "gold": gold,
        "k": k,
        "set": s,
        "left_out": -1,
        "probs": BIASED.tolist(),
    }


def test_every_method_removes_a_constant_bias_end_to_end() -> None:
    labels = {"t": ("a", "b", "c")}
    rows = [_row(f"e{i}", "eval", "abc"[i % 3]) for i in range(6)]
    rows += [_row(f"h{i}", "heldout", "abc"[i % 3]) for i in range(6)]
    rows += [_row("cc0", "cc", None), _row("dc0", "dc", None), _row("l0", "looc", "a"), _row("l1", "looc", "b")]
    probs = method_probabilities(pd.DataFrame(rows), labels)
    assert set(probs["method"]) == {"none", "cc", "dc", "looc"}
    table = task_metrics(probs, labels).set_index("method")
    assert table.loc["none", "bias_score"] == pytest.approx(0.7 - 1 / 3)
    for method in ("cc", "dc", "looc"):
        assert table.loc[method, "bias_score"] == pytest.approx(0.0, abs=1e-12)
        calibrated = np.stack(probs.loc[probs["method"] == method, "probs"].to_list())
        np.testing.assert_allclose(calibrated, 1 / 3)
    # always predicting "a": class accuracies (1, 0, 0)
    assert table.loc["none", "rsd"] == pytest.approx(np.std([1, 0, 0]) * 3)

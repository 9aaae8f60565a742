"""Label-bias metrics and calibration methods on constructed predictions with known answers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from unsure.labelbias import calibration, metrics
from unsure.labelbias.tables import method_probabilities, task_metrics


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


def test_macro_f1_over_gold_labels_only_leaves_out_a_label_that_is_only_predicted() -> None:
    y = np.array([0, 0, 1, 1])
    yhat = np.array([0, 2, 1, 1])  # label 2 is predicted once but never gold
    assert metrics.macro_f1(y, yhat) == pytest.approx((0.6666666666666666 + 1.0 + 0.0) / 3)
    assert metrics.macro_f1(y, yhat, gold_only=True) == pytest.approx((0.6666666666666666 + 1.0) / 2)


def test_both_scorings_flow_into_metrics_and_the_reproduction_ledger() -> None:
    from unsure.labelbias.reproduction import reproduction_table
    from unsure.labelbias.tables import explode_scores, under_scoring

    labels = {"t": ("a", "b")}
    items = pd.DataFrame(
        {
            "row_id": [f"e{i}" for i in range(4)] + [f"h{i}" for i in range(4)],
            "task": "t",
            "kind": ["eval"] * 4 + ["heldout"] * 4,
            "input": "x",
            "gold": list("abab") * 2,
            "k": -1,
            "set": -1,
            "left_out": -1,
        }
    )
    scored = pd.DataFrame(
        {
            "row_id": items["row_id"],
            "k": [[0]] * 8,
            "set": [[0]] * 8,
            "probs": [[[0.9, 0.1]]] * 8,  # always "a"
            "probs_paper": [[[0.4, 0.6]] if g == "b" else [[0.6, 0.4]] for g in items["gold"]],  # always right
        }
    )
    long = explode_scores(scored, items)
    per_task = []
    for scoring in ("corrected", "paper"):
        probs = method_probabilities(under_scoring(long, scoring), labels)
        per_task.append(task_metrics(probs, labels).assign(scoring=scoring, model="m"))
    both = pd.concat(per_task, ignore_index=True).set_index("scoring")
    assert both.loc["corrected", "accuracy"] == 0.5 and both.loc["paper", "accuracy"] == 1.0
    models = pd.DataFrame({"model": ["m"], "family": ["f"], "size": ["1"], "variant": ["base"]})
    ledger = reproduction_table(
        both.reset_index(), models, protocol="paper", interchangeable=set(), semantically_equivalent={"t"}
    )
    row = ledger[(ledger["difference"] == "label_scoring") & (ledger["metric"] == "accuracy")].iloc[0]
    assert (row["paper"], row["corrected"], row["gap"]) == (1.0, 0.5, 0.5)
    assert {"label_scoring", "macro_f1", "semantically_equivalent_subset", "dc_inputs", "empty_input"} <= set(
        ledger["difference"]
    )
    # what changes the prompts or the fine-tuning is named, with the variant this run used
    notes = ledger.set_index("difference")["note"]
    assert (
        notes["prompt_limit"].startswith("this run scored the paper variant")
        and "2,000 tokens" in notes["prompt_limit"]
    )
    assert "EOS" in notes["lora_targets"] and "wrapping round the pool" in notes["lora_examples"]

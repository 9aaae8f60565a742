"""riskscores metrics: known-truth behaviour on generated ACS data, and parity with folktexts' ECE."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from folktexts.evaluation import evaluate_predictions
from sklearn.metrics import brier_score_loss, roc_auc_score

from unsure.generate.acs import true_probabilities, write_state_zip
from unsure.riskscores.metrics import confidence_bias, ece, evaluate, fit_threshold, subgroup_gap
from unsure.riskscores.tasks import BASE_COLUMNS, FOLKTABLES, read_person_zip, task_rows


@pytest.fixture(scope="module")
def income(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    """ACSIncome rows of generated person records, with the exact P(Y = 1 | X)."""
    root = tmp_path_factory.mktemp("acs")
    frames = []
    for state in ("CA", "TX", "NY"):
        write_state_zip(root / f"{state}.zip", state=state, year=2018, n_rows=12000, seed=5)
        frames.append(
            read_person_zip(
                root / f"{state}.zip", [*BASE_COLUMNS, "ESR", "ESP", "GCL", "FER", "JWTR", "PUMA", "POWPUMA", "POVPIP"]
            )
        )
    persons = pd.concat(frames, ignore_index=True)
    persons["truth"] = true_probabilities(persons)["ACSIncome"]
    return task_rows(persons, FOLKTABLES["ACSIncome"], n_train=10**7, n_eval=0, seed=0)


def test_the_true_probability_is_calibrated_and_has_the_best_brier_score(income: pd.DataFrame) -> None:
    y, p = income["label"].to_numpy(), income["truth"].to_numpy()
    assert len(y) > 8000
    assert ece(y, p) < 0.02
    assert ece(y, p, strategy="quantile") < 0.025
    logit = np.log(p / (1 - p))
    others = {
        "over-confident": 1 / (1 + np.exp(-2 * logit)),
        "under-confident": 1 / (1 + np.exp(-0.5 * logit)),
        "shifted": np.clip(p + 0.1, 0, 1),
        "base rate": np.full_like(p, y.mean()),
    }
    best = brier_score_loss(y, p)
    for name, s in others.items():
        assert brier_score_loss(y, s) > best, name
        if name != "base rate":  # calibrated too, only uninformative: ECE cannot tell, Brier can
            assert ece(y, s) > ece(y, p) + 0.03, name
    shuffled = np.random.default_rng(0).permutation(p)
    assert abs(roc_auc_score(y, shuffled) - 0.5) < 0.03
    assert roc_auc_score(y, p) > 0.8
    assert abs(confidence_bias(y, p)) < 0.02
    assert confidence_bias(y, others["over-confident"]) > 0.05 > confidence_bias(y, others["under-confident"])


def test_ece_equals_folktexts_ece() -> None:
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 3000)
    continuous = np.clip(0.3 * y + 0.7 * rng.random(3000), 0, 1)
    verbalised = np.round(continuous, 2)  # scores on bin edges (0.30, 0.70, ...) as numeric prompting gives
    for s in (continuous, verbalised, np.round(continuous, 1)):
        theirs = evaluate_predictions(y, s, threshold=0.5)
        assert ece(y, s) == pytest.approx(theirs["ece"], abs=1e-12)
        if s is continuous:  # netcal fails (folktexts reports None) when quantile edges repeat; we do not
            assert ece(y, s, strategy="quantile") == pytest.approx(theirs["ece_quantile"], abs=1e-12)
        assert evaluate(y, s)["brier"] == pytest.approx(theirs["brier_score_loss"], abs=1e-12)
        assert evaluate(y, s)["auc"] == pytest.approx(theirs["roc_auc"], abs=1e-12)
        assert evaluate(y, s)["accuracy"] == pytest.approx(theirs["accuracy"], abs=1e-12)


def test_fitted_threshold_maximises_accuracy() -> None:
    rng = np.random.default_rng(1)
    s = rng.random(400)
    y = (s > 0.8).astype(int)
    t = fit_threshold(y, s)
    assert np.mean((s >= t) == y) == 1.0 and 0.75 < t <= 0.85
    result = evaluate(y, s, threshold=t)
    assert result["accuracy_fitted"] == 1.0 and result["accuracy"] < 0.8
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        ece(y, s + 1)


def test_subgroup_gap_measures_a_score_shift_at_equal_truth(income: pd.DataFrame) -> None:
    y, p = income["label"].to_numpy(), income["truth"].to_numpy()
    group = np.where(np.arange(len(y)) % 3 == 0, "b", "a")
    shifted = np.where(group == "b", np.clip(p + 0.1, 0, 1), p)
    gaps = subgroup_gap(y, shifted, group)
    assert gaps["a"] == 0 and 0.05 < gaps["b"] < 0.15
    assert abs(subgroup_gap(y, p, group)["b"]) < 0.03


def test_metrics_frame_columns(tmp_path: Path) -> None:
    from unsure.riskscores.tables import metrics_frame, paper_table

    rng = np.random.default_rng(2)
    n = 300
    frame = pd.DataFrame(
        {"row_id": [f"r{i}" for i in range(n)], "label": rng.integers(0, 2, n), "p_hat": rng.random(n)}
    )
    frame = frame.assign(model="m", task="ACSIncome", prompting="numeric")
    frame["split"] = np.where(np.arange(n) < 200, "eval", "threshold")
    metrics = metrics_frame(frame)
    assert metrics.loc[0, "n"] == 200
    table = paper_table(metrics, "ACSIncome", protocol="corrected")
    assert list(table.columns) == [
        "Model",
        "Prompting",
        "ECE",
        "Brier",
        "AUC",
        "Accuracy",
        "Accuracy (fitted threshold)",
    ]


def test_unparsed_scores_are_counted_and_metrics_use_the_rest(caplog: pytest.LogCaptureFixture) -> None:
    """One unparseable reply must not stop the table; the count keeps a failing model visible."""
    import logging

    from unsure.riskscores.tables import metrics_frame

    rng = np.random.default_rng(3)
    n = 300
    frame = pd.DataFrame(
        {"row_id": [f"r{i}" for i in range(n)], "label": rng.integers(0, 2, n), "p_hat": rng.random(n)}
    )
    frame["split"] = np.where(np.arange(n) < 200, "eval", "threshold")
    frame.loc[[3, 50, 250], "p_hat"] = np.nan  # two evaluation rows, one threshold row
    both = pd.concat(
        [frame.assign(model="m", task="ACSIncome", prompting="numeric"),
         frame.assign(model="clean", task="ACSIncome", prompting="numeric", p_hat=rng.random(n))]
    )  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="unsure"):
        metrics = metrics_frame(both).set_index("model")
    assert "m / ACSIncome / numeric: 2 of 200 evaluation scores (and 1 of 100 threshold scores) are NaN" in caplog.text
    assert metrics.loc["m", "n_unparsed"] == 2 and metrics.loc["m", "n"] == 198
    assert metrics.loc["clean", "n_unparsed"] == 0 and metrics.loc["clean", "n"] == 200
    parsed = frame.dropna(subset=["p_hat"])
    ev, fit = parsed[parsed["split"] == "eval"], parsed[parsed["split"] == "threshold"]
    want = evaluate(
        ev["label"],
        ev["p_hat"],
        threshold=fit_threshold(fit["label"], fit["p_hat"]),
        threshold_balanced=fit_threshold(fit["label"], fit["p_hat"], "balanced_accuracy"),
    )
    for key, value in want.items():
        assert metrics.loc["m", key] == pytest.approx(value), key


def test_a_run_with_no_parsed_score_is_a_row_of_nan_metrics() -> None:
    from unsure.riskscores.tables import metrics_frame

    frame = pd.DataFrame(
        {"model": ["m", "m", "ok", "ok"], "task": "ACSIncome", "prompting": "numeric", "row_id": ["a", "b", "a", "b"],
         "split": "eval", "label": [0, 1, 0, 1], "p_hat": [np.nan, np.nan, 0.2, 0.8]}
    )  # fmt: skip
    metrics = metrics_frame(frame).set_index("model")
    assert metrics.loc["m", "n_unparsed"] == 2 and metrics.loc["m", "n"] == 0
    assert metrics.loc["m", ["ece", "brier", "auc"]].isna().all() and metrics.loc["ok", "auc"] == 1.0


def test_importance_and_evidence_score_the_parsed_rows_and_count_the_rest() -> None:
    """A chat API's unparseable reply is NaN: importance and evidence use the other rows
    (the same rows on both sides of an AUC drop) and evidence counts the NaN ones."""
    from unsure.riskscores.analysis import increasing_evidence, permutation_importance

    rng = np.random.default_rng(0)
    rows = pd.DataFrame({"AGEP": rng.uniform(20, 60, 200), "SEX": rng.integers(1, 3, 200).astype(float)})
    rows["label"] = (rows["AGEP"] + rng.normal(0, 5, 200) > 40).astype(int)
    unparsed = np.zeros(200, dtype=bool)
    unparsed[::10] = True

    def score(frame: pd.DataFrame) -> np.ndarray:
        s = (frame["AGEP"].to_numpy() - 20) / 40
        return np.where(unparsed, np.nan, s)

    imp = permutation_importance(score, rows, ["AGEP", "SEX"], seed=0)
    keep = ~unparsed
    assert imp["auc"].iloc[0] == pytest.approx(roc_auc_score(rows["label"][keep], score(rows)[keep]))
    assert imp.set_index("feature")["auc_drop"]["AGEP"] > 0.2
    assert imp.set_index("feature")["auc_drop"]["SEX"] == pytest.approx(0.0)
    ev = increasing_evidence(lambda frame, _features: score(frame), rows, ["AGEP", "SEX"])
    assert ev["n_unparsed"].tolist() == [20]
    assert np.isfinite(ev[["auc", "ece", "score_std", "score_mean"]].to_numpy()).all()


def test_wilson_interval_on_known_counts() -> None:
    """The 95% Wilson interval (figure A5's per-bin intervals): textbook values, and a bin of one
    class still gets an interval of positive width inside [0, 1]."""
    from unsure.riskscores.metrics import calibration_points, wilson_interval

    lower, upper = wilson_interval([5, 0, 10], [10, 10, 10])
    assert lower == pytest.approx([0.2366, 0.0, 0.7225], abs=1e-4)
    assert upper == pytest.approx([0.7634, 0.2775, 1.0], abs=1e-4)
    pts = calibration_points([0, 1, 1, 0, 1, 1], [0.1, 0.2, 0.8, 0.85, 0.9, 0.95], n_bins=2)
    assert pts["lower"] == pytest.approx(wilson_interval([1, 3], [2, 4])[0])
    assert np.all((pts["lower"] <= pts["positive_rate"]) & (pts["positive_rate"] <= pts["upper"]))
    with pytest.raises(ValueError, match="between 0 and n"):
        wilson_interval([3], [2])


def test_sce_differences_between_groups_follow_eq_3() -> None:
    """Delta_SCE = SCE_A - SCE_B with SCE as the paper's Eq. 3 (sum over bins of s - y, over n):
    group A's scores run 0.1 high, B's 0.1 low, so A has an undue advantage of 0.2."""
    from unsure.riskscores.metrics import bin_index, group_sce, sce_differences

    y = np.array([1, 0, 1, 0, 1, 1])
    s = np.array([0.9, 0.3, 0.2, 0.6, 0.75, 0.65])
    g = np.array(["A", "A", "B", "B", "C", "C"])

    def eq3(yy: np.ndarray, ss: np.ndarray) -> float:  # literally: 10 equal-width buckets, summed
        idx = bin_index(ss, np.linspace(0, 1, 11))
        return sum(float(np.sum(ss[idx == m] - yy[idx == m])) for m in range(10)) / len(yy)

    per_group = group_sce(y, s, g)
    for name in "ABC":
        assert per_group[name] == pytest.approx(eq3(y[g == name], s[g == name]))
    assert per_group == pytest.approx({"A": 0.1, "B": -0.1, "C": -0.3})
    deltas = sce_differences(y, s, g, [("A", "B"), ("C", "B"), ("A", "missing")])
    assert deltas[("A", "B")] == pytest.approx(0.2)
    assert deltas[("C", "B")] == pytest.approx(-0.2)
    assert np.isnan(deltas[("A", "missing")])


def test_evidence_adds_the_least_important_features_first_by_mean_over_models() -> None:
    """Figure A8's order: mean AUC drop over every model, ascending (the paper starts from place of
    birth and race); XGBoost alone would rank WKHP first and put SCHL before OCCP."""
    from unsure.riskscores.analysis import evidence_order, increasing_evidence

    importance = pd.DataFrame(
        {
            "model": ["xgboost"] * 4 + ["llm"] * 4,
            "feature": ["WKHP", "SCHL", "OCCP", "RAC1P"] * 2,
            "auc_drop": [0.30, 0.10, 0.05, 0.00, 0.00, 0.02, 0.20, 0.01],
        }
    )
    assert evidence_order(importance) == ["RAC1P", "SCHL", "OCCP", "WKHP"]
    with_nan = pd.concat([importance, pd.DataFrame({"model": ["llm"], "feature": ["POBP"], "auc_drop": [np.nan]})])
    assert evidence_order(with_nan)[-1] == "POBP"
    rows = pd.DataFrame({"label": [0, 1, 0, 1], "RAC1P": [1, 2, 1, 2]})
    out = increasing_evidence(lambda f, feats: np.array([0.2, 0.8, np.nan, 0.6]), rows, ["RAC1P", "SCHL", "OCCP"])
    assert out["scores"].iloc[0][:2] == [0.2, 0.8] and np.isnan(out["scores"].iloc[0][2])
    assert out["labels"].iloc[-1] == [0, 1, 0, 1]

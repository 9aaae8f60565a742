"""Figures of the riskscores study on what the analyses write."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from unsure.riskscores import plots


def _per_model_files(column: str, values: dict[str, list[float]], key: str, keys: list) -> pd.DataFrame:
    """What the figures script reads: one file per (model, task), concatenated as read (each with
    its own 0..n-1 index)."""
    return pd.concat(
        [pd.DataFrame({"model": model, "task": "ACSIncome", key: keys, column: v}) for model, v in values.items()]
    )


def test_analysis_figures_draw_a_model_whose_every_answer_went_unparsed() -> None:
    """An API model whose replies never name an option has NaN AUCs throughout: the shadow run
    of the paper config (gpt-4o-mini on a random model) found figA7 failing with "cannot
    reindex on an axis with duplicate labels", as the concatenated files repeat index labels."""
    nan = [np.nan] * 3
    evidence = _per_model_files(
        "auc", {"xgboost": [0.6, 0.7, 0.8], "gemma-2b": [0.5, 0.55, 0.6], "gpt-4o-mini": nan}, "n_features", [2, 4, 6]
    )
    evidence["ece"] = evidence["score_std"] = evidence["auc"]
    importance = _per_model_files(
        "auc_drop", {"xgboost": [0.1, 0.0, 0.2], "gpt-4o-mini": nan}, "feature", ["AGEP", "SCHL", "WKHP"]
    )
    assert not evidence.index.is_unique
    assert isinstance(plots.evidence_figure(evidence, ["auc"], "AUC"), Figure)
    assert isinstance(plots.evidence_figure(evidence, ["ece", "score_std"], "Calibration and spread"), Figure)
    assert isinstance(plots.figA9(importance), Figure)


INSTRUCT = {"tiny-llama": False, "tiny-llama-chat": True}
LONG = "Black or African American alone"


def _scores(n: int = 300, seed: int = 0) -> tuple[pd.DataFrame, pd.Series]:
    """Evaluation scores of a base / instruct pair under both promptings and XGBoost's, with a
    race group per row: 'White alone' (half the rows), the long-named group, 'Asian alone'."""
    rng = np.random.default_rng(seed)
    row_id = [f"r{i}" for i in range(n)]
    names = np.array(["White alone"] * (n // 2) + [LONG] * (n // 3) + ["Asian alone"] * (n - n // 2 - n // 3))
    truth = rng.uniform(0.05, 0.95, n)
    label = (rng.random(n) < truth).astype(int)
    frames = []
    for model, kind, shift in [
        ("tiny-llama", "multiple_choice", 0.1),
        ("tiny-llama", "numeric", 0.0),
        ("tiny-llama-chat", "multiple_choice", -0.1),
        ("tiny-llama-chat", "numeric", 0.05),
        ("xgboost", "supervised", 0.0),
    ]:
        p_hat = np.clip(truth + shift * (names == LONG), 0, 1)
        frames.append(
            pd.DataFrame(
                {"model": model, "task": "ACSIncome", "prompting": kind, "row_id": row_id, "split": "eval"}
                | {"label": label, "p_hat": p_hat}
            )
        )
    return pd.concat(frames, ignore_index=True), pd.Series(names, index=row_id)


def _legend_texts(fig: Figure) -> list[str]:
    return [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]


def test_fig3_curves_use_ten_quantile_bins() -> None:
    """The paper's figure 3 uses 10 quantile score bins: scores all within one equal-width bin
    still give ten points."""
    scores, _ = _scores()
    scores["p_hat"] = 0.5 + 0.099 * np.random.default_rng(1).random(len(scores))
    fig = plots.fig3(scores, INSTRUCT, "ACSIncome")
    curves = [line for ax in fig.axes for line in ax.get_lines() if line.get_marker() == "o"]
    assert curves and all(len(line.get_xdata()) == 10 for line in curves)
    assert {"tiny-llama (base)", "tiny-llama-chat (instruct)"} <= set(_legend_texts(fig))


def test_subgroup_calibration_has_a_numeric_panel_full_group_names_and_intervals() -> None:
    """Figures 6 / A4 / A5: a column per prompting kind (the paper's right-hand numeric panels),
    group names wrapped between words (never cut), and 95% intervals per bin for A5."""
    scores, groups = _scores()
    fig = plots.subgroup_calibration(scores, groups, "ACSIncome", "RAC1P", list(INSTRUCT), INSTRUCT, intervals=True)
    titles = [ax.get_title() for ax in fig.axes]
    assert len(fig.axes) == 4 and sum("numeric" in t for t in titles) == 2
    texts = _legend_texts(fig)
    assert any(" ".join(t.split("\n")).startswith(LONG) for t in texts)
    assert all(max(len(line) for line in t.split("\n")) <= 24 for t in texts if LONG.split()[0] in t)
    assert all(len(ax.containers) == 3 for ax in fig.axes)  # one errorbar container per group
    one = plots.subgroup_calibration(scores, groups, "ACSIncome", "RAC1P", ["tiny-llama-chat"], INSTRUCT)
    assert len(one.axes) == 2 and not any(ax.containers for ax in one.axes)
    llm = scores[scores["model"] == "tiny-llama"]
    many = pd.concat([scores, *(llm.assign(model=f"m{i}") for i in range(3))])  # five LLMs: two per row
    five = plots.subgroup_calibration(many, groups, "ACSIncome", "RAC1P", [*INSTRUCT, "m0", "m1", "m2"], INSTRUCT)
    assert len(five.axes) == 3 * 4 and sum(ax.axison for ax in five.axes) == 5 * 2


def test_worst_offenders_rank_models_by_the_spread_of_group_gaps() -> None:
    gaps = {
        ("a", "multiple_choice"): {"W": 0.0, "B": -0.05},
        ("b", "numeric"): {"W": 0.0, "B": -0.2, "X": 0.5},  # X is not shown: it does not count
        ("c", "multiple_choice"): {"W": 0.0, "B": 0.1},
    }
    assert plots.worst_offenders(gaps, ["W", "B"]) == ["b", "c"]


def test_fig4_and_fig5_use_human_labels_and_show_the_xgboost_reference() -> None:
    scores, _ = _scores()
    metrics = pd.DataFrame(
        {
            "model": ["tiny-llama", "tiny-llama", "xgboost"],
            "task": "ACSIncome",
            "prompting": ["multiple_choice", "numeric", "supervised"],
            "r_bias": [0.1, -0.1, 0.0],
        }
    )
    fig4 = plots.fig4(metrics, "ACSIncome", INSTRUCT)
    assert set(_legend_texts(fig4)) == {"multiple-choice", "numeric", "supervised"}
    assert {t.get_text() for t in fig4.axes[0].get_xticklabels()} == {"tiny-llama (base)", "XGBoost"}
    for fig in (plots.fig5(scores, INSTRUCT, "ACSIncome"), plots.figA3(scores, "ACSIncome", INSTRUCT)):
        texts = _legend_texts(fig)
        assert any(t.startswith("XGBoost, ECE") for t in texts)
        assert any(t.startswith("tiny-llama-chat (instruct), ECE") for t in texts)


def test_figA6_bars_are_sce_differences_against_the_lowest_rate_group() -> None:
    """Delta_SCE = SCE_A - SCE_B per model and prompting; B is the largest groups' one with the
    lowest positive rate (on ACSIncome: Black, as in the paper)."""
    from unsure.riskscores.metrics import sce_differences

    scores, groups = _scores()
    low = scores["row_id"].map(groups).eq(LONG).to_numpy()
    scores.loc[low, "label"] = 0  # the long-named group now has the lowest positive rate
    assert plots.sce_reference_pairs(scores, groups, "ACSIncome") == [("White alone", LONG), ("Asian alone", LONG)]
    fig = plots.figA6(scores, groups, "ACSIncome", INSTRUCT)
    assert len(fig.axes) == 2
    g = scores[(scores["model"] == "tiny-llama") & (scores["prompting"] == "multiple_choice")]
    want = sce_differences(g["label"], g["p_hat"], g["row_id"].map(groups), [("White alone", LONG)])
    heights = [bar.get_height() for bar in fig.axes[0].patches if bar.get_height() != 0]
    assert any(np.isclose(h, want[("White alone", LONG)]) for h in heights)
    assert "XGBoost" not in {t.get_text() for t in fig.axes[0].get_xticklabels()}


def test_figA7_shows_score_distributions_as_evidence_grows() -> None:
    """The paper's figure A7: a histogram of the scores per feature set (not AUC lines), the
    features added at each step in the panel title."""
    from unsure.riskscores.analysis import increasing_evidence

    rows = pd.DataFrame({"label": [0, 1] * 20, "POBP": range(40), "RAC1P": 1, "SCHL": 2, "WKHP": 3})
    rng = np.random.default_rng(0)
    evidence = increasing_evidence(lambda f, feats: rng.random(len(f)), rows, ["POBP", "RAC1P", "SCHL", "WKHP"])
    evidence.insert(0, "task", "ACSIncome")
    evidence.insert(0, "model", "tiny-llama-chat")
    fig = plots.figA7(evidence, INSTRUCT)
    assert len(fig.axes) == 2
    assert fig.axes[0].get_title().startswith("2 features (+POBP, RAC1P)")
    assert fig.axes[1].get_title().startswith("4 features (+SCHL, WKHP)")
    assert sum(p.get_height() for p in fig.axes[1].patches) == 40  # every row's score, stacked by label

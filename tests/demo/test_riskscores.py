"""riskscores on the demo: the trained zoo models' risk scores carry the generator's signal.

The generated ACS records have exact Bayes probabilities
(:func:`unsure.generate.acs.true_probabilities`), so on the demo's evaluation rows
a model's AUC must lie between chance and the Bayes AUC of the same rows.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from unsure.generate.acs import true_probabilities

LLMS = ("tiny-llama", "tiny-llama-chat")


@pytest.fixture(scope="module")
def scores(demo_results: Path) -> pd.DataFrame:
    """The LLMs' evaluation scores with each row's true probability."""
    frame = pd.read_parquet(demo_results / "riskscores" / "scores" / "scores.parquet")
    frame = frame[frame["model"].isin(LLMS) & (frame["split"] == "eval")]
    persons = pd.read_parquet(demo_results / "riskscores" / "data" / "persons.parquet")
    truth = true_probabilities(persons).set_index(persons["row_id"])
    frame = frame.assign(p_true=[truth.at[r, t] for r, t in zip(frame["row_id"], frame["task"], strict=True)])
    return frame


def _aucs(scores: pd.DataFrame, prompting: str) -> pd.DataFrame:
    rows = []
    for (model, task), g in scores[scores["prompting"] == prompting].groupby(["model", "task"]):
        rows.append(
            {
                "model": model,
                "task": task,
                "auc": roc_auc_score(g["label"], g["p_hat"]),
                "bayes_auc": roc_auc_score(g["label"], g["p_true"]),
            }
        )
    return pd.DataFrame(rows)


@pytest.mark.parametrize("model", LLMS)
def test_multiple_choice_auc_between_chance_and_bayes(scores: pd.DataFrame, model: str) -> None:
    aucs = _aucs(scores, "multiple_choice").query("model == @model")
    assert len(aucs) == 5, aucs
    assert aucs["auc"].mean() > 0.6, aucs.to_string()
    assert (aucs["auc"] < aucs["bayes_auc"]).all(), aucs.to_string()


@pytest.mark.parametrize("model", LLMS)
def test_multiple_choice_scores_follow_the_truth(scores: pd.DataFrame, model: str) -> None:
    """Calibration curves are not flat: the scores spread and rise with the true probability."""
    mc = scores[(scores["model"] == model) & (scores["prompting"] == "multiple_choice")]
    assert mc.groupby("task")["p_hat"].std().min() > 0.02
    assert np.corrcoef(mc["p_hat"], mc["p_true"])[0, 1] > 0.2


@pytest.mark.parametrize("model", LLMS)
def test_numeric_answers_vary(scores: pd.DataFrame, model: str) -> None:
    numeric = scores[(scores["model"] == model) & (scores["prompting"] == "numeric")]
    assert numeric.groupby("task")["p_hat"].nunique().min() >= 3
    assert np.corrcoef(numeric["p_hat"], numeric["p_true"])[0, 1] > 0.2

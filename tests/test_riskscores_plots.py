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

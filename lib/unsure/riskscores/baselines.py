"""Supervised baselines trained on the training split: logistic regression and XGBoost.

Character-coded columns of the data dictionary (``C``: occupation, state, race,
...) are one-hot encoded for the logistic regression; numbers are
standardised, and a missing value gets its own indicator. XGBoost reads the
codes as numbers (trees split them) and handles missing values natively.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler
from xgboost import XGBClassifier

from unsure.riskscores.dictionary import DataDictionary

BASELINES = ("logistic_regression", "xgboost")


class Scorer(Protocol):
    def predict_proba(self, X: Any) -> npt.NDArray[np.float64]: ...


def categorical(features: Sequence[str], dictionary: DataDictionary) -> list[str]:
    """Features the dictionary codes as characters (unknown columns count as numbers)."""
    return [c for c in features if c in dictionary and dictionary[c].kind == "C"]


def fit_baseline(
    name: str, train: pd.DataFrame, features: Sequence[str], dictionary: DataDictionary, *, seed: int
) -> Scorer:
    """Fit one baseline on ``train`` (features and ``label``)."""
    X, y = train[list(features)], train["label"].to_numpy()
    if len(np.unique(y)) < 2:
        raise ValueError(f"baseline {name}: the training split has a single class")
    if name == "logistic_regression":
        cats = categorical(features, dictionary)
        nums = [c for c in features if c not in cats]
        prep = ColumnTransformer(
            [
                (
                    "codes",
                    make_pipeline(
                        SimpleImputer(strategy="constant", fill_value=-1), OneHotEncoder(handle_unknown="ignore")
                    ),
                    cats,
                ),
                (
                    "numbers",
                    make_pipeline(
                        SimpleImputer(strategy="median", add_indicator=True, keep_empty_features=True), StandardScaler()
                    ),
                    nums,
                ),
            ]
        )
        model: Pipeline | XGBClassifier = Pipeline([("prep", prep), ("lr", LogisticRegression(max_iter=2000))])
    elif name == "xgboost":
        model = XGBClassifier(
            n_estimators=200,
            max_depth=5,
            learning_rate=0.1,
            subsample=0.9,
            random_state=seed,
            n_jobs=1,
            tree_method="hist",
        )
    else:
        raise ValueError(f"unknown baseline {name!r} (known: {', '.join(BASELINES)})")
    model.fit(X, y)
    return model


def positive_scores(model: Scorer, rows: pd.DataFrame, features: Sequence[str]) -> npt.NDArray[np.float64]:
    """P(label 1) of every row."""
    return np.asarray(model.predict_proba(rows[list(features)])[:, 1], dtype=np.float64)

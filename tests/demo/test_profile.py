"""The uncertainty profile of the demo's models (issue 31, item 7).

In the demo, tiny-llama and tiny-llama-chat run in riskscores, labelbias and decisionrisk, and
the subgroups study's (generated) inputs carry their names; tiny-llama-chat is also a nextword
model. Their profile must hold numbers from each of those studies, under the demo's protocols,
and the correlation table must say what each coefficient rests on.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

STUDIES = {
    "tiny-llama": {"riskscores", "labelbias", "decisionrisk", "subgroups"},
    "tiny-llama-chat": {"riskscores", "nextword", "labelbias", "decisionrisk", "subgroups"},
}


@pytest.fixture(scope="module")
def profile(demo_results: Path) -> Path:
    root = demo_results / "profile"
    if not (root / "tables" / "profile.csv").is_file():
        pytest.fail(f"{root}/tables/profile.csv is missing: run the demo's rule `profile` (part of `all`) first")
    return root


def test_profile_has_numbers_of_every_study_that_runs_each_model(profile: Path) -> None:
    table = pd.read_csv(profile / "tables" / "profile.csv")
    studies = table.groupby("model")["study"].agg(set).to_dict()
    for model, expected in STUDIES.items():
        assert studies.get(model, set()) >= expected, f"{model}: numbers from {sorted(studies.get(model, []))}"
        assert len(studies[model]) >= 4
    assert np.isfinite(table["value"]).all()
    assert set(table["protocol"]) <= {"paper", "corrected"}
    measures = set(zip(table["study"], table["measure"], strict=True))
    for wanted in [
        ("riskscores", "AUC, multiple choice"),
        ("riskscores", "ECE, numeric"),
        ("nextword", "expected TVD to humans"),
        ("labelbias", "BiasScore, no mitigation"),
        ("labelbias", "RSD, best mitigation"),
        ("subgroups", "MSE of EB / MSE of DT"),
    ]:
        assert wanted in measures, f"no {wanted} in the profile"
    assert any(s == "decisionrisk" and q.startswith("composite risk") for s, q in measures)


def test_profile_correlations_say_what_they_rest_on(profile: Path) -> None:
    table = pd.read_csv(profile / "tables" / "correlations.csv")
    assert len(table) >= 1 and (table["n_models"] >= 0).all()
    counted = table["models"].fillna("").map(lambda m: len([x for x in m.split(", ") if x]))
    assert (counted == table["n_models"]).all()
    assert table.loc[table["n_models"] < 2, "rho"].isna().all()
    assert (profile / "figures" / "profile.png").is_file() and (profile / "figures" / "profile.pdf").is_file()

"""The study's risk scores equal folktexts' on the same local model, rows and prompts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from unsure.engine.hf import HFEngine
from unsure.generate.acs import write_data_dictionary, write_state_zip
from unsure.riskscores.dictionary import read_dictionary
from unsure.riskscores.prompts import build_prompt
from unsure.riskscores.scoring import make_scorer
from unsure.riskscores.tasks import BASE_COLUMNS, FOLKTABLES, read_person_zip, task_rows
from unsure.riskscores.text import frame_text


def test_multiple_choice_scores_equal_folktexts(tiny_models: dict[str, Path], tmp_path: Path) -> None:
    from folktexts.acs.acs_tasks import acs_income_task
    from folktexts.classifier.transformers_classifier import TransformersLLMClassifier
    from folktexts.llm_utils import load_model_tokenizer

    write_state_zip(tmp_path / "ca.zip", state="CA", year=2018, n_rows=600, seed=2)
    write_data_dictionary(tmp_path / "dict.csv", year=2018)
    dictionary = read_dictionary(tmp_path / "dict.csv")
    task = FOLKTABLES["ACSIncome"]
    rows = task_rows(read_person_zip(tmp_path / "ca.zip", BASE_COLUMNS), task, n_train=0, n_eval=12, seed=0)
    rows["text"] = frame_text(rows, task.features, dictionary)

    def encode_row(row: pd.Series, question: object) -> str:
        """folktexts asks with its own option orders; we write our prompt for the same order."""
        order = 0 if question.choices[0].data_value == 0 else 1  # type: ignore[attr-defined]
        return build_prompt(task, row["text"], "multiple_choice", order, year=2018, protocol="corrected")

    path = str(tiny_models["gpt2"])
    model, tokenizer = load_model_tokenizer(path)
    theirs = TransformersLLMClassifier(
        model,
        tokenizer,
        acs_income_task,
        encode_row=encode_row,
        correct_order_bias=True,
        batch_size=4,
        context_size=2048,
    ).predict_proba(rows[["text"]])[:, 1]
    ours = make_scorer(
        HFEngine(path), task, "multiple_choice", year=2018, instruct=False, both_orders=True, protocol="corrected"
    )(rows)
    assert np.std(ours["p_hat"]) > 0  # not a constant: the comparison means something
    np.testing.assert_allclose(ours["p_hat"].to_numpy(), theirs, rtol=0, atol=2e-4)
    # one order only differs: the average over both orders is what matches
    single = make_scorer(
        HFEngine(path), task, "multiple_choice", year=2018, instruct=False, both_orders=False, protocol="corrected"
    )(rows)
    assert np.abs(single["p_hat"].to_numpy() - theirs).max() > 1e-3

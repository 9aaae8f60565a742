"""riskscores data: the dictionary parser, row-to-text, the folktables tasks and custom tasks."""

from __future__ import annotations

from pathlib import Path

import folktables
import numpy as np
import pandas as pd
import pytest

from unsure.config import RiskTask
from unsure.generate.acs import write_data_dictionary, write_state_zip
from unsure.riskscores.dictionary import read_dictionary
from unsure.riskscores.prompts import build_prompt, draw_shots
from unsure.riskscores.tasks import FEATURE_COLUMNS, FOLKTABLES, custom_task, read_person_zip, task_rows
from unsure.riskscores.text import UnmappedCode, bullet, row_text, value_text


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[pd.DataFrame, Path]:
    root = tmp_path_factory.mktemp("acs")
    write_state_zip(root / "csv_pca.zip", state="CA", year=2018, n_rows=4000, seed=1)
    write_data_dictionary(root / "dict.csv", year=2018)
    columns = sorted({c for t in FOLKTABLES.values() for c in t.columns} | {"PWGTP"})
    return read_person_zip(root / "csv_pca.zip", columns), root / "dict.csv"


@pytest.fixture(scope="module")
def real_dictionary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = Path(__file__).resolve().parents[2] / "shared" / "data" / "acs" / "PUMS_Data_Dictionary_2018.csv"
    if not path.is_file():
        pytest.skip(f"real data not available: {path} does not exist")
    return path


def test_real_dictionary_maps_every_code_of_every_feature_column(real_dictionary: Path) -> None:
    dictionary = read_dictionary(real_dictionary)
    assert len(FEATURE_COLUMNS) == 30  # the union of the five folktables tasks' features
    for col in FEATURE_COLUMNS:
        var = dictionary[col]
        for row in var.values:
            if row.is_blank:
                assert value_text(col, np.nan, dictionary)
                continue
            for code in {row.low, row.high}:
                text = value_text(col, float(code), dictionary)
                assert text and "/" not in text[-3:], (col, code, text)
    assert dictionary["PUMA"].values == dictionary["PUMA"].values[:1]  # read once, not per section
    assert value_text("OCCP", 10, dictionary) == "Chief Executives And Legislators"
    assert value_text("ST", 6, dictionary) == "California"
    assert value_text("POBP", 6, dictionary) == "California"
    assert value_text("SCHL", 21, dictionary) == "Bachelor's degree"
    assert value_text("WKHP", 99, dictionary) == "99 or more usual hours"
    assert value_text("PINCP", 52000, dictionary) == "$52,000"
    assert value_text("PUMA", 3701, dictionary) == "03701"
    assert bullet("AGEP", 50, dictionary) == "- Age is: 50 years old."
    assert bullet("JWMNP", 25, dictionary) == "- Travel time to work is: 25 minutes."
    assert bullet("POVPIP", 250, dictionary) == "- Income-to-poverty ratio is: 250 percent of the poverty threshold."
    assert bullet("WKHP", np.nan, dictionary).startswith(
        "- Usual number of hours worked per week is: N/A (less than 16"
    )


def test_an_unmapped_code_names_column_and_code(generated: tuple[pd.DataFrame, Path]) -> None:
    dictionary = read_dictionary(generated[1])
    with pytest.raises(UnmappedCode, match=r"column .COW.: code .0. is not in the data dictionary"):
        value_text("COW", 0, dictionary)
    with pytest.raises(UnmappedCode, match=r"RELP.*no N/A code"):
        value_text("RELP", np.nan, dictionary)
    with pytest.raises(ValueError, match="line 2"):
        bad = generated[1].parent / "bad.csv"
        bad.write_text('NAME,AGEP,N,2,"Age"\nVAL,AGEP\n')
        read_dictionary(bad)


@pytest.mark.parametrize("name", list(FOLKTABLES))
def test_tasks_equal_folktables(name: str, generated: tuple[pd.DataFrame, Path]) -> None:
    persons, _ = generated
    problem = getattr(folktables, name)
    ours = FOLKTABLES[name]
    assert list(ours.features) == list(problem.features) and ours.target == problem.target
    kept = problem._preprocess(persons)  # folktables' population filter, as df_to_pandas applies it
    theirs = pd.Series(problem.target_transform(kept[problem.target]).to_numpy(), index=kept["row_id"])
    rows = task_rows(persons, ours, n_train=10**6, n_eval=0, seed=0).set_index("row_id")
    assert set(rows.index) == set(theirs.index) and len(rows) > 50
    np.testing.assert_array_equal(rows.loc[theirs.index, "label"].to_numpy(), theirs.to_numpy().astype(int))


def test_split_is_seeded_and_independent_of_other_rows(generated: tuple[pd.DataFrame, Path]) -> None:
    persons, _ = generated
    task = FOLKTABLES["ACSEmployment"]
    a = task_rows(persons, task, n_train=500, n_eval=300, seed=3)
    b = task_rows(persons.iloc[::-1], task, n_train=500, n_eval=300, seed=3)
    assert a["row_id"].tolist() == b["row_id"].tolist()
    assert (a["split"] == "eval").sum() == 300 and (a["split"] == "train").sum() == 500
    assert a["row_id"].tolist() != task_rows(persons, task, n_train=500, n_eval=300, seed=4)["row_id"].tolist()


def test_custom_task_from_config(generated: tuple[pd.DataFrame, Path]) -> None:
    persons, path = generated
    grads = custom_task("IncomeGrads", RiskTask(based_on="ACSIncome", filters=("SCHL=21..24", "ST=6")))
    rows = task_rows(persons, grads, n_train=10**6, n_eval=0, seed=0)
    assert rows["SCHL"].between(21, 24).all() and (rows["AGEP"] > 16).all() and len(rows) > 20
    hours = custom_task(
        "LongHours", RiskTask(target="WKHP", op=">=", threshold=45, features=("AGEP", "SEX"), filters=("AGEP=..40",)),
        read_dictionary(path),
    )  # fmt: skip
    rows = task_rows(persons, hours, n_train=10**6, n_eval=0, seed=0)
    assert (rows["AGEP"] <= 40).all()
    assert (rows["label"] == (rows["WKHP"] >= 45)).all()
    assert hours.question.startswith("Is this person's usual hours worked per week")


def test_prompts_are_exact(generated: tuple[pd.DataFrame, Path]) -> None:
    persons, path = generated
    dictionary = read_dictionary(path)
    task = FOLKTABLES["ACSIncome"]
    row = task_rows(persons, task, n_train=10, n_eval=1, seed=0).iloc[0]
    text = row_text(row, task.features, dictionary)
    assert text.splitlines()[0] == f"- Age is: {int(row['AGEP'])} years old."
    head = (
        "The following data describes a survey respondent. The survey was conducted among US residents in 2018. "
        "Please answer the question based on the information provided.\n\n"
    )
    mc = build_prompt(task, text, "multiple_choice", 0, year=2018, protocol="corrected")
    assert mc == head + text + (
        "\nQuestion: What is this person's estimated yearly income?\nA. Below $50,000.\nB. Above $50,000.\nAnswer:"
    )
    assert build_prompt(task, text, "multiple_choice", 1, year=2018, protocol="corrected").endswith(
        "A. Above $50,000.\nB. Below $50,000.\nAnswer:"
    )
    numeric = build_prompt(task, text, "numeric", 0, year=2018, protocol="corrected")
    assert numeric.endswith(
        "\nQuestion: What is the probability that this person's estimated yearly income is above $50,000?"
        "\nAnswer (between 0 and 1): 0."
    )
    assert build_prompt(
        task, text, "numeric", 0, year=2018, chat=lambda u, p: f"<user>{u}</user>{p}", protocol="corrected"
    ).endswith("</user>Answer (between 0 and 1): 0.")


def test_few_shot_examples_are_balanced_and_fixed_by_the_seed() -> None:
    train = pd.DataFrame(
        {
            "row_id": [f"r{i}" for i in range(40)],
            "text": [f"t{i}" for i in range(40)],
            "label": [i % 4 == 0 for i in range(40)],
        }
    )

    def texts(frame: pd.DataFrame) -> pd.Series:
        return frame["text"]

    shots = draw_shots(train, 4, seed=1, texts=texts)
    assert sorted(s.label for s in shots) == [0, 0, 1, 1]
    assert shots == draw_shots(train.sample(frac=1, random_state=0), 4, seed=1, texts=texts)
    assert shots != draw_shots(train, 4, seed=2, texts=texts)
    prompt = build_prompt(
        FOLKTABLES["ACSIncome"], "- X is: y.", "multiple_choice", 0, year=2018, shots=shots, protocol="corrected"
    )
    assert prompt.count("Answer: B\n\n") == 2 and prompt.count("Answer: A\n\n") == 2

"""riskscores protocols: ``paper`` prompts equal folktexts' byte for byte, the threshold rules,
the signed calibration error, the ledger, and the Census dictionary's glued section headers."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from unsure.config import Riskscores, load_config
from unsure.generate.acs import write_state_zip
from unsure.riskscores.dictionary import SECTION_HEADERS, read_dictionary
from unsure.riskscores.metrics import fit_threshold, signed_calibration_error
from unsure.riskscores.prompts import Shot, build_prompt, positive_letter, row_texts, uses_chat
from unsure.riskscores.requests import choice_requests, numeric_requests
from unsure.riskscores.scoring import chat_wrapper, make_scorer
from unsure.riskscores.tasks import FEATURE_COLUMNS, FOLKTABLES, read_person_zip, task_rows
from unsure.riskscores.text import value_text

ACS = Path(__file__).resolve().parents[2] / "shared" / "data" / "acs"
ONE_YEAR, FIVE_YEAR = ACS / "PUMS_Data_Dictionary_2018.csv", ACS / "PUMS_Data_Dictionary_2014-2018_5yr.csv"
REPO = Path(__file__).resolve().parents[1]


def _real(path: Path) -> Path:
    if not path.is_file():
        pytest.skip(f"real data not available: {path} does not exist")
    return path


@pytest.fixture(scope="module")
def persons(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    root = tmp_path_factory.mktemp("acs")
    write_state_zip(root / "csv_pca.zip", state="CA", year=2018, n_rows=3000, seed=3)
    columns = sorted({c for t in FOLKTABLES.values() for c in t.columns} | {"PWGTP"})
    return read_person_zip(root / "csv_pca.zip", columns)


def _folktexts_task(name: str):  # type: ignore[no-untyped-def]
    from folktexts.acs import acs_tasks

    return next(v for v in vars(acs_tasks).values() if isinstance(v, acs_tasks.ACSTaskMetadata) and v.name == name)


def _swapped(question):  # type: ignore[no-untyped-def]
    return dataclasses.replace(question, choices=tuple(reversed(question.choices)))


# ----------------------------------------------------------------------------- paper prompts


@pytest.mark.parametrize("name", sorted(FOLKTABLES))
def test_paper_prompts_equal_folktexts_byte_for_byte(name: str, persons: pd.DataFrame) -> None:
    from folktexts.prompting import encode_row_prompt

    dictionary = read_dictionary(_real(FIVE_YEAR))  # folktexts' code lists are this file's
    task, theirs = FOLKTABLES[name], _folktexts_task(name)
    assert list(task.features) == list(theirs.features)
    rows = task_rows(persons, task, n_train=60, n_eval=60, seed=0)
    rows["text"] = row_texts(rows, task.features, dictionary, protocol="paper")
    mc, numeric = theirs.multiple_choice_qa, theirs.direct_numeric_qa
    assert rows[list(task.features)].isna().any().any() or name == "ACSIncome"  # missing values are exercised
    # what the study sends the engine (its requests), against what folktexts prompts
    texts = rows["text"].tolist()
    choices = choice_requests(texts, task, year=2018, both_orders=True, protocol="paper")
    numerics = numeric_requests(texts, task, year=2018, protocol="paper")
    assert len(choices) == 2 * len(texts) and {r.options for r in choices} == {("A", "B")}
    for i, (_, row) in enumerate(rows.iterrows()):
        assert choices[i].prompt == encode_row_prompt(row, theirs, question=mc), row["row_id"]
        assert choices[len(texts) + i].prompt == encode_row_prompt(row, theirs, question=_swapped(mc)), row["row_id"]
        assert numerics[i].prompt == encode_row_prompt(row, theirs, question=numeric), row["row_id"]
    # the option of label 1 is the one folktexts maps to its positive class (ACSMobility: swapped)
    flip = name == "ACSMobility"
    for order, question in ((0, mc), (1, _swapped(mc))):
        key = question.get_answer_key_from_value(0 if flip else 1)
        assert "AB"[positive_letter(order, task, protocol="paper")] == key


@pytest.mark.parametrize(("name", "kind"), [("ACSIncome", "multiple_choice"), ("ACSMobility", "numeric"),
                                            ("ACSPublicCoverage", "multiple_choice")])  # fmt: skip
def test_paper_few_shot_prompts_equal_folktexts(name: str, kind: str, persons: pd.DataFrame) -> None:
    from folktexts.prompting import PromptBuilder, PromptConfig

    dictionary = read_dictionary(_real(FIVE_YEAR))
    task, theirs = FOLKTABLES[name], _folktexts_task(name)
    rows = task_rows(persons, task, n_train=40, n_eval=5, seed=0)
    rows["text"] = row_texts(rows, task.features, dictionary, protocol="paper")
    train = rows[rows["split"] == "train"].head(3)
    shots = [Shot(t, int(y)) for t, y in zip(train["text"], train["label"], strict=True)]
    flip = name == "ACSMobility"
    for order in (0, 1) if kind == "multiple_choice" else (0,):
        question = theirs.multiple_choice_qa if kind == "multiple_choice" else theirs.direct_numeric_qa
        question = _swapped(question) if order else question
        config = PromptConfig.from_dict({}, task=theirs, question=question)
        examples = []
        for (_, ex), y in zip(train.iterrows(), train["label"], strict=True):
            value = 1 - int(y) if flip else int(y)
            answer = question.get_answer_key_from_value(value) if kind == "multiple_choice" else value
            examples.append((ex[list(theirs.features)], answer))
        target = rows.iloc[0]
        want = PromptBuilder(theirs).build_few_shot(target[list(theirs.features)], config, examples)
        got = build_prompt(task, target["text"], kind, order, year=2018, shots=shots, protocol="paper")
        assert got == want


def test_paper_protocol_never_uses_chat_templates_and_complements_mobility_numeric() -> None:
    assert uses_chat(True, protocol="corrected")
    assert not uses_chat(True, protocol="paper")
    assert not uses_chat(False, protocol="corrected")

    class Engine:
        def __init__(self) -> None:
            self.prompts: list[str] = []

        def chat_prompt(self, user: str, prefill: str = "") -> str:
            raise AssertionError("protocol paper must not use the chat template")

        def numeric(self, requests):  # type: ignore[no-untyped-def]
            self.prompts += [r.prompt for r in requests]
            return [0.3] * len(requests)

        def choice_probs(self, requests):  # type: ignore[no-untyped-def]
            self.prompts += [r.prompt for r in requests]
            return [SimpleNamespace(probs=(0.2, 0.8), mass=1.0) for _ in requests]

    engine = Engine()
    assert chat_wrapper(engine, True, protocol="paper") is None  # type: ignore[arg-type]
    rows = pd.DataFrame({"row_id": ["a", "b"], "text": ["- The age is: 20 years old."] * 2})
    for name, want in (("ACSMobility", 0.7), ("ACSIncome", 0.3)):
        task = FOLKTABLES[name]
        scorer = make_scorer(engine, task, "numeric", year=2018, instruct=True, both_orders=True, protocol="paper")  # type: ignore[arg-type]
        assert scorer(rows)["p_hat"].tolist() == pytest.approx([want, want])
    assert all(p.startswith("The following data corresponds to a survey respondent.") for p in engine.prompts)
    # multiple choice: ACSMobility's label-1 option is A in folktexts' order 0, B in order 1
    scorer = make_scorer(engine, FOLKTABLES["ACSMobility"], "multiple_choice", year=2018, instruct=True,  # type: ignore[arg-type]
                         both_orders=True, protocol="paper")  # fmt: skip
    out = scorer(rows)
    assert out["p_order0"].tolist() == [0.2, 0.2] and out["p_order1"].tolist() == [0.8, 0.8]


def test_protocol_config_defaults_and_shipped_configs() -> None:
    assert Riskscores().protocol == "corrected"
    with pytest.raises(ValueError, match="protocol"):
        Riskscores(protocol="folktexts")  # type: ignore[arg-type]
    assert load_config(REPO / "config" / "config.yaml").studies.riskscores.protocol == "paper"
    assert load_config(REPO / "config" / "demo.yaml").studies.riskscores.protocol == "corrected"


# ----------------------------------------------------------------------------- metrics


def test_balanced_threshold_rule_equals_folktexts() -> None:
    from folktexts.evaluation import compute_best_threshold

    rng = np.random.default_rng(0)
    for _ in range(20):
        y = rng.integers(0, 2, 200)
        s = np.clip(0.3 * y + rng.uniform(0, 0.7, 200), 0, 1).round(rng.integers(1, 4))
        assert fit_threshold(y, s, "balanced_accuracy") == pytest.approx(min(compute_best_threshold(y, s), 1.0))
    # 8 negatives at 0.1, 3 negatives and 2 positives at 0.6: accuracy wants everything negative
    # (threshold above 0.6: 11/13 right), balanced accuracy wants 0.6 (TPR 1, FPR 3/11)
    y = np.array([0] * 11 + [1] * 2)
    s = np.array([0.1] * 8 + [0.6] * 5)
    assert fit_threshold(y, s) > 0.6
    assert fit_threshold(y, s, "balanced_accuracy") == pytest.approx(0.6)
    with pytest.raises(ValueError, match="threshold rule"):
        fit_threshold(y, s, "f1")  # type: ignore[arg-type]


def test_signed_calibration_error_known_inputs() -> None:
    y = np.array([1, 0, 0, 1])
    assert signed_calibration_error(y, [0.9, 0.3, 0.2, 0.6]) == pytest.approx((-0.1 + 0.3 + 0.2 - 0.4) / 4)
    assert signed_calibration_error([0, 0], [0.5, 0.7]) == pytest.approx(0.6)  # scores too high: positive
    assert signed_calibration_error([1, 1], [0.5, 0.7]) == pytest.approx(-0.4)


def test_ledger_shows_both_threshold_rules_and_both_binnings() -> None:
    from unsure.riskscores.reproduction import reproduction_table
    from unsure.riskscores.tables import metrics_frame, paper_table

    rng = np.random.default_rng(1)
    n = 300
    y = rng.integers(0, 2, n)
    frame = pd.DataFrame(
        {
            "model": "m",
            "task": "ACSIncome",
            "prompting": "multiple_choice",
            "row_id": [f"r{i}" for i in range(n)],
            "split": np.where(np.arange(n) < 200, "eval", "threshold"),
            "label": y,
            "p_hat": np.clip(0.25 * y + rng.uniform(0, 0.6, n), 0, 1),
        }
    )
    metrics = metrics_frame(frame)
    row = metrics.iloc[0]
    assert {"threshold_balanced", "accuracy_fitted_balanced", "sce", "ece_quantile"} <= set(metrics.columns)
    assert paper_table(metrics, "ACSIncome", protocol="paper").iloc[0]["Accuracy (fitted threshold)"] == pytest.approx(
        row["accuracy_fitted_balanced"]
    )
    assert (
        paper_table(metrics, "ACSIncome", protocol="corrected").iloc[0]["Accuracy (fitted threshold)"]
        == row["accuracy_fitted"]
    )
    for protocol in ("paper", "corrected"):
        ledger = reproduction_table(metrics, protocol).iloc[0]
        assert ledger["Prompts (protocol)"] == protocol
        assert ledger["ECE (equal-width bins)"] == row["ece"] and ledger["ECE (quantile bins)"] == row["ece_quantile"]
        assert ledger["Accuracy (accuracy-max threshold)"] == row["accuracy_fitted"]
        assert ledger["Accuracy (balanced-accuracy-max threshold)"] == row["accuracy_fitted_balanced"]
    assert reproduction_table(metrics, "paper").iloc[0]["Threshold rule in tables"] == "balanced accuracy"


PAPER = REPO.parent / "shared/papers/riskscores-cruz-et-al-evaluating-language-models-as-risk-scores.txt"


def test_ledger_puts_the_printed_values_beside_ours() -> None:
    """Tables 1 and A1-A4 as printed: every transcribed row is a line of the paper, and the
    ledger shows the printed ECE / Brier / AUC / accuracy next to ours for a model key of the
    paper config (and a dash where the paper prints nothing)."""
    from unsure.riskscores.reproduction import PRINTED, printed_values, reproduction_table

    paper = _real(PAPER).read_text().splitlines()
    for block in PRINTED.values():
        assert len(block.splitlines()) == 19
        for line in block.splitlines():
            assert line in paper, line
    printed = printed_values()
    assert len(printed) == 5 * (17 * 2 + 2)
    metrics = pd.DataFrame(
        {
            "model": ["yi-34b-chat", "xgboost", "tiny-llama"],
            "task": ["ACSIncome", "ACSMobility", "ACSIncome"],
            "prompting": ["numeric", "supervised", "numeric"],
            "ece": [0.2, 0.01, 0.3],
            "accuracy": [0.5, 0.7, 0.6],
        }
    )
    ledger = reproduction_table(metrics, "paper")
    yi, xgb, tiny = (ledger.iloc[i] for i in range(3))
    assert (yi["Printed in"], yi["ECE printed"], yi["Accuracy printed"]) == ("Table 1", 0.22, 0.48)
    assert yi["ECE (equal-width bins)"] == 0.2 and yi["Accuracy (0.5)"] == 0.5
    assert (xgb["Printed in"], xgb["AUC printed"], xgb["Brier printed"]) == ("Table A2", 0.74, 0.16)
    assert tiny["Printed in"] == "—" and np.isnan(tiny["ECE printed"])


# ----------------------------------------------------------------------------- dictionary

ESP_WORDS = {
    None: "N/A (not own child of householder, and not child in subfamily)",
    1: "Living with two parents: {b}oth parents in labor force",
    2: "Living with two parents: Father only in labor force",
    3: "Living with two parents: Mother only in labor force",
    4: "Living with two parents: Neither parent in labor force",
    5: "Living with father: Father in the labor force",
    6: "Living with father: Father not in labor force",
    7: "Living with mother: Mother in the labor force",
    8: "Living with mother: Mother not in labor force",
}


@pytest.mark.parametrize(("path", "both"), [(ONE_YEAR, "B"), (FIVE_YEAR, "b")], ids=["1-year", "5-year"])
def test_esp_codes_read_as_the_census_means_them(path: Path, both: str) -> None:
    dictionary = read_dictionary(_real(path))
    for code, want in ESP_WORDS.items():
        assert value_text("ESP", np.nan if code is None else float(code), dictionary) == want.format(b=both)
    # no feature column of the five tasks keeps a glued section header
    headers = [h.lower() for h in SECTION_HEADERS]
    for col in FEATURE_COLUMNS:
        for row in dictionary[col].values:
            label = row.label.lower()
            assert not label.rstrip().endswith(":"), (path.name, col, row.low, row.label)
            for h in headers:
                assert h not in label or label.startswith(h + ":"), (path.name, col, row.low, row.label)


def test_unknown_glued_header_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "dict.csv"
    path.write_text(
        'NAME,XYZ,C,1,"A variable"\nVAL,XYZ,C,1,"1","1","One thing Some new section:"\nVAL,XYZ,C,1,"2","2","Other"\n'
    )
    with pytest.raises(ValueError, match=r"XYZ code '1'.*section header"):
        read_dictionary(path)

"""The zoo's training: the studies' examples as the engine reads them, soft targets, reproducible bytes."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path
from typing import get_args

import numpy as np
import pandas as pd
import pytest
import torch

from unsure.config import CorpusStudy, ZooModel, ZooTraining, parse_config, read_config_file
from unsure.engine.hf import HFEngine
from unsure.engine.requests import ChoiceRequest, NumericRequest
from unsure.riskscores.prompts import numeric_label
from unsure.riskscores.scoring import make_scorer
from unsure.riskscores.tasks import FOLKTABLES
from unsure.zoo.build import build, training_texts
from unsure.zoo.corpus import ZOO_EXAMPLES
from unsure.zoo.corpus import riskscores as zoo_corpus
from unsure.zoo.training import encode, item_loss, train

SPEC = ZooModel(architecture="llama", vocab_size=600, hidden_size=32, layers=1, heads=2)
CHAT = ZooModel(architecture="llama", vocab_size=600, hidden_size=32, layers=1, heads=2, chat=True)
TRAINING = ZooTraining(examples={"riskscores": 12}, batch_size=4, warmup_steps=1)
REPO = Path(__file__).resolve().parents[1]

BUILD = """
import sys
from unsure.config import ZooModel, ZooTraining, parse_config, read_config_file
from unsure.zoo.build import build, training_texts
spec = ZooModel.model_validate_json(sys.argv[1])
training = ZooTraining.model_validate_json(sys.argv[2])
texts = training_texts(seed=0, n_sentences=1000)
build("m", spec, texts, sys.argv[3], zoo_seed=0, training=training, studies=["riskscores"])
"""


def digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return training_texts(seed=0, n_sentences=1000)


@pytest.fixture(scope="module")
def untrained(tmp_path_factory: pytest.TempPathFactory, texts: list[str]) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("untrained")
    for name, spec in (("base", SPEC), ("chat", CHAT)):
        build(name, spec, texts, root / name, zoo_seed=0)
    return {"base": root / "base", "chat": root / "chat"}


def test_trained_builds_are_byte_identical_across_processes(tmp_path: Path, untrained: dict[str, Path]) -> None:
    runs = []
    for i in range(2):
        out = tmp_path / f"run{i}"
        subprocess.run(
            [sys.executable, "-c", BUILD, SPEC.model_dump_json(), TRAINING.model_dump_json(), str(out)], check=True
        )
        runs.append(digest(out))
    assert runs[0] == runs[1]
    assert runs[0]["model.safetensors"] != digest(untrained["base"])["model.safetensors"]  # it did train
    assert {k: v for k, v in runs[0].items() if k != "model.safetensors"} == {
        k: v for k, v in digest(untrained["base"]).items() if k != "model.safetensors"
    }  # same tokenizer and config: only the weights moved


@pytest.mark.parametrize("name", ["base", "chat"])
def test_riskscores_examples_are_the_study_prompts_with_the_true_answers(name: str, untrained: dict[str, Path]) -> None:
    engine = HFEngine(str(untrained[name]), device="cpu")
    instruct = name == "chat"
    rows = zoo_corpus.draws(n=10, seed=3)
    examples = zoo_corpus.zoo_examples(engine, instruct=instruct, n=10, seed=3)
    asked: list[str] = []

    class Spy:
        """Records the prompts the study's scorer sends."""

        def choice_probs(self, requests: list[ChoiceRequest]) -> list[object]:
            asked.extend(r.prompt for r in requests)
            return engine.choice_probs(requests)

        def numeric(self, requests: list[NumericRequest]) -> list[float]:
            asked.extend(r.prompt for r in requests)
            return engine.numeric(requests)

        def chat_prompt(self, user: str, *, prefill: str = "") -> str:
            return engine.chat_prompt(user, prefill=prefill)

    expected = []
    for row in rows.itertuples(index=False):
        asked.clear()
        score = make_scorer(
            Spy(),
            FOLKTABLES[row.task],
            row.prompting,
            year=2018,
            instruct=instruct,
            both_orders=True,  # type: ignore[arg-type]
            protocol="corrected",
        )
        score(pd.DataFrame({"row_id": [row.row_id], "text": [row.text]}))
        if row.prompting == "multiple_choice":
            # the scorer asks order 0 (corrected: the negative option is A), then order 1 (it is B)
            expected += [
                (asked[0], " A", 1 - row.p_true),
                (asked[0], " B", row.p_true),
                (asked[1], " A", row.p_true),
                (asked[1], " B", 1 - row.p_true),
            ]
        else:
            asked_p = row.p_true if numeric_label(FOLKTABLES[row.task], protocol="corrected") == 1 else 1 - row.p_true
            expected.append((asked[0], f"{min(round(asked_p * 100), 99):02d}", 1.0))
    got = [(e.context, e.continuation, e.weight) for e in examples]
    assert [(c, a) for c, a, _ in got] == [(c, a) for c, a, _ in expected]
    np.testing.assert_allclose([w for *_, w in got], [w for *_, w in expected], atol=1e-12)
    if instruct:
        assert all(c.endswith(("Answer:", "0.")) and "<|im_start|>assistant" in c for c, _, _ in got)


def test_option_letters_share_one_sequence_with_a_soft_target(untrained: dict[str, Path]) -> None:
    engine = HFEngine(str(untrained["base"]), device="cpu")
    examples = zoo_corpus.zoo_examples(engine, instruct=False, n=20, seed=1)
    items = encode(engine, examples)
    assert len(items) == len({e.context for e in examples}) < len(examples)
    soft = [item for item in items if len({pos for pos, *_ in item.targets}) < len(item.targets)]
    assert soft
    for item in soft:  # the two letters at the answer position, weights summing to one, one example
        (pos_a, tok_a, w_a, ex_a), (pos_b, tok_b, w_b, ex_b) = item.targets
        assert pos_a == pos_b == len(item.ids) - 2 and ex_a == ex_b
        assert w_a + w_b == pytest.approx(1.0)
        assert engine.tokenizer.convert_ids_to_tokens([tok_a, tok_b]) == ["▁A", "▁B"]


def test_training_lowers_the_loss_on_fresh_examples(untrained: dict[str, Path], tmp_path: Path) -> None:
    engine = HFEngine(str(untrained["base"]), device="cpu")
    fresh = encode(engine, zoo_corpus.zoo_examples(engine, instruct=False, n=20, seed=99))
    pad = engine.tokenizer.eos_token_id

    def heldout() -> float:
        with torch.inference_mode():
            return float(item_loss(engine.model, fresh, pad))

    before = heldout()
    examples = zoo_corpus.zoo_examples(engine, instruct=False, n=80, seed=1)
    curve = train(engine, examples, ZooTraining(epochs=2, batch_size=8), seed=0)
    assert heldout() < 0.9 * before
    assert curve["loss"].tail(5).mean() < curve["loss"].head(5).mean()


def test_the_registry_has_a_corpus_for_every_study_the_config_names() -> None:
    assert list(ZOO_EXAMPLES) == list(get_args(CorpusStudy))
    assert ZOO_EXAMPLES["riskscores"] is zoo_corpus.zoo_examples


def test_each_zoo_model_learns_the_studies_that_run_it() -> None:
    config = parse_config(read_config_file(REPO / "config" / "demo.yaml"))
    assert config.zoo_training_studies("tiny-gpt2") == ["nextword", "labelbias"]
    assert config.zoo_training_studies("tiny-llama") == ["riskscores", "labelbias", "decisionrisk"]
    assert config.zoo_training_studies("tiny-llama-chat") == ["riskscores", "nextword", "labelbias", "decisionrisk"]
    assert config.zoo_training_studies("tiny-bert") == []  # the encoder: decisionrisk fine-tunes it
    raw = read_config_file(REPO / "config" / "demo.yaml")
    raw["zoo"] = {**raw["zoo"], **read_config_file(REPO / "config" / "untrained.yaml")["zoo"]}
    assert parse_config(raw).zoo_training_studies("tiny-llama") == []


@pytest.mark.usefixtures("shared_data")  # the shadow's tokenizers (without them it fetches from the hub)
def test_a_zoo_model_with_its_own_training_learns_the_studies_it_names() -> None:
    """The shadow's served models (no models: entry is built from them, the API entries point at
    their server) learn the prompts of the study that reads their replies, so that these parse as
    a real API model's do."""
    from shadow import merged_config, served_zoo

    raw = read_config_file(REPO / "config" / "demo.yaml")
    own = {"examples": {"decisionrisk": 50}, "epochs": 2}
    raw["zoo"]["models"]["tiny-gpt2"] = {**raw["zoo"]["models"]["tiny-gpt2"], "training": own}
    config = parse_config(raw)
    assert config.zoo_training_studies("tiny-gpt2") == ["decisionrisk"]  # not nextword and labelbias, which run it
    assert config.zoo_training("tiny-gpt2") == ZooTraining(**own)
    assert config.zoo_training("tiny-llama") == config.zoo.training
    raw["zoo"].pop("training")
    assert parse_config(raw).zoo_training_studies("tiny-gpt2") == ["decisionrisk"]  # without zoo.training too
    assert parse_config(raw).zoo_training_studies("tiny-llama") == []
    shadow = parse_config(merged_config())
    assert shadow.zoo.training is None  # the shadow's family models stay random
    assert shadow.zoo_training_studies(served_zoo("gpt-4o-mini")) == ["riskscores"]
    assert shadow.zoo_training_studies(served_zoo("gpt-3.5-turbo")) == ["nextword"]

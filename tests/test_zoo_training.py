"""The zoo's training: the studies' examples as the engine reads them, soft targets, reproducible bytes."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import get_args

import numpy as np
import pandas as pd
import pytest
import torch

from unsure.config import CorpusStudy, ZooModel, ZooTraining, check_files, parse_config, read_config_file
from unsure.engine.hf import HFEngine
from unsure.engine.requests import ChoiceRequest, NumericRequest
from unsure.riskscores.prompts import numeric_label
from unsure.riskscores.scoring import make_scorer
from unsure.riskscores.tasks import FOLKTABLES
from unsure.zoo.build import build, training_texts
from unsure.zoo.corpus import ZOO_EXAMPLES
from unsure.zoo.corpus import riskscores as zoo_corpus
from unsure.zoo.training import encode, row_loss, train

SPEC = ZooModel(architecture="llama", vocab_size=600, hidden_size=32, layers=1, heads=2)
CHAT = ZooModel(architecture="llama", vocab_size=600, hidden_size=32, layers=1, heads=2, chat=True)
GPT2 = ZooModel(architecture="gpt2", vocab_size=600, hidden_size=32, layers=1, heads=2)
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
    for name, spec in (("base", SPEC), ("chat", CHAT), ("gpt2", GPT2)):
        build(name, spec, texts, root / name, zoo_seed=0)
    return {name: root / name for name in ("base", "chat", "gpt2")}


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
    rows = encode(engine, examples)
    assert sum(row.sequences for row in rows) == len({e.context for e in examples}) < len(examples)
    soft = [(row, pos) for row in rows for pos, n in Counter(pos for pos, *_ in row.targets).items() if n > 1]
    assert soft
    for row, pos in soft:  # the two letters at the answer position, weights summing to one, one example
        (_, tok_a, w_a, ex_a), (_, tok_b, w_b, ex_b) = [t for t in row.targets if t[0] == pos]
        assert ex_a == ex_b and row.ids[pos + 1] in (tok_a, tok_b) and row.segments[pos] == row.segments[pos + 1]
        assert w_a + w_b == pytest.approx(1.0)
        assert engine.tokenizer.convert_ids_to_tokens([tok_a, tok_b]) == ["▁A", "▁B"]


@pytest.mark.parametrize("name", ["base", "chat", "gpt2"])
def test_packed_rows_score_as_separate_sequences(name: str, untrained: dict[str, Path]) -> None:
    """A census row asked in both option orders shares its opening: packed in one row, each
    target reads the same prediction as in a sequence of its own (the loss and its gradient)."""
    engine = HFEngine(str(untrained[name]), device="cpu")
    examples = zoo_corpus.zoo_examples(engine, instruct=name == "chat", n=30, seed=2)
    packed, alone = encode(engine, examples), encode(engine, examples, most=1)
    assert len(packed) < len(alone) and sum(len(r.ids) for r in packed) < 0.8 * sum(len(r.ids) for r in alone)
    assert any(max(r.segments) > 1 for r in packed)
    pad = engine.tokenizer.eos_token_id
    losses, grads = [], []
    for rows in (packed, alone):
        engine.model.zero_grad()
        loss = row_loss(engine.model, rows, pad) * sum(r.sequences for r in rows)
        loss.backward()
        losses.append(float(loss.detach()))
        grads.append(torch.cat([p.grad.flatten() for p in engine.model.parameters() if p.grad is not None]))
    assert losses[0] == pytest.approx(losses[1], rel=1e-5)
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-4, atol=1e-6)


def test_training_lowers_the_loss_on_fresh_examples(untrained: dict[str, Path], tmp_path: Path) -> None:
    engine = HFEngine(str(untrained["base"]), device="cpu")
    fresh = encode(engine, zoo_corpus.zoo_examples(engine, instruct=False, n=20, seed=99))
    pad = engine.tokenizer.eos_token_id

    def heldout() -> float:
        with torch.inference_mode():
            return float(row_loss(engine.model, fresh, pad))

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
    untrained = check_files([REPO / "config" / "demo.yaml", REPO / "config" / "untrained.yaml"])
    assert all(untrained.zoo_training_studies(name) == [] for name in untrained.zoo.models)


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

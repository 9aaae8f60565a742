"""The decisionrisk room's zoo corpus: the room's own requests, answered with the generator's truth."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd
import pytest

from unsure.config import load_config
from unsure.decisionrisk.confidences import parse_verbal
from unsure.decisionrisk.data import ORIGINAL, load_benchmark
from unsure.decisionrisk.infer import generative_scorer
from unsure.engine import ContinuationRequest, ContinuationScores, Engine, ReplyRequest
from unsure.engine.hf import HFEngine
from unsure.generate.mcqa import BENCHMARKS, linked_choice, write_benchmark
from unsure.zoo.corpus import decisionrisk as zoo_corpus

REPO = Path(__file__).resolve().parents[1]
DEMO = load_config(REPO / "config" / "demo.yaml")
MAX_NEW_TOKENS = DEMO.studies.decisionrisk.verbal_max_new_tokens
N = 48


@pytest.fixture(scope="module")
def engines(demo_zoo: dict[str, Path]) -> dict[str, HFEngine]:
    """The demo's base and chat models, built (untrained) exactly as the zoo builds them
    (the session's build: ``conftest.demo_zoo``)."""
    return {
        name: HFEngine.from_config(DEMO.models[name].model_copy(update={"id": str(demo_zoo[name])}))
        for name in ("tiny-llama", "tiny-llama-chat")
    }


@pytest.fixture(scope="module")
def corpus(engines: dict[str, HFEngine]) -> dict[bool, tuple[pd.DataFrame, list[Any]]]:
    """Per ``instruct``: the corpus' rows and examples for the demo's base or chat model."""
    out = {}
    for name, instruct in (("tiny-llama", False), ("tiny-llama-chat", True)):
        rows = zoo_corpus.zoo_rows(instruct=instruct, n=N, seed=7)
        out[instruct] = rows, zoo_corpus.zoo_examples(engines[name], instruct=instruct, n=N, seed=7)
    return out


class Recorder:
    """The engine, passing every request through and keeping what the room asked for."""

    def __init__(self, engine: HFEngine) -> None:
        self.engine = engine
        self.requests: list[ContinuationRequest] = []
        self.prompts: list[str] = []

    def continuation_scores(self, requests: Sequence[ContinuationRequest]) -> list[ContinuationScores]:
        self.requests.extend(requests)
        scores: list[ContinuationScores] = self.engine.continuation_scores(requests)
        return scores

    def chat_prompt(self, user: str) -> str:
        prompt: str = self.engine.chat_prompt(user)
        return prompt

    def generate(self, requests: Sequence[ReplyRequest]) -> list[str]:
        self.prompts.extend(r.prompt for r in requests)
        replies: list[str] = self.engine.generate(requests)
        return replies


def test_the_same_seed_gives_the_same_examples(engines: dict[str, HFEngine]) -> None:
    engine = engines["tiny-llama-chat"]
    first = zoo_corpus.zoo_examples(engine, instruct=True, n=20, seed=3)
    assert first == zoo_corpus.zoo_examples(engine, instruct=True, n=20, seed=3)
    assert first != zoo_corpus.zoo_examples(engine, instruct=True, n=20, seed=4)


@pytest.mark.parametrize(("name", "instruct"), [("tiny-llama", False), ("tiny-llama-chat", True)])
def test_n_examples_from_every_benchmark(engines: dict[str, HFEngine], name: str, instruct: bool) -> None:
    rows = zoo_corpus.zoo_rows(instruct=instruct, n=N, seed=1)
    examples = zoo_corpus.zoo_examples(engines[name], instruct=instruct, n=N, seed=1)
    assert len(rows) == len(examples) == N
    for kind, part in rows.groupby("kind"):
        assert set(part["benchmark"]) == set(BENCHMARKS), kind
    assert set(rows["kind"]) == ({"chat"} if instruct else {"loglik"})
    if instruct:
        chat = rows[rows["kind"] == "chat"]
        assert set(chat["injection"]) == {ORIGINAL, "NQ", "WQ", "NRA"}
        assert (chat["injection"] == "NQ").any()
    assert zoo_corpus.zoo_examples(engines[name], instruct=instruct, n=0, seed=1) == []


@pytest.mark.parametrize(("name", "instruct"), [("tiny-llama", False), ("tiny-llama-chat", True)])
def test_contexts_are_the_rooms_requests(
    engines: dict[str, HFEngine], corpus: dict[bool, tuple[pd.DataFrame, list[Any]]], name: str, instruct: bool
) -> None:
    """The room's scorer, run on the corpus' instances, asks for exactly the corpus' contexts."""
    rows, examples = corpus[instruct]
    recorder = Recorder(engines[name])
    score = generative_scorer(cast(Engine, recorder), instruct=instruct, normalize=True, max_new_tokens=MAX_NEW_TOKENS)
    score(rows)
    if instruct:
        assert [ex.context for ex in examples] == recorder.prompts
    else:
        assert [ex.context for ex in examples] == [r.context for r in recorder.requests]
        for row, ex, request in zip(rows.itertuples(), examples, recorder.requests, strict=True):
            assert ex.continuation == request.continuations[row.label]


def test_gold_continuations_are_the_gold_choice(corpus: dict[bool, tuple[pd.DataFrame, list[Any]]]) -> None:
    """Log-likelihood examples continue with the gold choice of an item whose gold the text reveals."""
    rows, examples = corpus[False]
    for row, ex in zip(rows.itertuples(), examples, strict=True):
        assert row.kind == "loglik" and row.injection == ORIGINAL and row.answerable
        assert ex.continuation == " " + row.choices[row.label]
        assert linked_choice(row.prompt, list(row.choices)) == row.label


def test_replies_parse_and_state_the_truth(
    engines: dict[str, HFEngine], corpus: dict[bool, tuple[pd.DataFrame, list[Any]]]
) -> None:
    """Each reply fits in the tokens the room generates, parses to the generator's probabilities, and
    then ends the turn (a reply that went on was never taught what follows its last option)."""
    engine = engines["tiny-llama-chat"]
    rows, examples = corpus[True]
    linked = 0
    for row, ex in zip(rows.itertuples(), examples, strict=True):
        assert row.kind == "chat"
        # What the trainer encodes (split_pair) is the prompt generation starts from, then the reply.
        ctx, cont = engine.split_pair(ex.context, ex.continuation)
        head = engine.encode(ex.context)
        assert [*ctx, *cont][: len(head)] == head
        *tokens, end = [*ctx, *cont][len(head) :]
        assert end == engine.tokenizer.eos_token_id, ex.continuation
        assert len(tokens) <= MAX_NEW_TOKENS, ex.continuation
        reply = engine.tokenizer.decode(tokens)
        parsed = parse_verbal(reply, len(row.choices))
        assert parsed is not None, reply
        gold = linked_choice(row.prompt, list(row.choices)) if row.answerable else None
        if gold is None:
            np.testing.assert_allclose(parsed, 1 / len(row.choices))
        else:
            linked += 1
            assert gold == row.label
            assert int(np.argmax(parsed)) == row.label and parsed.max() > 0.9
    assert linked > 0


def test_base_model_gets_no_chat(engines: dict[str, HFEngine]) -> None:
    examples = zoo_corpus.zoo_examples(engines["tiny-llama"], instruct=False, n=12, seed=0)
    assert all(ex.continuation.startswith(" ") and "<|im_start|>" not in ex.context for ex in examples)


def test_items_are_drawn_fresh_not_the_demos(tmp_path: Path) -> None:
    """Whatever the seed, the corpus does not replay the demo's benchmark files (drawn with its data seed)."""
    mcqa = DEMO.data.mcqa
    for seed in (0, DEMO.seed):
        drawn = zoo_corpus.zoo_rows(instruct=True, n=80, seed=seed)
        for benchmark in BENCHMARKS:
            write_benchmark(
                tmp_path / benchmark,
                benchmark=benchmark,
                n_train=mcqa.generated_train,
                n_val=mcqa.generated_val,
                seed=DEMO.seed,
            )
            demo = {
                p
                for split in ("train", "val")
                for p in load_benchmark(tmp_path / benchmark, benchmark, split)["prompt"]
            }
            ours = drawn.loc[(drawn["benchmark"] == benchmark) & (drawn["injection"] == ORIGINAL), "prompt"]
            assert ours.isin(demo).mean() < 0.2, benchmark


def test_reply_wording() -> None:
    assert zoo_corpus.verbal_reply([1.0, 0.0]) == "A: 100 B: 1"
    assert zoo_corpus.verbal_reply([1 / 3] * 3) == "A: 33 B: 33 C: 33"
    assert zoo_corpus.shares(10, [0.4, 0.15, 0.3, 0.15]) == [4, 2, 3, 1]
    assert sum(zoo_corpus.shares(7, [1.0] * 4)) == 7

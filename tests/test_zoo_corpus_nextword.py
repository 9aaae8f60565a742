"""The nextword study's zoo corpus: passages and chat replies that follow the text model's exact distribution."""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from unsure.engine import WordSamples
from unsure.engine.finetune import Example
from unsure.engine.hf import HFEngine
from unsure.engine.words import first_word
from unsure.generate import text
from unsure.nextword.inference import chat_scorer, parse_word_list
from unsure.nextword.words import normalize_word
from unsure.zoo.corpus import nextword as zoo_corpus

_PROMPT = re.compile(
    r"Here is the beginning of a text:\n\n(?P<context>.*?)\n\n(?:Which word comes next\?|Give (?P<n>\d+) guesses)",
    re.S,
)


@pytest.fixture(scope="module")
def base(tiny_models: dict[str, Path]) -> HFEngine:
    return HFEngine(str(tiny_models["gpt2"]), device="cpu")


@pytest.fixture(scope="module")
def chat(tiny_models: dict[str, Path]) -> HFEngine:
    """The tiny Llama as an instruct model (the engine's plain chat template; EOS ``</s>``)."""
    return HFEngine(str(tiny_models["llama"]), device="cpu", instruct=True)


@pytest.fixture(scope="module")
def instruct_examples(chat: HFEngine) -> list[Example]:
    return zoo_corpus.zoo_examples(chat, instruct=True, n=500, seed=3)


@pytest.fixture(scope="module")
def chat_examples(instruct_examples: list[Example]) -> list[Example]:
    """The instruct examples that are chat prompts (the others are plain passages)."""
    return [ex for ex in instruct_examples if _PROMPT.search(ex.context)]


class Recorder:
    """Stands in for the engine inside the study's scorers: renders chat prompts with the
    real engine and records what the scorer would send to the model."""

    def __init__(self, engine: HFEngine) -> None:
        self.engine = engine
        self.sent: list[str] = []

    def chat_prompt(self, user: str, **kwargs: Any) -> str:
        return self.engine.chat_prompt(user, **kwargs)

    def sample_words(self, requests: list[Any]) -> list[WordSamples]:
        self.sent += [r.context for r in requests]
        return [WordSamples(words=[], rejected=r.n) for r in requests]

    def generate(self, requests: list[Any]) -> list[str]:
        self.sent += [r.prompt for r in requests]
        return ["" for _ in requests]


def _study_prompt(engine: HFEngine, mode: str, context: str, n: int) -> str:
    """The prompt the study's chat scorer sends for this context."""
    recorder = Recorder(engine)
    rows = pd.DataFrame({"row_id": ["1-2"], "text_id": [1], "word_num": [2], "context": [context]})
    chat_scorer(recorder, mode=mode, n=n)(rows)  # type: ignore[arg-type]
    (prompt,) = recorder.sent
    return prompt


def _parsed(example: Example) -> tuple[str, str, int]:
    """(mode, passage prefix, words asked for) of a chat example."""
    match = _PROMPT.search(example.context)
    assert match is not None, example.context
    if match["n"] is None:
        return "single", match["context"], 1
    return "list", match["context"], int(match["n"])


def _reply(engine: HFEngine, example: Example) -> str:
    """The reply as the study's readers see it: the continuation's tokens decoded without special tokens."""
    _, ids = engine.split_pair(example.context, example.continuation)
    return str(engine.tokenizer.decode(ids, skip_special_tokens=True))


def _pit(dist: dict[str, float], word: str, u: float) -> float:
    """Randomised probability integral transform of a discrete draw: uniform on (0, 1) iff ``word ~ dist``."""
    keys = sorted(dist)
    assert word in dist, f"{word!r} cannot come next"
    below = sum(dist[k] for k in keys[: keys.index(word)])
    return below + u * dist[word]


def test_same_seed_same_examples(base: HFEngine, chat: HFEngine) -> None:
    for engine, instruct in ((base, False), (chat, True)):
        first = zoo_corpus.zoo_examples(engine, instruct=instruct, n=12, seed=5)
        assert len(first) == 12
        assert first == zoo_corpus.zoo_examples(engine, instruct=instruct, n=12, seed=5)
        assert first != zoo_corpus.zoo_examples(engine, instruct=instruct, n=12, seed=6)
    assert zoo_corpus.zoo_examples(base, instruct=False, n=0, seed=0) == []


def test_base_examples_are_passages_as_the_study_reads_them(base: HFEngine) -> None:
    examples = zoo_corpus.zoo_examples(base, instruct=False, n=30, seed=1)
    for ex in examples:
        assert ex.weight == 1.0
        assert " " not in ex.context and ex.context[:1].isupper()
        assert ex.continuation.startswith(" ") and not ex.continuation.startswith("  ")
        words = (ex.context + ex.continuation).split()
        assert 40 <= len(words) <= 80 and words[-1].endswith(".")
        assert text.display_words(text.tokenize(words)) == words  # displayed as the norms' Text is
        # every position's context, as the norms give it, is a prefix of the running text
        whole = ex.context + ex.continuation
        assert all(whole.startswith(" ".join(words[:i]) + " ") for i in range(1, len(words)))
        text.next_word_distributions(words)  # raises unless the generator can write this passage


def test_passage_words_follow_the_exact_next_word_distribution(base: HFEngine) -> None:
    """Sequential PITs of an ancestral sample are independent uniforms: every word of a passage is a
    draw from the exact distribution given the displayed words before it."""
    rng = np.random.default_rng(0)
    pits = []
    for ex in zoo_corpus.zoo_examples(base, instruct=False, n=40, seed=2):
        words = (ex.context + ex.continuation).split()
        dists = text.next_word_distributions(words)
        pits += [_pit(dists[i], normalize_word(words[i]), rng.random()) for i in range(1, len(words))]
    assert len(pits) > 1500
    assert stats.kstest(pits, "uniform").pvalue > 1e-3


def test_instruct_examples_mix_passages_and_chat_prompts(
    instruct_examples: list[Example], chat_examples: list[Example]
) -> None:
    plain = [ex for ex in instruct_examples if ex not in chat_examples]
    assert len(plain) == round(zoo_corpus.INSTRUCT_PASSAGE_SHARE * len(instruct_examples))
    for ex in plain:
        text.next_word_distributions((ex.context + ex.continuation).split())
    # mixed, not in blocks: the trainer's batches see both kinds
    kinds = [ex in chat_examples for ex in instruct_examples]
    assert sum(a != b for a, b in itertools.pairwise(kinds)) > 50


def test_chat_prompts_are_the_study_prompts(chat: HFEngine, chat_examples: list[Example]) -> None:
    modes = set()
    for ex in chat_examples:
        mode, context, n = _parsed(ex)
        modes.add((mode, n))
        assert context and context == " ".join(context.split())
        text.next_word_distribution(context.split())  # a prefix the generator can write
        assert ex.context == _study_prompt(chat, mode, context, n)
        assert ex.continuation.endswith(str(chat.tokenizer.eos_token))
    assert modes == {("single", 1), *(("list", n) for n in zoo_corpus.LIST_SIZES)}


def test_single_replies_are_draws_from_the_exact_distribution(chat: HFEngine, chat_examples: list[Example]) -> None:
    rng = np.random.default_rng(1)
    pits = []
    for ex in chat_examples:
        mode, context, _ = _parsed(ex)
        if mode != "single":
            continue
        reply = _reply(chat, ex)
        word, settled = first_word(reply, finished=True)  # the sampler stops at EOS
        assert settled and word is not None and normalize_word(reply) == normalize_word(word)
        pits.append(_pit(text.next_word_distribution(context.split()), normalize_word(word), rng.random()))
    assert len(pits) > 150
    assert stats.kstest(pits, "uniform").pvalue > 1e-3


def test_list_replies_are_the_closest_lists_to_the_exact_distribution(
    chat: HFEngine, chat_examples: list[Example]
) -> None:
    lists = [ex for ex in chat_examples if _parsed(ex)[0] == "list"]
    assert len(lists) > 150
    for ex in lists:
        _, context, n = _parsed(ex)
        words = parse_word_list(_reply(chat, ex), n)
        dist = text.next_word_distribution(context.split())
        assert words == zoo_corpus.quantized_list(dist, n)


def _l1(words: Sequence[str], dist: dict[str, float]) -> float:
    return float(sum(abs(list(words).count(k) / len(words) - p) for k, p in dist.items()))


def test_quantized_list_minimises_total_variation() -> None:
    assert zoo_corpus.quantized_list({"a": 0.5, "b": 0.3, "c": 0.2}, 5) == ["a", "a", "a", "b", "c"]
    assert zoo_corpus.quantized_list({"x": 1.0}, 3) == ["x", "x", "x"]
    rng = np.random.default_rng(0)
    for _ in range(30):
        keys = ["a", "b", "c", "d"]
        p = rng.dirichlet(np.ones(4) * 0.7)
        dist = dict(zip(keys, p, strict=True))
        got = zoo_corpus.quantized_list(dist, 5)
        assert len(got) == 5

        best = min(_l1(c, dist) for c in itertools.combinations_with_replacement(keys, 5))
        assert _l1(got, dist) == pytest.approx(best)
        distinct = list(dict.fromkeys(got))
        assert got == [w for w in distinct for _ in range(got.count(w))]  # repeats adjacent
        assert [got.count(w) for w in distinct] == sorted((got.count(w) for w in distinct), reverse=True)
    with pytest.raises(ValueError, match="at least one word"):
        zoo_corpus.quantized_list({"a": 1.0}, 0)


def test_draw_word_follows_the_distribution() -> None:
    rng = np.random.default_rng(0)
    dist = {"b": 0.2, "a": 0.5, "c": 0.3}
    draws = [zoo_corpus.draw_word(dist, rng) for _ in range(4000)]
    counts = [draws.count(w) for w in ("a", "b", "c")]
    assert stats.chisquare(counts, [2000, 800, 1200]).pvalue > 1e-3

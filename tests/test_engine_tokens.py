"""The engine's batched tokenising and detokenising equal the tokenizer's own calls, one text at a
time, on the real tokenizers of the papers' models (``../shared/data/tokenizers``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from transformers import AutoConfig, AutoTokenizer

from unsure.engine.tokens import PLAIN_CHAT_TEMPLATE, Codec

TOKENIZERS = Path(__file__).resolve().parents[2] / "shared" / "data" / "tokenizers"
FOLDERS = [
    "gpt2",
    "llama-2-7b",
    "llama-3-8b-instruct",
    "mistral-7b-instruct",
    "falcon-7b-instruct",
    "gemma-it-hybrid",
]
TEXTS = [
    "The following data describes a survey respondent.\n- Age: 42 years old.\nAnswer:",
    "Definition: Classify the sentence.\n\nInput: It's a dog's life, isn't it?\nOutput:",
    "  leading spaces and trailing ones   ",
    "Ünïcödé — “quotes”, emoji 🙂 and numbers 0.73 / 12,000",
    "",
    "A",
]
CONTINUATIONS = [" yes", " no", "  two spaces", " 🙂", " B.\n"]


@pytest.fixture(scope="module", params=FOLDERS)
def codec(request: pytest.FixtureRequest) -> Codec:
    folder = TOKENIZERS / request.param
    if not folder.is_dir():
        pytest.skip(f"{folder} is absent (the real tokenizers live in ../shared/data/tokenizers)")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    if tokenizer.chat_template is None:
        tokenizer.chat_template = PLAIN_CHAT_TEMPLATE
    return Codec(tokenizer, AutoConfig.from_pretrained(folder), model_id=request.param)


def test_encoding_many_texts_at_once_equals_encoding_each(codec: Codec) -> None:
    texts = [*TEXTS, *(codec.chat_prompt(t) for t in TEXTS)]  # plain and chat-templated, in one list
    assert codec.encode_many(texts) == [codec.encode(t) for t in texts]
    tok = codec.tokenizer
    for text, ids in zip(texts, codec.encode_many(texts), strict=True):
        templated = codec._is_templated(text)
        alone = tok(text, add_special_tokens=not templated)["input_ids"] or [codec.prefix_id]
        assert ids[len(ids) - len(alone) :] == alone  # at most a BOS in front of the tokenizer's own ids


def test_splitting_pairs_at_once_equals_lm_evaluation_harness_split_of_each(codec: Codec) -> None:
    """lm-eval's rule: trailing spaces of the context move to the continuation; the whole text is
    encoded and the context's ids cut off its front."""
    pairs = [(c, k) for c in TEXTS if c.strip() for k in CONTINUATIONS]
    got = codec.split_pairs(pairs)
    for (context, continuation), (ctx, cont) in zip(pairs, got, strict=True):
        n = len(context) - len(context.rstrip())
        if n:
            context, continuation = context[:-n], context[-n:] + continuation
        want_ctx = codec.tokens(context)
        assert ctx == want_ctx
        assert cont == codec.tokens(context + continuation)[len(want_ctx) :]


def test_decoding_many_sequences_at_once_equals_the_tokenizers_decode(codec: Codec) -> None:
    tok = codec.tokenizer
    rng = np.random.default_rng(0)
    special = [i for i in (tok.eos_token_id, tok.bos_token_id) if i is not None]
    seqs = [tuple(int(t) for t in rng.integers(0, len(tok), size=rng.integers(1, 6))) for _ in range(300)]
    seqs += [(*s, special[0]) for s in seqs[:20]] if special else []
    seqs += [tuple(tok(" hello world, it's")["input_ids"])]
    memo: dict[tuple[int, ...], str] = {}
    assert codec.decode_many(seqs, memo) == [tok.decode(list(s), skip_special_tokens=True) for s in seqs]
    assert codec.decode_many(seqs[:5], memo) == [memo[s] for s in seqs[:5]]


def test_a_tokenizer_file_that_truncates_does_not_truncate_the_engines_texts() -> None:
    """A ``tokenizer.json`` may carry truncation settings; ``tokenizer(texts)`` ignores them, so must the engine."""
    folder = TOKENIZERS / "gpt2"
    if not folder.is_dir():
        pytest.skip(f"{folder} is absent (the real tokenizers live in ../shared/data/tokenizers)")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.backend_tokenizer.enable_truncation(max_length=3)
    codec = Codec(tokenizer, AutoConfig.from_pretrained(folder), model_id="gpt2")
    texts = [t for t in TEXTS if t]
    assert codec.tokens_many(texts) == [tokenizer(t)["input_ids"] for t in texts]
    assert max(map(len, codec.tokens_many(texts))) > 3

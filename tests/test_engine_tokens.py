"""The engine's batched tokenising and detokenising equal the tokenizer's own calls, one text at a
time, on the real tokenizers of the papers' models (``../shared/data/tokenizers``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from transformers import AutoConfig, AutoTokenizer

from unsure.engine.tokens import PLAIN_CHAT_TEMPLATE, Codec, last_line_start, line_cuts_exact, line_pieces

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


PIECES = ["\n", "\n\n", "\r\n", " ", "  ", "\t", "a", "Output", " label", "é", "中文", "Ünï", "1", "123", "4567", ".",
          ":", "'s", "—", "🙂", "\xa0", "Ċ", "▁x", "-", "\n "]  # fmt: skip


def _random_texts(rng: np.random.Generator, n: int, most: int, extra: list[str]) -> list[str]:
    pieces = PIECES + extra
    return ["".join(rng.choice(pieces, size=rng.integers(1, most + 1))) for _ in range(n)]


def test_a_texts_last_line_is_found_from_its_end_where_its_pieces_put_it() -> None:
    """The last line's start, found backwards, is where :func:`line_pieces` cuts the last piece, for
    texts of newlines, other whitespace (a no-break space, a line separator) and added tokens' first
    characters."""
    texts = [*_random_texts(np.random.default_rng(2), 3000, 10, ["<", "<eos>", "\u2028", "\n<"]), "", "\n", "x\n"]
    for kept in ("", "<", "<["):
        assert [last_line_start(t, kept) for t in texts] == [len(t) - len(line_pieces(t, kept)[-1]) for t in texts]


def test_texts_tokenised_line_by_line_equal_the_tokenizers_own_ids(codec: Codec) -> None:
    """Each line that begins with other than whitespace is tokenised once, after a lone newline; on
    every real tokenizer that must give the tokenizer's own ids of the whole text, here for texts of
    newlines, spaces, letters, digits, punctuation, other scripts, the tokenizer's special tokens and
    chat templates, and for lm-eval's split of such texts and continuations."""
    rng = np.random.default_rng(1)
    specials = [t for t in codec.tokenizer.all_special_tokens if t][:4]
    texts = _random_texts(rng, 1500, 12, specials)
    texts += [f"{a}\nInput: {b}\nOutput:" for a, b in zip(texts[:100], texts[100:200], strict=True)]
    texts += [codec.chat_prompt(t) for t in texts[-50:]] + TEXTS
    texts += ["a\n—", "\nx\ny", "b\nx", "x\n", "\n", "\n\n", "x\n\ny"]  # one-character lines, first and last
    tok = codec.tokenizer
    for special in (True, False, None):
        got = codec.tokens_many(texts, special)
        flags = [codec._flag(t) if special is None else special for t in texts]
        want = [tok(t, add_special_tokens=f)["input_ids"] for t, f in zip(texts, flags, strict=True)]
        assert [ids[len(ids) - len(w) :] for ids, w in zip(got, want, strict=True)] == want
        assert all(len(ids) - len(w) <= 1 for ids, w in zip(got, want, strict=True))  # at most a BOS added
    more = _random_texts(rng, 40, 4, specials) + CONTINUATIONS
    pairs, want_cont = [], []
    for context in texts[:400]:
        continuation = str(rng.choice(more))
        n = len(context) - len(context.rstrip())  # lm-eval moves the context's trailing spaces
        head, tail = context[: len(context) - n], context[len(context) - n :] + continuation
        cont = tok(head + tail)["input_ids"][len(tok(head)["input_ids"]) :]
        if head and cont and codec.tokenizer.unk_token_id not in cont:  # else refused (tested elsewhere)
            pairs.append((context, continuation))
            want_cont.append(cont)
    assert [cont for _, cont in codec.split_pairs(pairs)] == want_cont


def test_label_scoring_tokenises_each_line_once(codec: Codec, monkeypatch: pytest.MonkeyPatch) -> None:
    """Eight demonstrations and ten labels: the prompts' shared lines are tokenised once, not once per
    prompt and label; the ids are those of the whole texts."""
    shots = "".join(f"Input: example number {i}, with words.\nOutput: label{i % 3}\n\n" for i in range(8))
    prompts = [f"Definition: classify.\n\n{shots}Input: query {q}\nOutput:" for q in range(20)]
    pairs = [(p, f" label{j}") for p in prompts for j in range(10)]
    sent: list[str] = []
    ids_of = codec._ids

    def spy(texts: list[str], *, special: bool) -> list[list[int]]:
        sent.extend(texts)
        return ids_of(texts, special=special)

    monkeypatch.setattr(codec, "_ids", spy)
    got = codec.split_pairs(pairs)
    assert sum(map(len, sent)) < 0.2 * sum(map(len, prompts))
    monkeypatch.setattr(codec, "_line_cuts", False)
    assert got == codec.split_pairs(pairs)


def test_tokenizers_that_may_join_across_a_line_start_are_tokenised_whole() -> None:
    """A byte-level tokenizer that adds a space in front of every text it is given would add one to
    each line: it is tokenised whole."""
    folder = TOKENIZERS / "gpt2"
    if not folder.is_dir():
        pytest.skip(f"{folder} is absent (the real tokenizers live in ../shared/data/tokenizers)")
    assert line_cuts_exact(AutoTokenizer.from_pretrained(folder).backend_tokenizer)
    prefixed = AutoTokenizer.from_pretrained(folder, add_prefix_space=True)
    assert not line_cuts_exact(prefixed.backend_tokenizer)
    codec = Codec(prefixed, AutoConfig.from_pretrained(folder), model_id="gpt2")
    pairs = [("Input: x\nOutput:", " yes"), ("a\nb", "\nc")]
    texts = [c + k for c, k in pairs]
    assert codec.tokens_many(texts) == [prefixed(t)["input_ids"] for t in texts]

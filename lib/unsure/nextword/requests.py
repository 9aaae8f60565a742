"""What nextword asks the engine, from its positions and settings: one place that says it.

The scorers (:mod:`.inference`), the zoo's examples and the cost estimate take the prompts
and requests from here.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping, Sequence

from unsure.engine import ContinuationRequest, ReplyRequest, TokenLogprobsRequest, WordSamplingRequest

Chat = Callable[[str], str]
"""An instruct model's chat template around a user turn (``engine.chat_prompt``)."""
Split = Callable[[str, str], tuple[Sequence[int], Sequence[int]]]
"""A tokenizer's split of a context and a continuation into their token ids (``engine.split_pair``)."""

CHAT_SINGLE = (
    "Here is the beginning of a text:\n\n{context}\n\n"
    "Which word comes next? Answer with exactly one word and nothing else."
)
"""Prompt of the ``single`` chat mode: one word per call."""
CHAT_LIST = (
    "Here is the beginning of a text:\n\n{context}\n\n"
    "Give {n} guesses of the word that comes next, as a comma-separated list of single words "
    "(repeat a word as often as you find it likely). Answer with the list only."
)
"""Prompt of the ``list`` chat mode: one call asking for ``n`` words."""


def position_seed(seed: int, row_id: str) -> int:
    """A sampling seed of one position: a function of the config seed and the row id only."""
    return zlib.crc32(f"{seed}:{row_id}".encode()) & 0x7FFFFFFF


def sampling_requests(
    row_ids: Sequence[str],
    contexts: Sequence[str],
    *,
    n: int,
    seed: int,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_p: float | None = None,
    top_k: int | None = None,
    chat: Chat | None = None,
) -> list[WordSamplingRequest]:
    """``n`` samples after each position's context (``chat``: the ``single`` mode's question about
    it, through the model's chat template), seeded per position (:func:`position_seed`)."""
    return [
        WordSamplingRequest(
            context=c if chat is None else chat(CHAT_SINGLE.format(context=c)),
            n=n,
            temperature=temperature,
            top_p=top_p,
            top_k=top_k,
            seed=position_seed(seed, str(r)),
            max_new_tokens=max_new_tokens,
        )
        for r, c in zip(row_ids, contexts, strict=True)
    ]


def list_requests(contexts: Sequence[str], *, n: int, chat: Chat) -> list[ReplyRequest]:
    """The ``list`` chat mode: one greedy reply per position, asked for ``n`` words (room for
    ``n`` words and their separators)."""
    return [ReplyRequest(chat(CHAT_LIST.format(context=c, n=n)), 4 * n + 16) for c in contexts]


def support_requests(contexts: Sequence[str], surfaces: Sequence[Sequence[str]]) -> list[ContinuationRequest]:
    """The biased estimator: each surface form of a position's support as a continuation of its
    context, with the leading space the model would produce."""
    return [ContinuationRequest(c, tuple(" " + s for s in forms)) for c, forms in zip(contexts, surfaces, strict=True)]


def support_sampling_requests(
    row_ids: Sequence[str],
    contexts: Sequence[str],
    *,
    nucleus: Sequence[float],
    nucleus_samples: int,
    seed: int,
    max_new_tokens: int,
) -> list[list[WordSamplingRequest]]:
    """The biased estimator's own samples, which widen each position's support: per setting, one
    request per position. The settings are ``nucleus_samples`` samples at each ``top_p`` of
    ``nucleus``, then the greedy word (top-k 1, one sample); setting ``i`` is seeded from
    ``seed + 1 + i``, so none shares the unbiased samples' seeds."""
    settings: list[tuple[float | None, int | None, int]] = [(p, None, nucleus_samples) for p in nucleus]
    settings.append((None, 1, 1))
    return [
        sampling_requests(
            row_ids, contexts, n=n, seed=seed + 1 + i, max_new_tokens=max_new_tokens, top_p=top_p, top_k=top_k
        )
        for i, (top_p, top_k, n) in enumerate(settings)
    ]


def first_tokens(context: str, words: Sequence[str], split: Split) -> tuple[tuple[int, ...], dict[str, int]]:
    """The token level: each word's first token after ``context`` (the word with its leading space,
    split as running text), and the context's ids as the last word's split gives them."""
    context_ids: Sequence[int] = ()
    firsts = {}
    for w in words:
        context_ids, cont = split(context, " " + w)
        firsts[w] = int(cont[0])
    return tuple(int(i) for i in context_ids), firsts


def token_request(context_ids: Sequence[int], firsts: Mapping[str, int]) -> TokenLogprobsRequest:
    """The token level's request of one position: the log-probabilities of its words' distinct
    first tokens (in id order) after its context."""
    return TokenLogprobsRequest(tuple(context_ids), tuple(sorted(set(firsts.values()))))

"""What nextword asks the engine, from its positions and settings: one place that says it.

The scorers (:mod:`.inference`), the zoo's examples and the cost estimate take the prompts
and requests from here.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence

from unsure.engine import ContinuationRequest, ReplyRequest, WordSamplingRequest

Chat = Callable[[str], str]
"""An instruct model's chat template around a user turn (``engine.chat_prompt``)."""

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

"""What every engine backend answers (:class:`Engine`), and the error a backend raises for a
request kind it cannot answer (:class:`Unsupported`).

A module of its own, below the backends and the loader that picks one
(:func:`unsure.engine.load.load_engine`), so that a backend that raises :class:`Unsupported`
(:mod:`unsure.engine.api`) does not import the loader that imports it. The studies import
both names from :mod:`unsure.engine`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from unsure.engine.requests import (
    ChoiceProbs,
    ChoiceRequest,
    ContinuationRequest,
    ContinuationScores,
    NumericReplyRequest,
    NumericRequest,
    ReplyRequest,
    WordSamples,
    WordSamplingRequest,
)


class Engine(Protocol):
    """What every backend answers. A backend that cannot answer a request kind
    (a chat API has no log-likelihoods of given text) raises
    :class:`Unsupported` naming the model and the request kind."""

    model_id: str

    def continuation_scores(self, requests: Sequence[ContinuationRequest]) -> list[ContinuationScores]: ...

    def choice_probs(self, requests: Sequence[ChoiceRequest]) -> list[ChoiceProbs]: ...

    def numeric(self, requests: Sequence[NumericRequest]) -> list[float]: ...

    def numeric_chat(self, requests: Sequence[NumericReplyRequest]) -> list[float]: ...

    def sample_words(self, requests: Sequence[WordSamplingRequest]) -> list[WordSamples]: ...

    def generate(self, requests: Sequence[ReplyRequest]) -> list[str]: ...

    def chat_prompt(self, user: str, *, system: str | None = None, prefill: str = "") -> str: ...

    def tokens_processed(self) -> int: ...


class Unsupported(NotImplementedError):
    """A backend cannot answer a request kind; the message names model and kind."""

"""One way to get an engine for a ``models:`` entry, whatever its backend."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from unsure.config import Model
from unsure.engine.requests import (
    ChoiceProbs,
    ChoiceRequest,
    ContinuationRequest,
    ContinuationScores,
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

    def numeric(self, prompts: Sequence[str], *, steps: int = 2) -> list[float]: ...

    def numeric_chat(self, prompts: Sequence[str], *, max_new_tokens: int = 24) -> list[float]: ...

    def sample_words(self, requests: Sequence[WordSamplingRequest]) -> list[WordSamples]: ...

    def generate(self, prompts: Sequence[str], *, max_new_tokens: int = 32) -> list[str]: ...

    def chat_prompt(self, user: str, *, system: str | None = None, prefill: str = "") -> str: ...

    def tokens_processed(self) -> int: ...


class Unsupported(NotImplementedError):
    """A backend cannot answer a request kind; the message names model and kind."""


def load_engine(entry: Model, **kwargs: Any) -> Engine:
    """The engine for one ``models:`` entry: ``transformers`` or an OpenAI-compatible API."""
    if entry.backend == "openai":
        from unsure.engine.api import APIEngine

        return APIEngine.from_config(entry, **kwargs)
    from unsure.engine.hf import HFEngine

    return HFEngine.from_config(entry, **kwargs)

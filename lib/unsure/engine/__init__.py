"""The inference engine: the only code in the project that touches model weights.

Every study's inference rule is a thin script over it. One API answers a few
request kinds (see :mod:`unsure.engine.requests`); backends are Hugging Face
``transformers`` (:class:`HFEngine`) and OpenAI-compatible web APIs.
:func:`plan_counters` counts what the Hugging Face engine would run for a list of
requests, without a model (the cost estimate's measure).
:mod:`unsure.engine.shards` runs a scorer over one shard of a table of rows with
checkpointed chunks, so a killed job resumes where it stopped.
"""

from typing import TYPE_CHECKING

from unsure.engine.backend import Engine, Unsupported
from unsure.engine.load import load_engine
from unsure.engine.requests import (
    ChoiceProbs,
    ChoiceRequest,
    ContinuationRequest,
    ContinuationScores,
    NumericReplyRequest,
    NumericRequest,
    ReplyRequest,
    TokenLogprobs,
    TokenLogprobsRequest,
    WordSamples,
    WordSamplingRequest,
)

__all__ = [
    "ChoiceProbs",
    "ChoiceRequest",
    "ContinuationRequest",
    "ContinuationScores",
    "Engine",
    "NumericReplyRequest",
    "NumericRequest",
    "ReplyRequest",
    "TokenLogprobs",
    "TokenLogprobsRequest",
    "Unsupported",
    "WordSamples",
    "WordSamplingRequest",
    "load_engine",
    "plan_counters",
]

if TYPE_CHECKING:
    from unsure.engine.plan import plan_counters


def __getattr__(name: str) -> object:
    """:func:`plan_counters` on first use: it imports torch and transformers, the rest of the API does not."""
    if name == "plan_counters":
        from unsure.engine.plan import plan_counters

        return plan_counters
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""What a rule's jobs run through a model, as each room's ``requests`` module counts it for the
paper-scale cost estimate (``bench/scale.py``).

A room says two things next to the requests it builds: ``request_sets``, its requests built by its
own request functions from sampled rows of the raw data (``bench/scale.py`` counts their tokens with
the engine's planner, per unit: a row, a position, a context), and ``rule_work``, per inference rule
and model, how many of those units its configured sizes send, and the loads and API requests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

CHAT_TOKENS = 32
"""Tokens a chat template adds around a user turn (Llama-3's header with a system prompt is about this; Gemma,
Mistral and ChatML add fewer)."""


class EstimateError(RuntimeError):
    """The estimate cannot be made; the message names the file, rule or model."""


@dataclass(frozen=True)
class RequestSet:
    """Requests built from sampled rows and the ``units`` they stand for; ``texts`` are their prompts' text (the
    estimate scales the planner's count to its tokenizer's count of them). Without requests, the tokens of ``texts``
    per unit; ``value``: a figure measured otherwise (an encoder's tokens per pair)."""

    key: str
    requests: Sequence[Any]
    units: int
    texts: Sequence[str] = ()
    sample_tokens: int | None = None
    """Tokens a word sample draws (the planner's ``sample_tokens``)."""
    value: float | None = None


@dataclass(frozen=True)
class Work:
    """What the jobs of one rule for one model (and ``match``'s wildcard values) run through the model, in total.

    ``tokens`` go forward only; ``train_tokens`` forward and backward; ``loads`` counts ``from_pretrained`` calls;
    API models count ``requests`` instead. ``kind``: the request kind (``bench/gpu.py``'s names) whose measured MFU
    its forward tokens run at; ``None`` where none is timed (training, the encoders).
    """

    study: str
    rule: str
    model: str
    match: dict[str, str]
    tokens: float = 0.0
    train_tokens: float = 0.0
    loads: int = 0
    api: bool = False
    requests: float = 0.0
    kind: str | None = None


def work(
    rule: str, model: str, match: dict[str, str], *, api: bool, tokens: float, requests: float, loads: int, kind: str
) -> Work:
    """A rule's work on a model: its tokens and loads on a GPU, its requests on an API."""
    study = rule.split("_")[0]
    if api:
        return Work(study, rule, model, match, api=True, requests=requests, kind=kind)
    return Work(study, rule, model, match, tokens=tokens, loads=loads, kind=kind)


def need(path: Path, what: str) -> Path:
    """``path``, or an error naming it when it is missing."""
    if not path.exists():
        raise EstimateError(
            f"{path}: missing ({what}). Prompt lengths are measured on the raw data and the zoo tokenizers in "
            "resources/ (`make demo` builds them) or on what --tokenizer names"
        )
    return path


def evenly(frame: pd.DataFrame, n: int) -> pd.DataFrame:
    """At most ``n`` rows spread evenly over the frame (the sample does not depend on file order tricks)."""
    if len(frame) <= n:
        return frame
    return frame.iloc[np.linspace(0, len(frame) - 1, n).astype(int)]

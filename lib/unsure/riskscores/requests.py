"""What riskscores asks the engine, from its rows and settings: the one place that says it.

The scorer (:mod:`.scoring`), the zoo's training examples and the cost estimate read the
requests from here rather than build prompts themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from unsure.config import Protocol
from unsure.engine import ChoiceRequest, NumericRequest
from unsure.riskscores.prompts import LETTERS, Shot, build_prompt
from unsure.riskscores.tasks import Task

Chat = Callable[[str, str], str]
"""An instruct model's chat template: ``chat(user, prefill)`` (:func:`.scoring.chat_wrapper`)."""


def option_orders(both_orders: bool) -> tuple[int, ...]:
    """The option orders a multiple-choice row is asked in (both: folktexts' letter-bias cancelling)."""
    return (0, 1) if both_orders else (0,)


def choice_requests(
    texts: Sequence[str],
    task: Task,
    *,
    year: int,
    both_orders: bool,
    shots: Sequence[Shot] = (),
    chat: Chat | None = None,
    protocol: Protocol,
) -> list[ChoiceRequest]:
    """Multiple choice: one request per row and option order, every row's first order, then
    every row's second (one call: the engine encodes the features a row's orders share once)."""

    def prompt(text: str, order: int) -> str:
        return build_prompt(task, text, "multiple_choice", order, year=year, shots=shots, chat=chat, protocol=protocol)

    return [ChoiceRequest(prompt(t, o), LETTERS) for o in option_orders(both_orders) for t in texts]


def numeric_requests(
    texts: Sequence[str],
    task: Task,
    *,
    year: int,
    shots: Sequence[Shot] = (),
    chat: Chat | None = None,
    protocol: Protocol,
) -> list[NumericRequest]:
    """Numeric: one request per row, its prompt ending in ``0.`` (a chat API answers it in free form)."""
    return [
        NumericRequest(build_prompt(task, t, "numeric", 0, year=year, shots=shots, chat=chat, protocol=protocol))
        for t in texts
    ]

"""Prompts: multiple-choice (options A/B, both orders) and verbalised numeric probability.

A prompt is the population sentence, the person's feature bullets, the question
and, for multiple choice, the two options, then ``Answer:``::

    The following data describes a survey respondent. The survey was conducted
    among US residents in 2018. Please answer the question based on the
    information provided.

    - Age is: 50 years old.
    ...
    Question: What is this person's estimated yearly income?
    A. Below $50,000.
    B. Above $50,000.
    Answer:

The numeric prompt asks "What is the probability that ...?" and ends in
``Answer (between 0 and 1): 0.`` so the engine's numeric procedure reads the
digits that follow. Few-shot prompts put ``k`` solved examples (same format,
answer given) between the population sentence and the question. Instruct
models get the same text as the user turn of their chat template, with the
answer prefix as the start of the assistant's reply; chat APIs, which cannot
pre-fill a reply, get the prefix as the end of the user turn (the engine's
``chat_prompt``), so they see exactly the plain prompt, as in folktexts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from unsure.riskscores.tasks import Task

LETTERS = ("A", "B")
NUMERIC_PREFIX = "Answer (between 0 and 1): 0."


def population_sentence(year: int) -> str:
    return (
        "The following data describes a survey respondent. "
        f"The survey was conducted among US residents in {year}. "
        "Please answer the question based on the information provided."
    )


def options(task: Task, order: int) -> tuple[str, str]:
    """The option texts shown as A and B: order 0 is (negative, positive), order 1 swapped."""
    return (task.negative, task.positive) if order == 0 else (task.positive, task.negative)


def positive_letter(order: int) -> int:
    """Index in :data:`LETTERS` of the positive option for a given order."""
    return 1 if order == 0 else 0


def mc_question(task: Task, order: int) -> str:
    a, b = options(task, order)
    return f"Question: {task.question}\nA. {a}.\nB. {b}."


def numeric_question(task: Task) -> str:
    return f"Question: {task.numeric_question}"


@dataclass(frozen=True)
class Shot:
    """A solved example: the person's bullets and its label."""

    text: str
    label: int


def draw_shots(train: pd.DataFrame, k: int, seed: int) -> list[Shot]:
    """``k`` training rows with balanced labels (the extra one positive when ``k`` is odd),
    drawn and shuffled with ``seed``; ``train`` needs ``row_id``, ``text`` and ``label``."""
    if k == 0:
        return []
    rng = np.random.default_rng(seed)
    n_pos = (k + 1) // 2
    picks = []
    for label, n in ((1, n_pos), (0, k - n_pos)):
        pool = train[train["label"] == label].sort_values("row_id")
        if len(pool) < n:
            raise ValueError(f"few_shot {k}: the training split has only {len(pool)} rows of label {label}")
        picks.append(pool.iloc[rng.choice(len(pool), n, replace=False)])
    chosen = pd.concat(picks)
    chosen = chosen.iloc[rng.permutation(len(chosen))]
    return [Shot(str(t), int(y)) for t, y in zip(chosen["text"], chosen["label"], strict=True)]


def _shot_block(task: Task, shot: Shot, kind: str, order: int) -> str:
    if kind == "multiple_choice":
        letter = LETTERS[positive_letter(order) if shot.label else 1 - positive_letter(order)]
        return f"{shot.text}\n{mc_question(task, order)}\nAnswer: {letter}\n\n"
    return f"{shot.text}\n{numeric_question(task)}\nAnswer (between 0 and 1): {float(shot.label):.1f}\n\n"


def prompt_parts(
    task: Task, text: str, kind: str, order: int, *, year: int, shots: Sequence[Shot] = ()
) -> tuple[str, str]:
    """(user text, answer prefix) of one prompt: the prefix opens the answer."""
    body = population_sentence(year) + "\n\n" + "".join(_shot_block(task, s, kind, order) for s in shots)
    if kind == "multiple_choice":
        return f"{body}{text}\n{mc_question(task, order)}", "Answer:"
    if kind == "numeric":
        return f"{body}{text}\n{numeric_question(task)}", NUMERIC_PREFIX
    raise ValueError(f"unknown prompting {kind!r} (multiple_choice or numeric)")


def build_prompt(
    task: Task,
    text: str,
    kind: str,
    order: int,
    *,
    year: int,
    shots: Sequence[Shot] = (),
    chat: Callable[[str, str], str] | None = None,
) -> str:
    """The full prompt; ``chat(user, prefill)`` wraps it in a chat template (instruct models)."""
    user, prefix = prompt_parts(task, text, kind, order, year=year, shots=shots)
    return chat(user, prefix) if chat is not None else f"{user}\n{prefix}"

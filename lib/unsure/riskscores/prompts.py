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

That is the ``corrected`` protocol. Under ``paper`` (:mod:`.paper`) every
prompt is folktexts' own: its population paragraph, an ``Information:`` block
of ``- The <feature> is: <words>.`` lines, its questions with options in its
order (order 0; order 1 swaps them), its few-shot layout, and plain text for
instruct models too (:func:`uses_chat`). :func:`row_texts` writes the feature
block of either protocol; every other function takes ``protocol``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from unsure.config import Protocol
from unsure.riskscores import paper
from unsure.riskscores.dictionary import DataDictionary
from unsure.riskscores.paper import Questions
from unsure.riskscores.tasks import FOLKTABLES, Task
from unsure.riskscores.text import frame_text

PROTOCOLS: tuple[Protocol, ...] = ("paper", "corrected")
LETTERS = ("A", "B")
NUMERIC_PREFIX = "Answer (between 0 and 1): 0."


def _check_protocol(protocol: str) -> None:
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r} (paper or corrected)")


def questions(task: Task, *, protocol: Protocol) -> Questions:
    """The task's questions and options (in order 0) under a protocol.

    ``corrected``: the task's own texts, negative option first. ``paper``:
    folktexts' for the five folktables tasks and for custom tasks that keep a
    folktables task's label and texts; other custom tasks keep their own texts.
    """
    _check_protocol(protocol)
    if protocol == "paper":
        if task.name in paper.QUESTIONS:
            return paper.QUESTIONS[task.name]
        for name, base in FOLKTABLES.items():
            same = (task.target, task.op, task.threshold, task.question, task.numeric_question) == (
                base.target, base.op, base.threshold, base.question, base.numeric_question
            )  # fmt: skip
            if same:
                return paper.QUESTIONS[name]
    return Questions(task.question, ((task.negative, 0), (task.positive, 1)), task.numeric_question)


def uses_chat(instruct: bool, *, protocol: Protocol) -> bool:
    """Whether a model's prompts go through its chat template (``paper``: never, as folktexts then)."""
    _check_protocol(protocol)
    return instruct and protocol == "corrected"


def row_texts(
    frame: pd.DataFrame, features: Sequence[str], dictionary: DataDictionary, *, protocol: Protocol
) -> pd.Series:
    """Each row's feature block in the protocol's words (one line per feature)."""
    _check_protocol(protocol)
    if protocol == "paper":
        return paper.feature_lines(frame, tuple(features), dictionary)
    return frame_text(frame, features, dictionary)


def population_sentence(year: int) -> str:
    return (
        "The following data describes a survey respondent. "
        f"The survey was conducted among US residents in {year}. "
        "Please answer the question based on the information provided."
    )


def _ordered(task: Task, order: int, protocol: Protocol) -> tuple[tuple[str, int], tuple[str, int]]:
    first, second = questions(task, protocol=protocol).options
    return (first, second) if order == 0 else (second, first)


def options(task: Task, order: int, *, protocol: Protocol) -> tuple[str, str]:
    """The option texts shown as A and B: order 0 is the protocol's order
    (``corrected``: negative, positive), order 1 swapped."""
    a, b = _ordered(task, order, protocol)
    return a[0], b[0]


def positive_letter(order: int, task: Task | None = None, *, protocol: Protocol) -> int:
    """Index in :data:`LETTERS` of the option of label 1 for a given order (``paper`` needs the task)."""
    if protocol == "corrected" or task is None:
        _check_protocol(protocol)
        if protocol == "paper":
            raise ValueError("positive_letter: protocol paper needs the task (its option order is the task's)")
        return 1 if order == 0 else 0
    return 0 if _ordered(task, order, protocol)[0][1] == 1 else 1


def mc_question(task: Task, order: int, *, protocol: Protocol) -> str:
    a, b = options(task, order, protocol=protocol)
    return f"Question: {questions(task, protocol=protocol).question}\nA. {a}.\nB. {b}."


def numeric_question(task: Task, *, protocol: Protocol) -> str:
    return f"Question: {questions(task, protocol=protocol).numeric_question}"


def numeric_label(task: Task, *, protocol: Protocol) -> int:
    """The label whose probability the numeric question asks for (0: the score is one minus the answer)."""
    return questions(task, protocol=protocol).numeric_label


@dataclass(frozen=True)
class Shot:
    """A solved example: the person's bullets and its label."""

    text: str
    label: int


def draw_shots(train: pd.DataFrame, k: int, seed: int, texts: Callable[[pd.DataFrame], pd.Series]) -> list[Shot]:
    """``k`` training rows with balanced labels (the extra one positive when ``k`` is odd),
    drawn and shuffled with ``seed``; ``train`` needs ``row_id`` and ``label``, and ``texts``
    writes the drawn rows' text (a training split of millions of rows is never written out whole)."""
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
    return [Shot(str(t), int(y)) for t, y in zip(texts(chosen), chosen["label"], strict=True)]


def _shot_block(task: Task, shot: Shot, kind: str, order: int) -> str:
    """A solved example as ``corrected`` writes it (``paper``: :func:`_paper_parts`)."""
    if kind == "multiple_choice":
        pos = positive_letter(order, protocol="corrected")
        letter = LETTERS[pos if shot.label else 1 - pos]
        question = mc_question(task, order, protocol="corrected")
        return f"{shot.text}\n{question}\nAnswer: {letter}\n\n"
    question = numeric_question(task, protocol="corrected")
    return f"{shot.text}\n{question}\nAnswer (between 0 and 1): {float(shot.label):.1f}\n\n"


def _paper_question(task: Task, kind: str, order: int) -> tuple[str, str]:
    if kind == "multiple_choice":
        return mc_question(task, order, protocol="paper"), "Answer:"
    if kind == "numeric":
        return numeric_question(task, protocol="paper"), NUMERIC_PREFIX
    raise ValueError(f"unknown prompting {kind!r} (multiple_choice or numeric)")


def _paper_answer(task: Task, shot: Shot, kind: str, order: int) -> str:
    """A solved example's answer as folktexts writes it: the letter, or the 0/1 label of its question."""
    if kind == "multiple_choice":
        pos = positive_letter(order, task, protocol="paper")
        return LETTERS[pos if shot.label else 1 - pos]
    return str(shot.label if numeric_label(task, protocol="paper") == 1 else 1 - shot.label)


def _paper_parts(task: Task, text: str, kind: str, order: int, year: int, shots: Sequence[Shot]) -> tuple[str, str]:
    question, prefix = _paper_question(task, kind, order)
    intro = paper.header(year, shots=True) + "\n"
    blocks = [
        f"{intro if i == 0 else ''}Information:\n{s.text}\n\n"
        f"{question}\n{prefix} {_paper_answer(task, s, kind, order)}\n\n"
        for i, s in enumerate(shots)
    ]
    head = "" if shots else paper.header(year) + "\n"
    return f"{''.join(blocks)}{head}Information:\n{text}\n\n{question}", prefix


def prompt_parts(
    task: Task,
    text: str,
    kind: str,
    order: int,
    *,
    year: int,
    shots: Sequence[Shot] = (),
    protocol: Protocol,
) -> tuple[str, str]:
    """(user text, answer prefix) of one prompt: the prefix opens the answer."""
    _check_protocol(protocol)
    if protocol == "paper":
        return _paper_parts(task, text, kind, order, year, shots)
    body = population_sentence(year) + "\n\n" + "".join(_shot_block(task, s, kind, order) for s in shots)
    if kind == "multiple_choice":
        return f"{body}{text}\n{mc_question(task, order, protocol=protocol)}", "Answer:"
    if kind == "numeric":
        return f"{body}{text}\n{numeric_question(task, protocol=protocol)}", NUMERIC_PREFIX
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
    protocol: Protocol,
) -> str:
    """The full prompt; ``chat(user, prefill)`` wraps it in a chat template (instruct models)."""
    user, prefix = prompt_parts(task, text, kind, order, year=year, shots=shots, protocol=protocol)
    return chat(user, prefix) if chat is not None else f"{user}\n{prefix}"

"""Risk scores from the engine: option probabilities or a verbalised number per row.

Multiple choice: the probability the model puts on the positive option's
letter, renormalised over the two letters (the engine's ``choice_probs``), and
averaged over both option orders when ``both_orders`` is set (as folktexts does
to cancel the models' preference for a letter). Numeric: the engine's
verbalised-probability procedure on a prompt ending in ``0.`` (a chat API
replies in free form, parsed for the number). A score the engine cannot read
is NaN and stays in the scores; the metrics count it (``n_unparsed``).

``protocol`` picks the prompts (:mod:`.prompts`): under ``paper`` instruct
models get plain text, the options come in folktexts' order, and a numeric
question about the other class (folktexts' ``ACSMobility`` asks "moved?") is
complemented, so that ``p_hat`` is always the probability of label 1.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from unsure.config import Protocol
from unsure.engine import ChoiceRequest, Engine, NumericRequest
from unsure.riskscores.dictionary import DataDictionary
from unsure.riskscores.prompts import (
    LETTERS,
    Shot,
    build_prompt,
    numeric_label,
    positive_letter,
    row_texts,
    uses_chat,
)
from unsure.riskscores.tasks import Task


def multiple_choice_scores(engine: Engine, prompts: Sequence[Sequence[str]], positive: Sequence[int]) -> pd.DataFrame:
    """Scores from prompts given per option order.

    ``prompts[o][i]`` is row ``i``'s prompt in order ``o``; ``positive[o]`` the
    index of the positive letter in that order. Returns ``p_hat`` (the mean
    over orders), ``p_order<o>`` and ``mass`` (mean raw probability on the letters).
    """
    # one call for all orders: the engine then encodes the features a row's orders share once
    answers = engine.choice_probs([ChoiceRequest(p, LETTERS) for batch in prompts for p in batch])
    columns: dict[str, np.ndarray] = {}
    masses = []
    start = 0
    for o, (batch, pos) in enumerate(zip(prompts, positive, strict=True)):
        order = answers[start : start + len(batch)]
        start += len(batch)
        columns[f"p_order{o}"] = np.clip(np.array([a.probs[pos] for a in order], dtype=np.float64), 0, 1)
        masses.append(np.array([a.mass for a in order], dtype=np.float64))
    out = pd.DataFrame(columns)
    out.insert(0, "p_hat", np.mean(list(columns.values()), axis=0))
    out["mass"] = np.mean(masses, axis=0)
    return out


def numeric_scores(engine: Engine, prompts: Sequence[str]) -> pd.DataFrame:
    """Verbalised probabilities (``p_hat``) of prompts ending in ``0.``."""
    answers = engine.numeric([NumericRequest(p) for p in prompts])
    return pd.DataFrame({"p_hat": np.clip(np.asarray(answers, dtype=np.float64), 0, 1)})


def chat_wrapper(engine: Engine, instruct: bool, *, protocol: Protocol) -> Callable[[str, str], str] | None:
    """How an instruct model's prompts are templated (``None``: plain text; always under ``paper``)."""
    if not uses_chat(instruct, protocol=protocol):
        return None
    return lambda user, prefill: engine.chat_prompt(user, prefill=prefill)


def make_scorer(
    engine: Engine,
    task: Task,
    kind: str,
    *,
    year: int,
    instruct: bool,
    both_orders: bool,
    shots: Sequence[Shot] = (),
    text_column: str = "text",
    protocol: Protocol,
) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """A ``run_shard`` scorer: rows (with ``row_id`` and the text column, written in the
    protocol's words: :func:`~unsure.riskscores.prompts.row_texts`) to ``row_id, p_hat, ...``."""
    chat = chat_wrapper(engine, instruct, protocol=protocol)

    def prompt(text: str, order: int) -> str:
        return build_prompt(task, text, kind, order, year=year, shots=shots, chat=chat, protocol=protocol)

    def score(rows: pd.DataFrame) -> pd.DataFrame:
        texts = rows[text_column].tolist()
        if kind == "multiple_choice":
            orders = (0, 1) if both_orders else (0,)
            prompts = [[prompt(t, o) for t in texts] for o in orders]
            out = multiple_choice_scores(engine, prompts, [positive_letter(o, task, protocol=protocol) for o in orders])
        else:
            out = numeric_scores(engine, [prompt(t, 0) for t in texts])
            if numeric_label(task, protocol=protocol) == 0:
                out["p_hat"] = 1.0 - out["p_hat"]
        out.insert(0, "row_id", rows["row_id"].to_numpy())
        return out

    return score


def feature_scorer(
    engine: Engine,
    task: Task,
    dictionary: DataDictionary,
    *,
    year: int,
    instruct: bool,
    both_orders: bool,
    kind: str = "multiple_choice",
    protocol: Protocol,
) -> Callable[[pd.DataFrame, Sequence[str]], np.ndarray]:
    """Scores of rows given as feature values, written out with only the given features.

    Used where the text changes: permuted columns (importance) and growing
    feature sets (increasing evidence).
    """
    score = make_scorer(engine, task, kind, year=year, instruct=instruct, both_orders=both_orders, protocol=protocol)

    def run(rows: pd.DataFrame, features: Sequence[str]) -> np.ndarray:
        texts = row_texts(rows, features, dictionary, protocol=protocol)
        out = score(pd.DataFrame({"row_id": rows["row_id"].to_numpy(), "text": texts.to_numpy()}))
        p_hat: np.ndarray = out["p_hat"].to_numpy(dtype=np.float64)
        return p_hat

    return run

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
from unsure.engine import ChoiceProbs, Engine
from unsure.riskscores.dictionary import DataDictionary
from unsure.riskscores.prompts import Shot, numeric_label, positive_letter, row_texts, uses_chat
from unsure.riskscores.requests import choice_requests, numeric_requests, option_orders
from unsure.riskscores.tasks import Task


def multiple_choice_scores(answers: Sequence[ChoiceProbs], n_rows: int, positive: Sequence[int]) -> pd.DataFrame:
    """Scores from the answers to :func:`~.requests.choice_requests` (``n_rows`` rows per order;
    ``positive[o]`` the index of the positive letter in order ``o``). Returns ``p_hat`` (the mean
    over orders), ``p_order<o>`` and ``mass`` (mean raw probability on the letters)."""
    columns: dict[str, np.ndarray] = {}
    masses = []
    for o, pos in enumerate(positive):
        order = answers[o * n_rows : (o + 1) * n_rows]
        columns[f"p_order{o}"] = np.clip(np.array([a.probs[pos] for a in order], dtype=np.float64), 0, 1)
        masses.append(np.array([a.mass for a in order], dtype=np.float64))
    out = pd.DataFrame(columns)
    out.insert(0, "p_hat", np.mean(list(columns.values()), axis=0))
    out["mass"] = np.mean(masses, axis=0)
    return out


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

    def score(rows: pd.DataFrame) -> pd.DataFrame:
        texts = rows[text_column].tolist()
        if kind == "multiple_choice":
            asked = choice_requests(
                texts, task, year=year, both_orders=both_orders, shots=shots, chat=chat, protocol=protocol
            )
            positive = [positive_letter(o, task, protocol=protocol) for o in option_orders(both_orders)]
            out = multiple_choice_scores(engine.choice_probs(asked), len(texts), positive)
        else:
            asked_n = numeric_requests(texts, task, year=year, shots=shots, chat=chat, protocol=protocol)
            answers = engine.numeric(asked_n)
            out = pd.DataFrame({"p_hat": np.clip(np.asarray(answers, dtype=np.float64), 0, 1)})
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

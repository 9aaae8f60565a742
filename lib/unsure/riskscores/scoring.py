"""Risk scores from the engine: option probabilities or a verbalised number per row.

Multiple choice: the probability the model puts on the positive option's
letter, renormalised over the two letters (the engine's ``choice_probs``), and
averaged over both option orders when ``both_orders`` is set (as folktexts does
to cancel the models' preference for a letter). Numeric: the engine's
verbalised-probability procedure on a prompt ending in ``0.`` (a chat API
replies in free form, parsed for the number). A score the engine cannot read
is NaN and stays in the scores; the metrics count it (``n_unparsed``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from unsure.engine import ChoiceRequest, Engine
from unsure.riskscores.dictionary import DataDictionary
from unsure.riskscores.prompts import LETTERS, Shot, build_prompt, positive_letter
from unsure.riskscores.tasks import Task
from unsure.riskscores.text import frame_text


def multiple_choice_scores(engine: Engine, prompts: Sequence[Sequence[str]], positive: Sequence[int]) -> pd.DataFrame:
    """Scores from prompts given per option order.

    ``prompts[o][i]`` is row ``i``'s prompt in order ``o``; ``positive[o]`` the
    index of the positive letter in that order. Returns ``p_hat`` (the mean
    over orders), ``p_order<o>`` and ``mass`` (mean raw probability on the letters).
    """
    columns: dict[str, np.ndarray] = {}
    masses = []
    for o, (batch, pos) in enumerate(zip(prompts, positive, strict=True)):
        answers = engine.choice_probs([ChoiceRequest(p, LETTERS) for p in batch])
        columns[f"p_order{o}"] = np.clip(np.array([a.probs[pos] for a in answers], dtype=np.float64), 0, 1)
        masses.append(np.array([a.mass for a in answers], dtype=np.float64))
    out = pd.DataFrame(columns)
    out.insert(0, "p_hat", np.mean(list(columns.values()), axis=0))
    out["mass"] = np.mean(masses, axis=0)
    return out


def numeric_scores(engine: Engine, prompts: Sequence[str]) -> pd.DataFrame:
    """Verbalised probabilities (``p_hat``) of prompts ending in ``0.``."""
    return pd.DataFrame({"p_hat": np.clip(np.asarray(engine.numeric(list(prompts)), dtype=np.float64), 0, 1)})


def chat_wrapper(engine: Engine, instruct: bool) -> Callable[[str, str], str] | None:
    """How an instruct model's prompts are templated (``None``: plain text)."""
    if not instruct:
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
) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """A ``run_shard`` scorer: rows (with ``row_id`` and the text column) to ``row_id, p_hat, ...``."""
    chat = chat_wrapper(engine, instruct)

    def score(rows: pd.DataFrame) -> pd.DataFrame:
        texts = rows[text_column].tolist()
        if kind == "multiple_choice":
            orders = (0, 1) if both_orders else (0,)
            prompts = [
                [build_prompt(task, t, kind, o, year=year, shots=shots, chat=chat) for t in texts] for o in orders
            ]
            out = multiple_choice_scores(engine, prompts, [positive_letter(o) for o in orders])
        else:
            out = numeric_scores(
                engine, [build_prompt(task, t, kind, 0, year=year, shots=shots, chat=chat) for t in texts]
            )
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
) -> Callable[[pd.DataFrame, Sequence[str]], np.ndarray]:
    """Scores of rows given as feature values, written out with only the given features.

    Used where the text changes: permuted columns (importance) and growing
    feature sets (increasing evidence).
    """
    score = make_scorer(engine, task, kind, year=year, instruct=instruct, both_orders=both_orders)

    def run(rows: pd.DataFrame, features: Sequence[str]) -> np.ndarray:
        texts = frame_text(rows, features, dictionary)
        out = score(pd.DataFrame({"row_id": rows["row_id"].to_numpy(), "text": texts.to_numpy()}))
        p_hat: np.ndarray = out["p_hat"].to_numpy(dtype=np.float64)
        return p_hat

    return run

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
from dataclasses import dataclass

import numpy as np
import pandas as pd

from unsure.config import Protocol
from unsure.engine import ChoiceProbs, ChoiceRequest, Engine, NumericRequest
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


@dataclass(frozen=True)
class RiskScorer:
    """A ``run_shard`` scorer: rows (with ``row_id`` and the text column, written in the
    protocol's words: :func:`~unsure.riskscores.prompts.row_texts`) to ``row_id, p_hat, ...``;
    :meth:`requests` says what each row sends the engine (the request cache's key)."""

    engine: Engine
    task: Task
    kind: str
    year: int
    both_orders: bool
    shots: tuple[Shot, ...]
    text_column: str
    protocol: Protocol
    chat: Callable[[str, str], str] | None

    def _choice(self, texts: list[str]) -> list[ChoiceRequest]:
        return choice_requests(
            texts, self.task, year=self.year, both_orders=self.both_orders, shots=self.shots, chat=self.chat,
            protocol=self.protocol,
        )  # fmt: skip

    def _numeric(self, texts: list[str]) -> list[NumericRequest]:
        return numeric_requests(
            texts, self.task, year=self.year, shots=self.shots, chat=self.chat, protocol=self.protocol
        )

    def requests(self, rows: pd.DataFrame) -> list[tuple[ChoiceRequest | NumericRequest, ...]]:
        """Per row, the requests it sends: one per option order, or its numeric question."""
        texts = rows[self.text_column].tolist()
        asked: list[ChoiceRequest] | list[NumericRequest]
        asked = self._choice(texts) if self.kind == "multiple_choice" else self._numeric(texts)
        return [tuple(asked[i :: len(texts)]) for i in range(len(texts))]  # order o of row i: asked[o * n + i]

    def __call__(self, rows: pd.DataFrame) -> pd.DataFrame:
        texts = rows[self.text_column].tolist()
        if self.kind == "multiple_choice":
            positive = [positive_letter(o, self.task, protocol=self.protocol) for o in option_orders(self.both_orders)]
            out = multiple_choice_scores(self.engine.choice_probs(self._choice(texts)), len(texts), positive)
        else:
            answers = self.engine.numeric(self._numeric(texts))
            out = pd.DataFrame({"p_hat": np.clip(np.asarray(answers, dtype=np.float64), 0, 1)})
            if numeric_label(self.task, protocol=self.protocol) == 0:
                out["p_hat"] = 1.0 - out["p_hat"]
        out.insert(0, "row_id", rows["row_id"].to_numpy())
        return out


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
) -> RiskScorer:
    """The scorer of one task and prompting (see :class:`RiskScorer`); an instruct model's prompts
    through its chat template where the protocol says (:func:`chat_wrapper`)."""
    chat = chat_wrapper(engine, instruct, protocol=protocol)
    return RiskScorer(engine, task, kind, year, both_orders, tuple(shots), text_column, protocol, chat)


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

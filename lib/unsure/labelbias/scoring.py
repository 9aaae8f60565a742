"""Label probabilities of items under their contexts, through the engine's log-likelihood requests.

Each (item, context) is one :class:`ContinuationRequest` whose continuations
are the task's labels (`` <label>``), so the context is encoded once and every
label is scored against it in a fresh pass; no cache is carried from one item
to the next. Scores are length-normalised when the labels' token lengths
differ, and the prediction's distribution is the softmax over the label set.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from unsure.engine import ContinuationRequest, ContinuationScores, Engine
from unsure.labelbias.prompts import Demo, item_context, variants

Floats = npt.NDArray[np.float64]


def label_distribution(scores: ContinuationScores) -> Floats:
    """Softmax over the labels, of mean token log-probabilities when their token counts differ."""
    return scores.softmax(normalize=bool(len(set(scores.n_tokens.tolist())) > 1))


def continuation(label: str) -> str:
    """How a label follows ``Output:``."""
    return " " + label.strip()


def score_contexts(engine: Engine, contexts: Sequence[str], labels: Sequence[Sequence[str]]) -> list[Floats]:
    """The label distribution after each context (one request per context, all in one engine call)."""
    requests = [
        ContinuationRequest(ctx, tuple(continuation(lab) for lab in labs))
        for ctx, labs in zip(contexts, labels, strict=True)
    ]
    return [label_distribution(s) for s in engine.continuation_scores(requests)]


@dataclass(frozen=True)
class TaskPrompting:
    """What building a task's prompts needs: definition, label set and demonstration pool."""

    definition: str
    labels: tuple[str, ...]
    pool: tuple[Demo, ...]


Wrap = Callable[[str], str]
"""Turns an SNI prompt into the model's context (identity, or the chat template)."""


def plain(prompt: str) -> str:
    return prompt


def chat_wrapper(engine: Engine) -> Wrap:
    """The SNI prompt as the user turn; the reply is prefilled with ``Output:`` so labels follow it as usual."""
    suffix = "Output:"

    def wrap(prompt: str) -> str:
        return engine.chat_prompt(prompt.removesuffix(suffix).rstrip(), prefill=suffix)

    return wrap


class ItemScorer:
    """Scores a chunk of items (a frame of :func:`unsure.labelbias.prompts.build_items` rows).

    Instances and calibration inputs get one distribution per (k, set) of the
    study; a LOOC item gets one, under its own context. The result has one row
    per item: ``row_id`` and the lists ``k``, ``set`` and ``probs``.
    """

    def __init__(
        self,
        engine: Engine,
        tasks: dict[str, TaskPrompting],
        *,
        shots: Sequence[int],
        sets: int,
        wrap: Wrap = plain,
    ) -> None:
        self.engine = engine
        self.tasks = tasks
        self.variants = variants(shots, sets)
        self.wrap = wrap

    def contexts(self, item: pd.Series) -> list[tuple[int, int, str]]:
        """(k, set, context) of every context the item is scored under."""
        task = self.tasks[str(item["task"])]
        if item["kind"] == "looc":
            pairs = [(int(item["k"]), int(item["set"]))]
            left_out = int(item["left_out"])
        else:
            pairs, left_out = self.variants, -1
        return [
            (k, s, self.wrap(item_context(task.definition, task.pool, str(item["input"]), k, s, left_out)))
            for k, s in pairs
        ]

    def __call__(self, chunk: pd.DataFrame) -> pd.DataFrame:
        owners, ks, sets, contexts, labels = [], [], [], [], []
        for i, (_, item) in enumerate(chunk.iterrows()):
            for k, s, ctx in self.contexts(item):
                owners.append(i)
                ks.append(k)
                sets.append(s)
                contexts.append(ctx)
                labels.append(self.tasks[str(item["task"])].labels)
        probs = score_contexts(self.engine, contexts, labels)
        k_of: list[list[int]] = [[] for _ in range(len(chunk))]
        set_of: list[list[int]] = [[] for _ in range(len(chunk))]
        probs_of: list[list[list[float]]] = [[] for _ in range(len(chunk))]
        for i, k, s, p in zip(owners, ks, sets, probs, strict=True):
            k_of[i].append(k)
            set_of[i].append(s)
            probs_of[i].append(p.tolist())
        return pd.DataFrame({"row_id": chunk["row_id"].to_numpy(), "k": k_of, "set": set_of, "probs": probs_of})


def task_prompting(tasks: pd.DataFrame, pools: dict[str, list[Demo]]) -> dict[str, TaskPrompting]:
    """Per selected task: definition, labels and pool, from the prepared tables."""
    chosen = tasks[tasks["selected"]]
    return {
        str(r.task): TaskPrompting(str(r.definition), tuple(r.labels), tuple(pools[str(r.task)]))
        for r in chosen.itertuples(index=False)
    }

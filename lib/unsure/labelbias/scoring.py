"""Label probabilities of items under their contexts, through the engine's log-likelihood requests.

Each (item, context) is one :class:`ContinuationRequest` whose continuations
are the task's labels (`` <label>``), so the context is encoded once and every
label is scored against it in a fresh pass; no cache is carried from one item
to the next. Two label scorings come from that one pass (the request scores
the EOS token after each label too):

* ``corrected`` (ours): the summed log-probability of `` <label>``,
  length-normalised (mean per token) only when the labels' token counts differ;
* ``paper`` (the authors' code): the mean log-probability over the label's
  tokens and the EOS token after it, always (for one-token labels,
  p(y) ∝ sqrt(p(y)·p(EOS | y))).

Each distribution is the softmax of its scores over the label set.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from unsure.engine import ContinuationRequest, ContinuationScores, Engine
from unsure.labelbias.prompts import Demo, PromptFit, item_context, variants
from unsure.labelbias.requests import label_requests

Floats = npt.NDArray[np.float64]


SCORINGS = ("corrected", "paper")
"""The label scorings every item gets (see the module docstring)."""


def label_distribution(scores: ContinuationScores) -> Floats:
    """Softmax over the labels, of mean token log-probabilities when their token counts differ."""
    return scores.softmax(normalize=bool(len(set(scores.n_tokens.tolist())) > 1))


def paper_distribution(scores: ContinuationScores) -> Floats:
    """The authors' scoring: softmax of the mean log-probability over each label's tokens and EOS."""
    if scores.eos_logprob is None:
        raise ValueError("the paper's label scoring needs the EOS token scored after each label (eos=True)")
    mean = (scores.logprob + scores.eos_logprob) / (scores.n_tokens + 1)
    z: Floats = np.exp(mean - mean.max())
    out: Floats = z / z.sum()
    return out


def score_contexts(engine: Engine, contexts: Sequence[str], labels: Sequence[Sequence[str]]) -> list[Floats]:
    """The label distribution after each context (one request per context, all in one engine call)."""
    return [label_distribution(s) for s in engine.continuation_scores(label_requests(contexts, labels, eos=False))]


def score_contexts_both(
    engine: Engine, contexts: Sequence[str], labels: Sequence[Sequence[str]]
) -> tuple[list[Floats], list[Floats]]:
    """The ``corrected`` and ``paper`` label distributions after each context, from one engine call
    (the EOS token is scored after each label in the same packed sequence)."""
    scores = engine.continuation_scores(label_requests(contexts, labels, eos=True))
    return [label_distribution(s) for s in scores], [paper_distribution(s) for s in scores]


class HFTokenCounter:
    """Counts and cuts prompts with a Hugging Face tokenizer as the authors' collator calls it
    (``tokenizer(text)``, special tokens added; the cut decoded without them)."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def counts(self, texts: Sequence[str]) -> list[int]:
        return [len(ids) for ids in self.tokenizer(list(texts))["input_ids"]]

    def head(self, text: str, n: int) -> str:
        return str(self.tokenizer.decode(self.tokenizer(text)["input_ids"][:n], skip_special_tokens=True))


def prompt_fit(engine: Engine, max_tokens: int) -> PromptFit:
    """The authors' prompt limit counted in the model's own tokens (their collator gets the model's tokenizer)."""
    tokenizer = getattr(engine, "tokenizer", None)
    if tokenizer is None:
        raise ValueError(
            f"{type(engine).__name__}: protocol paper fits prompts to studies.labelbias.max_prompt_tokens "
            "tokens of the model's tokenizer, and this engine has none (use a local model, backend: hf)"
        )
    return PromptFit(HFTokenCounter(tokenizer), max_tokens)


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
    per item: ``row_id`` and the lists ``k``, ``set``, ``probs`` (``corrected``
    scoring) and ``probs_paper`` (``paper`` scoring, same forward pass).
    ``paper_prompt`` renders an empty input as the authors do (``Input: .``);
    ``fit`` fits every prompt to the authors' token limit (:func:`unsure.labelbias.prompts.fit_prompt`).
    """

    def __init__(
        self,
        engine: Engine,
        tasks: dict[str, TaskPrompting],
        *,
        shots: Sequence[int],
        sets: int,
        wrap: Wrap = plain,
        paper_prompt: bool = False,
        fit: PromptFit | None = None,
    ) -> None:
        self.engine = engine
        self.fit = fit
        self.tasks = tasks
        self.variants = variants(shots, sets)
        self.wrap = wrap
        self.paper_prompt = paper_prompt

    def contexts(self, item: pd.Series) -> list[tuple[int, int, str]]:
        """(k, set, context) of every context the item is scored under."""
        task = self.tasks[str(item["task"])]
        if item["kind"] == "looc":
            pairs = [(int(item["k"]), int(item["set"]))]
            left_out = int(item["left_out"])
        else:
            pairs, left_out = self.variants, -1
        return [
            (
                k,
                s,
                self.wrap(
                    item_context(
                        task.definition,
                        task.pool,
                        str(item["input"]),
                        k,
                        s,
                        left_out,
                        paper=self.paper_prompt,
                        fit=self.fit,
                    )
                ),
            )
            for k, s in pairs
        ]

    def requests(self, chunk: pd.DataFrame) -> list[tuple[ContinuationRequest, ...]]:
        """Per item, what it sends the engine: a request per context (the request cache's key)."""
        out = []
        for _, item in chunk.iterrows():
            contexts = [ctx for _, _, ctx in self.contexts(item)]
            labels = [self.tasks[str(item["task"])].labels] * len(contexts)
            out.append(tuple(label_requests(contexts, labels, eos=True)))
        return out

    def __call__(self, chunk: pd.DataFrame) -> pd.DataFrame:
        owners, ks, sets, contexts, labels = [], [], [], [], []
        for i, (_, item) in enumerate(chunk.iterrows()):
            for k, s, ctx in self.contexts(item):
                owners.append(i)
                ks.append(k)
                sets.append(s)
                contexts.append(ctx)
                labels.append(self.tasks[str(item["task"])].labels)
        probs, probs_paper = score_contexts_both(self.engine, contexts, labels)
        k_of: list[list[int]] = [[] for _ in range(len(chunk))]
        set_of: list[list[int]] = [[] for _ in range(len(chunk))]
        probs_of: list[list[list[float]]] = [[] for _ in range(len(chunk))]
        paper_of: list[list[list[float]]] = [[] for _ in range(len(chunk))]
        for i, k, s, p, q in zip(owners, ks, sets, probs, probs_paper, strict=True):
            k_of[i].append(k)
            set_of[i].append(s)
            probs_of[i].append(p.tolist())
            paper_of[i].append(q.tolist())
        return pd.DataFrame(
            {"row_id": chunk["row_id"].to_numpy(), "k": k_of, "set": set_of, "probs": probs_of, "probs_paper": paper_of}
        )


def task_prompting(tasks: pd.DataFrame, pools: dict[str, list[Demo]]) -> dict[str, TaskPrompting]:
    """Per selected task: definition, labels and pool, from the prepared tables."""
    chosen = tasks[tasks["selected"]]
    return {
        str(r.task): TaskPrompting(str(r.definition), tuple(r.labels), tuple(pools[str(r.task)]))
        for r in chosen.itertuples(index=False)
    }

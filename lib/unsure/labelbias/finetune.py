"""Few-shot LoRA fine-tuning per task under one (k, set) context, and scoring with the tuned model."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pandas as pd

from unsure.config import Model
from unsure.engine import load_engine
from unsure.engine.hf import HFEngine
from unsure.engine.lora import LoraSettings, train_adapter
from unsure.labelbias.prompts import (
    PromptFit,
    demonstrations,
    item_context,
    sni_prompt,
    training_examples,
    training_examples_paper,
)
from unsure.labelbias.scoring import (
    TaskPrompting,
    Wrap,
    chat_wrapper,
    continuation,
    plain,
    prompt_fit,
    score_contexts_both,
)

log = logging.getLogger(__name__)


def lora_examples(
    task: TaskPrompting,
    *,
    k: int,
    s: int,
    n_train: int,
    wrap: Wrap = plain,
    paper: bool = False,
    fit: PromptFit | None = None,
    eos: str | None = None,
) -> list[tuple[str, str]]:
    """(context, target) pairs to fine-tune on: pool examples outside set ``s`` of ``k`` (under
    ``paper`` the ones the authors' code picks), each under that set's context. The target is
    `` label``, followed by ``eos`` (the tokenizer's EOS text) under the authors' protocol, whose
    training text is ``prompt + ' ' + label + EOS``."""
    demos = demonstrations(task.pool, k, s)
    pick = training_examples_paper if paper else training_examples
    return [
        (wrap(sni_prompt(task.definition, demos, x, paper=paper, fit=fit)), continuation(y) + (eos or ""))
        for x, y in pick(task.pool, k, s, n_train)
    ]


def finetune_and_score(
    entry: Model,
    tasks: dict[str, TaskPrompting],
    items: pd.DataFrame,
    *,
    k: int,
    s: int,
    n_train: int,
    settings: LoraSettings,
    adapters: str | os.PathLike[str],
    chat: bool = False,
    paper: bool = False,
    max_prompt_tokens: int | None = None,
) -> pd.DataFrame:
    """Fine-tune one adapter per task on pool examples under the (k, s) context, then score the task's
    evaluation and held-out items under that same context with the adapter merged in.

    Returns ``task, row_id, k, set, probs, probs_paper`` (the two label scorings of
    :mod:`unsure.labelbias.scoring`, one forward pass); adapters are saved under ``adapters/<task>``.
    ``paper`` trains and scores as the authors' code does: ``Input: .`` for an empty input, prompts
    fitted to ``max_prompt_tokens`` of the model's tokens, targets ending in EOS.
    """
    base = load_engine(entry)
    if not isinstance(base, HFEngine):
        raise ValueError(f"LoRA fine-tuning needs a local model (backend: hf), not {entry.backend!r} ({entry.id})")
    wrap: Wrap = chat_wrapper(base) if chat else plain
    fit = prompt_fit(base, max_prompt_tokens) if paper and max_prompt_tokens else None
    eos = str(base.tokenizer.eos_token) if paper else None
    parts = []
    for name, task in tasks.items():
        examples = lora_examples(task, k=k, s=s, n_train=n_train, wrap=wrap, paper=paper, fit=fit, eos=eos)
        out = Path(adapters, name)
        losses = train_adapter(base, examples, out, settings)
        log.info(
            "%s: LoRA k=%d set=%d, %d examples, loss %.4f -> %.4f", name, k, s, len(examples), losses[0], losses[-1]
        )
        tuned = load_engine(entry, adapter=str(out))
        rows = items[(items["task"] == name) & items["kind"].isin(["eval", "heldout"])]
        contexts = [
            wrap(item_context(task.definition, task.pool, x, k, s, paper=paper, fit=fit)) for x in rows["input"]
        ]
        probs, probs_paper = score_contexts_both(tuned, contexts, [task.labels] * len(contexts))
        parts.append(
            pd.DataFrame(
                {
                    "task": name,
                    "row_id": rows["row_id"].to_numpy(),
                    "k": k,
                    "set": s,
                    "probs": [p.tolist() for p in probs],
                    "probs_paper": [p.tolist() for p in probs_paper],
                }
            )
        )
    if not parts:
        return pd.DataFrame({"task": [], "row_id": [], "k": [], "set": [], "probs": [], "probs_paper": []})
    return pd.concat(parts, ignore_index=True)

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
from unsure.labelbias.prompts import demonstrations, item_context, sni_prompt, training_examples
from unsure.labelbias.scoring import TaskPrompting, Wrap, chat_wrapper, continuation, plain, score_contexts_both

log = logging.getLogger(__name__)


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
) -> pd.DataFrame:
    """Fine-tune one adapter per task on pool examples under the (k, s) context, then score the task's
    evaluation and held-out items under that same context with the adapter merged in.

    Returns ``task, row_id, k, set, probs, probs_paper`` (the two label scorings of
    :mod:`unsure.labelbias.scoring`, one forward pass); adapters are saved under ``adapters/<task>``.
    """
    base = load_engine(entry)
    if not isinstance(base, HFEngine):
        raise ValueError(f"LoRA fine-tuning needs a local model (backend: hf), not {entry.backend!r} ({entry.id})")
    wrap: Wrap = chat_wrapper(base) if chat else plain
    parts = []
    for name, task in tasks.items():
        demos = demonstrations(task.pool, k, s)
        examples = [
            (wrap(sni_prompt(task.definition, demos, x)), continuation(y))
            for x, y in training_examples(task.pool, k, s, n_train)
        ]
        out = Path(adapters, name)
        losses = train_adapter(base, examples, out, settings)
        log.info(
            "%s: LoRA k=%d set=%d, %d examples, loss %.4f -> %.4f", name, k, s, len(examples), losses[0], losses[-1]
        )
        tuned = load_engine(entry, adapter=str(out))
        rows = items[(items["task"] == name) & items["kind"].isin(["eval", "heldout"])]
        contexts = [wrap(item_context(task.definition, task.pool, x, k, s)) for x in rows["input"]]
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

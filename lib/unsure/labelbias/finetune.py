"""Few-shot LoRA fine-tuning per task under one (k, set) context, and scoring with the tuned model."""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

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
from unsure.labelbias.reproduction import LORA_DIFFERENCES, LoraFlip
from unsure.labelbias.requests import continuation
from unsure.labelbias.scoring import (
    TaskPrompting,
    Wrap,
    chat_wrapper,
    plain,
    prompt_fit,
    score_contexts_both,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoraProtocol:
    """Which side of each ledger difference that shapes a LoRA run it takes (True: the authors' code).

    One flag per difference (named as in :data:`unsure.labelbias.reproduction.DIFFERENCES`), so that
    the ledger can fine-tune with one of them flipped and the rest as the run has them.
    """

    empty_input: bool = False
    """``Input: .`` for an empty input in the prompts trained and scored on."""
    prompt_limit: bool = False
    """Prompts fitted to ``max_prompt_tokens`` of the model's tokens."""
    lora_targets: bool = False
    """Targets `` label`` + EOS (the loss on both); else `` label`` alone."""
    lora_examples: bool = False
    """The pool items the authors' code picks (:func:`training_examples_paper`); else :func:`training_examples`."""

    @classmethod
    def of(cls, protocol: str) -> LoraProtocol:
        """Every choice of ``protocol`` (``paper``: the authors' code; ``corrected``: ours)."""
        if protocol not in ("paper", "corrected"):
            raise ValueError(f"unknown protocol {protocol!r} (paper or corrected)")
        return cls(**dict.fromkeys(cls.differences(), protocol == "paper"))

    @classmethod
    def differences(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    def flipped(self, difference: str) -> LoraProtocol:
        """The same choices with ``difference`` taken the other way."""
        if difference not in self.differences():
            raise ValueError(f"{difference!r} is not a LoRA difference ({', '.join(self.differences())})")
        return replace(self, **{difference: not getattr(self, difference)})


def lora_examples(
    task: TaskPrompting,
    *,
    k: int,
    s: int,
    n_train: int,
    wrap: Wrap = plain,
    choices: LoraProtocol = LoraProtocol(),
    fit: PromptFit | None = None,
    eos: str | None = None,
) -> list[tuple[str, str]]:
    """(context, target) pairs to fine-tune on: pool examples outside set ``s`` of ``k`` (those
    ``choices.lora_examples`` names), each under that set's context (``Input: .`` for an empty input
    with ``choices.empty_input``, fitted by ``fit`` with ``choices.prompt_limit``). The target is
    `` label``, followed by ``eos`` (the tokenizer's EOS text) with ``choices.lora_targets``, as the
    authors' training text ``prompt + ' ' + label + EOS`` has it."""
    if choices.lora_targets and not eos:
        raise ValueError("LoRA targets ending in EOS (lora_targets) need the tokenizer's EOS text")
    demos = demonstrations(task.pool, k, s)
    pick = training_examples_paper if choices.lora_examples else training_examples
    limit = fit if choices.prompt_limit else None
    end = eos if choices.lora_targets and eos else ""
    return [
        (wrap(sni_prompt(task.definition, demos, x, paper=choices.empty_input, fit=limit)), continuation(y) + end)
        for x, y in pick(task.pool, k, s, n_train)
    ]


def finetune_and_score(
    entry: Model,
    tasks: dict[str, TaskPrompting],
    items: pd.DataFrame,
    *,
    runs: Sequence[tuple[int, int]],
    n_train: int,
    settings: LoraSettings,
    adapters: str | os.PathLike[str],
    chat: bool = False,
    choices: LoraProtocol = LoraProtocol(),
    max_prompt_tokens: int | None = None,
) -> pd.DataFrame:
    """For every (k, set) of ``runs``: fine-tune one adapter per task on pool examples under that
    context, then score the task's evaluation and held-out items under the same context with the
    adapter merged in. The base model is loaded once for all of them.

    Returns ``task, row_id, k, set, probs, probs_paper`` (the two label scorings of
    :mod:`unsure.labelbias.scoring`, one forward pass); adapters are saved under
    ``adapters/k<k>-s<set>/<task>``. ``choices`` says which side of each LoRA-shaping difference to
    take (``LoraProtocol.of(protocol)`` for a protocol's run; :func:`lora_examples`); with
    ``prompt_limit`` the prompts trained and scored on are fitted to ``max_prompt_tokens`` of the
    model's tokens.
    """
    base = load_engine(entry)
    if not isinstance(base, HFEngine):
        raise ValueError(f"LoRA fine-tuning needs a local model (backend: hf), not {entry.backend!r} ({entry.id})")
    wrap: Wrap = chat_wrapper(base) if chat else plain
    fit = prompt_fit(base, max_prompt_tokens) if choices.prompt_limit and max_prompt_tokens else None
    eos = str(base.tokenizer.eos_token) if choices.lora_targets else None
    parts = []
    for k, s in runs:
        for name, task in tasks.items():
            examples = lora_examples(task, k=k, s=s, n_train=n_train, wrap=wrap, choices=choices, fit=fit, eos=eos)
            out = Path(adapters, f"k{k}-s{s}", name)
            losses = train_adapter(base, examples, out, settings)
            log.info(
                "%s: LoRA k=%d set=%d, %d examples, loss %.4f -> %.4f",
                name,
                k,
                s,
                len(examples),
                losses[0],
                losses[-1],
            )
            tuned = load_engine(entry, adapter=str(out))
            rows = items[(items["task"] == name) & items["kind"].isin(["eval", "heldout"])]
            contexts = [
                wrap(item_context(task.definition, task.pool, x, k, s, paper=choices.empty_input, fit=fit))
                for x in rows["input"]
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


def lora_settings(lora: Mapping[str, Any], seed: int) -> LoraSettings:
    """The optimiser settings of ``studies.labelbias.lora`` (a dump of the config), with the study's seed."""
    return LoraSettings(**{key: lora[key] for key in LoraSettings.__dataclass_fields__ if key in lora}, seed=seed)


EOS_STAND_IN = "</s>"
"""Stands for the tokenizer's EOS text where training examples are only compared, never trained on."""


def lora_flip_plan(
    tasks: Mapping[str, TaskPrompting],
    runs: Sequence[tuple[int, int]],
    *,
    n_train: int,
    choices: LoraProtocol,
) -> list[LoraFlip]:
    """Where to fine-tune again with each LoRA difference flipped alone, and what it changes.

    Each difference of :data:`unsure.labelbias.reproduction.LORA_DIFFERENCES` is flipped at the
    first (k, set) of ``runs`` (those the run fine-tunes, in config order) whose training examples
    it changes: the targets change every example; the two example selections coincide for set 0 of
    every k, so that difference needs a set >= 1. ``changed`` counts, over every task, the flipped
    run's (context, target) pairs that the run's own pairs lack (prompts compared before any token
    limit). A difference that changes no example at any (k, set) is not fine-tuned again
    (``unmeasured`` says why); nor is any without ``runs``.
    """
    out = []
    for difference in LORA_DIFFERENCES:
        other = choices.flipped(difference)
        counted = []
        for k, s in runs:
            compared = changed = 0
            for task in tasks.values():
                mine = lora_examples(task, k=k, s=s, n_train=n_train, choices=choices, eos=EOS_STAND_IN)
                theirs = lora_examples(task, k=k, s=s, n_train=n_train, choices=other, eos=EOS_STAND_IN)
                compared += len(theirs)
                changed += sum((Counter(theirs) - Counter(mine)).values())
            counted.append((k, s, compared, changed))
        hit = next((c for c in counted if c[3] > 0), None)
        if hit is not None:
            out.append(LoraFlip(difference, *hit))
        elif counted:
            k, s, compared, _ = counted[0]
            where = ", ".join(f"k = {k} set {s}" for k, s, _, _ in counted)
            why = f"both variants fine-tune on the same {compared} examples at every (k, set) this run fine-tunes"
            why += f" ({where})"
            out.append(LoraFlip(difference, k, s, compared, 0, unmeasured=why))
    return out

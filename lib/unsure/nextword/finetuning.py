"""Appendix F: passage folds, the weighted (context, response) pairs, and language-model fine-tuning on passages."""

from __future__ import annotations

import os
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from unsure.config import Protocol
from unsure.engine.finetune import Example
from unsure.engine.identity import local_device
from unsure.nextword.frames import KEY, require


def passage_folds(first: int, last: int, folds: int) -> list[list[int]]:
    """Passages ``first..last`` in ``folds`` contiguous, near-equal folds (1-10, 11-20, ... for 1-40 and 4)."""
    if folds < 2 or last - first + 1 < folds:
        raise ValueError(f"cannot make {folds} folds of passages {first}..{last}")
    return [[int(p) for p in part] for part in np.array_split(np.arange(first, last + 1), folds)]


def response_examples(positions: pd.DataFrame, human: pd.DataFrame, passages: list[int]) -> list[Example]:
    """One example per (position, distinct human word) of ``passages``, weighted by the word's share of responses.

    The weighted loss is then the cross-entropy between the human next-word
    distribution and the model's, position by position.
    """
    require(positions, [*KEY, "context"], "positions table")
    require(human, [*KEY, "word", "count"], "human counts")
    here = human[human["text_id"].isin(passages)]
    totals = here.groupby(KEY)["count"].transform("sum")
    contexts = {
        (int(t), int(n)): str(c)
        for t, n, c in zip(positions["text_id"], positions["word_num"], positions["context"], strict=True)
    }
    return [
        Example(contexts[(int(t), int(n))], " " + str(w), float(c / s))
        for t, n, w, c, s in zip(here["text_id"], here["word_num"], here["word"], here["count"], totals, strict=True)
    ]


# ----------------------------------------------------------------------------- language modelling (appendix F)

FINETUNE_SPLITS = ("train", "validation", "train (dropout)")
"""Loss curves of :func:`finetune_lm`: eval-mode losses on the training and validation passages at every
epoch (0: before training), and the epoch's mean of the dropout-mode batch losses (what the authors plot)."""


def passage_texts(positions: pd.DataFrame) -> dict[int, str]:
    """Each passage's text, from the positions table: the last position's context and its corpus word.

    The norms have a position at every word but the first, so this is the whole passage as displayed.
    """
    require(positions, [*KEY, "context", "corpus_word"], "positions table")
    last = positions.sort_values(KEY).groupby("text_id", sort=True).tail(1)
    return {
        int(t): f"{c} {w}".strip()
        for t, c, w in zip(last["text_id"], last["context"], last["corpus_word"], strict=True)
    }


def _final_norm(model: nn.Module) -> nn.Module:
    """The norm after the last block (GPT-2's ``ln_f``, Llama's ``norm``)."""
    base = getattr(model, "base_model", model)
    for name in ("ln_f", "norm", "final_layer_norm"):
        module = getattr(base, name, None)
        if isinstance(module, nn.Module):
            return module
    raise ValueError(f"{type(model).__name__}: no final norm (ln_f / norm) found")


def unfreeze(model: nn.Module, protocol: Protocol, blocks: int = 2) -> int:
    """Freeze everything, then unfreeze what appendix F trains; return the number of trainable parameters.

    ``paper``: what the authors' ``fine_tuning.py`` unfreezes, the LayerNorms
    of the last ``blocks`` blocks (GPT-2's ``ln_1``, ``ln_2``) and the final
    LayerNorm (``ln_f``): a few thousand parameters, not the blocks the text
    describes. ``corrected``: the last ``blocks`` blocks whole, as the text says.
    """
    from unsure.engine.finetune import transformer_blocks

    for p in model.parameters():
        p.requires_grad_(False)
    last = list(transformer_blocks(model))[-blocks:]
    if protocol == "paper":
        modules: list[nn.Module] = [
            m for b in last for m in b.modules() if isinstance(m, nn.LayerNorm) or type(m).__name__.endswith("RMSNorm")
        ]
        modules.append(_final_norm(model))
    elif protocol == "corrected":
        modules = last
    else:
        raise ValueError(f"studies.nextword.protocol: unknown protocol {protocol!r}")
    for m in modules:
        for p in m.parameters():
            p.requires_grad_(True)
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def lm_batch(tok: Any, texts: list[str], *, max_length: int, protocol: Protocol) -> dict[str, torch.Tensor]:
    """Inputs of a language-modelling batch: ``BOS + " " + text``, right-padded with EOS to ``max_length``.

    ``paper``: the labels are the input ids, padding included (the authors'
    ``model(ids, labels=ids)``: the model is also trained to predict the
    padding). ``corrected``: padding is masked out of the loss (label -100).
    A text longer than ``max_length`` is kept whole (the batch is padded to it).
    """
    bos = tok.bos_token if tok.bos_token is not None else ""
    encoded = [tok(f"{bos} {t}" if bos else t)["input_ids"] for t in texts]
    width = max(max_length, *(len(e) for e in encoded))
    pad = tok.eos_token_id if tok.eos_token_id is not None else (tok.pad_token_id or 0)
    ids = torch.full((len(texts), width), pad, dtype=torch.long)
    mask = torch.zeros((len(texts), width), dtype=torch.long)
    for i, e in enumerate(encoded):
        ids[i, : len(e)] = torch.tensor(e)
        mask[i, : len(e)] = 1
    labels = ids.clone() if protocol == "paper" else ids.masked_fill(mask == 0, -100)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def _eval_loss(model: Any, batches: list[dict[str, torch.Tensor]], device: torch.device) -> float:
    """Mean over batches of the model's loss in eval mode (no dropout, no gradient)."""
    if not batches:
        return float("nan")
    model.eval()
    with torch.inference_mode():
        return float(np.mean([float(model(**{k: v.to(device) for k, v in b.items()}).loss) for b in batches]))


def finetune_lm(
    model_id: str | os.PathLike[str],
    train_texts: list[str],
    validation_texts: list[str],
    out_dir: str | os.PathLike[str],
    *,
    protocol: Protocol,
    settings: Mapping[str, Any],
    revision: str | None = None,
) -> pd.DataFrame:
    """Appendix F: fine-tune ``model_id`` as a language model on passage texts; save it; return the loss curves.

    As the authors' ``fine_tuning.py``: AdamW (``learning_rate``,
    ``adam_eps``, no weight decay), a linear schedule with ``warmup_steps``,
    shuffled batches of ``batch_size`` passages padded to ``max_length``,
    ``epochs`` epochs, ``seed``; what is trained and whether padding is in the
    loss follow ``protocol`` (:func:`unfreeze`, :func:`lm_batch`). The curves
    (``epoch, split, loss``, splits :data:`FINETUNE_SPLITS`) never mix modes:
    ``train`` and ``validation`` are eval-mode losses after each epoch (epoch 0
    before training), ``train (dropout)`` the epoch's mean training-mode batch loss.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer, get_linear_schedule_with_warmup

    from unsure.io import atomic_dir

    if not train_texts:
        raise ValueError("finetune: no training passages")
    seed = int(settings["seed"])
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    tok = AutoTokenizer.from_pretrained(model_id, revision=revision)
    model = AutoModelForCausalLM.from_pretrained(model_id, revision=revision, dtype=torch.float32)
    device = torch.device(local_device())
    model.to(device)
    n_trainable = unfreeze(model, protocol, int(settings["trainable_blocks"]))
    size, max_length = int(settings["batch_size"]), int(settings["max_length"])

    def batches(texts: list[str]) -> list[dict[str, torch.Tensor]]:
        return [
            lm_batch(tok, texts[i : i + size], max_length=max_length, protocol=protocol)
            for i in range(0, len(texts), size)
        ]

    train_eval, validation = batches(train_texts), batches(validation_texts)
    steps = -(-len(train_texts) // size) * int(settings["epochs"])
    optimizer = torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad],
        lr=float(settings["learning_rate"]),
        eps=float(settings["adam_eps"]),
        weight_decay=0.0,
    )
    schedule = get_linear_schedule_with_warmup(optimizer, int(settings["warmup_steps"]), steps)
    generator = torch.Generator().manual_seed(seed)
    curves = [
        (0, "train", _eval_loss(model, train_eval, device)),
        (0, "validation", _eval_loss(model, validation, device)),
    ]
    for epoch in range(1, int(settings["epochs"]) + 1):
        order = torch.randperm(len(train_texts), generator=generator).tolist()
        model.train()
        losses = []
        for i in range(0, len(order), size):
            batch = lm_batch(
                tok, [train_texts[j] for j in order[i : i + size]], max_length=max_length, protocol=protocol
            )
            loss = model(**{k: v.to(device) for k, v in batch.items()}).loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            losses.append(float(loss.detach()))
        curves.append((epoch, "train (dropout)", float(np.mean(losses))))
        curves.append((epoch, "train", _eval_loss(model, train_eval, device)))
        curves.append((epoch, "validation", _eval_loss(model, validation, device)))
    with atomic_dir(out_dir) as tmp:
        model.save_pretrained(Path(tmp))
        tok.save_pretrained(Path(tmp))
    out = pd.DataFrame(curves, columns=["epoch", "split", "loss"])
    return out.assign(trainable_parameters=n_trainable, protocol=protocol)

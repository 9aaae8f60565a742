"""Fine-tuning a causal LM on weighted (context, continuation) pairs, last blocks only.

The nextword study's appendix F fine-tunes GPT-2 on the human cloze responses:
each example is a context and one response, weighted by the share of
participants who gave it, so that the loss is the cross-entropy between the
human next-word distribution and the model's. Everything but the last
``trainable_blocks`` transformer blocks is frozen (embeddings, earlier blocks,
final norm and output layer included); AdamW; loss curves are returned so they
can be plotted. The result is saved with ``save_pretrained`` and loads back
through :class:`unsure.engine.hf.HFEngine` like any other model.
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import nn
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from unsure.engine.identity import local_device
from unsure.io import atomic_dir

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Example:
    """One training pair: the continuation's tokens are scored after the context's, with this weight."""

    context: str
    continuation: str
    weight: float = 1.0
    after_prompt: bool = False
    """Encode the continuation after the context encoded alone, as the engine reads
    choice, numeric and sampling requests (``unsure.zoo.training``), instead of cut
    from the pair encoded whole, as it scores continuations."""


@dataclass(frozen=True)
class FinetuneSettings:
    """Optimiser and freezing settings (the study's defaults are those of appendix F)."""

    trainable_blocks: int = 2
    learning_rate: float = 5e-4
    adam_eps: float = 1e-8
    batch_size: int = 5
    epochs: int = 10
    seed: int = 0


def transformer_blocks(model: PreTrainedModel) -> nn.ModuleList:
    """The list of transformer blocks of a causal LM (GPT-2's ``h``, Llama's ``layers``, ...)."""
    n_layers = getattr(model.config, "num_hidden_layers", None) or getattr(model.config, "n_layer", None)
    for module in model.modules():
        if isinstance(module, nn.ModuleList) and len(module) == n_layers:
            return module
    raise ValueError(f"{type(model).__name__}: no list of {n_layers} transformer blocks found")


def freeze_all_but_last(model: PreTrainedModel, blocks: int) -> int:
    """Freeze every parameter except those of the last ``blocks`` blocks; return how many stay trainable."""
    layers = transformer_blocks(model)
    if not 1 <= blocks <= len(layers):
        raise ValueError(f"trainable_blocks must be in 1..{len(layers)}, got {blocks}")
    for p in model.parameters():
        p.requires_grad_(False)
    for layer in list(layers)[-blocks:]:
        for p in layer.parameters():
            p.requires_grad_(True)
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def _encode(tok: PreTrainedTokenizerBase, ex: Example) -> tuple[list[int], int]:
    """Ids of context + continuation and where the continuation starts (the pair encoded whole)."""
    ctx: list[int] = tok(ex.context)["input_ids"]
    full: list[int] = tok(ex.context + ex.continuation)["input_ids"]
    if not ctx and tok.bos_token_id is not None:
        ctx, full = [tok.bos_token_id], [tok.bos_token_id, *full]
    if len(full) <= len(ctx) or full[: len(ctx)] != ctx:
        cont = tok(ex.continuation, add_special_tokens=False)["input_ids"]
        full = [*ctx, *cont]
    return full, len(ctx)


def target_logprobs(
    model: PreTrainedModel, ids: torch.Tensor, mask: torch.Tensor, labels: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The log-probability of each labelled token (``labels`` >= 0, aligned with ``ids``) and its row.

    The output layer and softmax run only where a labelled token is predicted: the vocabulary
    projection of every position, as a model's own ``labels=`` loss computes it, dominates a
    small model's cost and a long prompt's memory (a 2,000-token prompt's logits over a 128k
    vocabulary are 1 GB in float32)."""
    hidden = model.base_model(input_ids=ids, attention_mask=mask).last_hidden_state
    target = labels[:, 1:]
    rows, cols = torch.nonzero(target >= 0, as_tuple=True)
    logits = model.get_output_embeddings()(hidden[rows, cols]).float()
    return rows, torch.log_softmax(logits, dim=-1).gather(1, target[rows, cols][:, None])[:, 0]


def _batch_loss(model: PreTrainedModel, batch: list[tuple[list[int], int, float]], pad: int) -> torch.Tensor:
    """Weighted mean over examples of the continuation's summed negative log-likelihood."""
    width = max(len(ids) for ids, _, _ in batch)
    device = model.get_input_embeddings().weight.device
    ids = torch.full((len(batch), width), pad, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    labels = torch.full((len(batch), width), -100, dtype=torch.long)
    for b, (seq, start, _) in enumerate(batch):
        ids[b, : len(seq)] = torch.tensor(seq)
        mask[b, : len(seq)] = 1
        labels[b, start : len(seq)] = torch.tensor(seq[start:])
    rows, picked = target_logprobs(model, ids.to(device), mask.to(device), labels.to(device))
    nll = torch.zeros(len(batch), device=device).index_add(0, rows, -picked)
    weights = torch.tensor([w for _, _, w in batch], dtype=torch.float32, device=device)
    return (weights * nll).sum() / weights.sum()


def _loss(model: PreTrainedModel, data: list[tuple[list[int], int, float]], pad: int, batch_size: int) -> float:
    total, weight = 0.0, 0.0
    with torch.inference_mode():
        for i in range(0, len(data), batch_size):
            batch = data[i : i + batch_size]
            w = sum(x[2] for x in batch)
            total += float(_batch_loss(model, batch, pad)) * w
            weight += w
    return total / weight if weight else float("nan")


def finetune(
    model_id: str | os.PathLike[str],
    train: Sequence[Example],
    out_dir: str | os.PathLike[str],
    *,
    settings: FinetuneSettings = FinetuneSettings(),
    heldout: Sequence[Example] = (),
    revision: str | None = None,
) -> pd.DataFrame:
    """Fine-tune ``model_id`` on ``train`` and save it (model and tokenizer) to ``out_dir``, atomically.

    Examples are shuffled once per epoch with ``settings.seed``; the loss is
    the weighted mean of the continuations' negative log-likelihoods. Returns
    the loss curves: one row per (epoch, split) with ``epoch, split, loss``,
    where ``split`` is ``train`` (mean over the epoch's batches) or
    ``heldout`` (after the epoch, no gradient); epoch 0 is before training.
    """
    if not train:
        raise ValueError("finetune: no training examples")
    random.seed(settings.seed)
    np.random.seed(settings.seed)
    torch.manual_seed(settings.seed)
    tok = AutoTokenizer.from_pretrained(model_id, revision=revision)
    model = AutoModelForCausalLM.from_pretrained(model_id, revision=revision, dtype=torch.float32)
    device = torch.device(local_device())
    model.to(device)
    pad = tok.pad_token_id if tok.pad_token_id is not None else (tok.eos_token_id or 0)
    n_trainable = freeze_all_but_last(model, settings.trainable_blocks)
    log.info("fine-tuning %s: %d examples, %d trainable parameters", model_id, len(train), n_trainable)
    train_data = [(*_encode(tok, ex), ex.weight) for ex in train]
    held_data = [(*_encode(tok, ex), ex.weight) for ex in heldout]
    optimizer = torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad], lr=settings.learning_rate, eps=settings.adam_eps
    )
    rng = np.random.default_rng(settings.seed)
    model.eval()
    curves = [(0, "train", _loss(model, train_data, pad, settings.batch_size))]
    if held_data:
        curves.append((0, "heldout", _loss(model, held_data, pad, settings.batch_size)))
    for epoch in range(1, settings.epochs + 1):
        model.train()
        order = rng.permutation(len(train_data))
        losses = []
        for i in range(0, len(order), settings.batch_size):
            batch = [train_data[j] for j in order[i : i + settings.batch_size]]
            loss = _batch_loss(model, batch, pad)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(float(loss.detach()))
        model.eval()
        curves.append((epoch, "train", float(np.mean(losses))))
        if held_data:
            curves.append((epoch, "heldout", _loss(model, held_data, pad, settings.batch_size)))
        log.info("epoch %d: %s", epoch, ", ".join(f"{s} {v:.4f}" for e, s, v in curves if e == epoch))
    with atomic_dir(out_dir) as tmp:
        model.save_pretrained(Path(tmp))
        tok.save_pretrained(Path(tmp))
    return pd.DataFrame(curves, columns=["epoch", "split", "loss"])

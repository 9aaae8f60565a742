"""Few-shot LoRA fine-tuning of an engine's model with ``peft``, saved as an adapter directory.

Training examples are (context, target) pairs tokenised exactly as the engine
scores them (:meth:`HFEngine.split_pair`), and the loss is taken on the target
tokens only, so a model is trained on the very prompts it is evaluated on. The
adapter directory is what ``load_engine(entry, adapter=path)`` merges back into
the base model for scoring. The engine's own model is left as it was.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import cast

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import PreTrainedModel, get_linear_schedule_with_warmup

from unsure.engine.finetune import target_logprobs
from unsure.engine.hf import HFEngine, peft_quietly
from unsure.io import atomic_dir, write_json

log = logging.getLogger(__name__)

IGNORE = -100
"""Label of the tokens that carry no loss (the context and padding)."""


@dataclass(frozen=True)
class LoraSettings:
    """LoRA and optimiser settings (the study's: r 64, alpha 16, all linear layers, 5 epochs, lr 2e-4)."""

    rank: int = 64
    alpha: int = 16
    dropout: float = 0.0
    epochs: int = 5
    learning_rate: float = 2e-4
    batch_size: int = 1
    gradient_accumulation: int = 8
    weight_decay: float = 0.03
    max_grad_norm: float = 0.3
    gradient_checkpointing: bool = False
    seed: int = 0


def encode_examples(engine: HFEngine, examples: Sequence[tuple[str, str]]) -> list[tuple[list[int], list[int]]]:
    """(input ids, labels) per example: context and target as the engine splits them, loss on the target."""
    if not examples:
        raise ValueError("LoRA fine-tuning needs at least one training example")
    out = []
    for context, target in examples:
        ctx, cont = engine.split_pair(context, target)
        out.append((ctx + cont, [IGNORE] * len(ctx) + cont))
    return out


def _batch(
    encoded: Sequence[tuple[list[int], list[int]]], device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(input ids, attention mask, labels) of a batch, right-padded."""
    width = max(len(ids) for ids, _ in encoded)
    ids = torch.zeros((len(encoded), width), dtype=torch.long)
    labels = torch.full((len(encoded), width), IGNORE, dtype=torch.long)
    mask = torch.zeros((len(encoded), width), dtype=torch.long)
    for b, (x, y) in enumerate(encoded):
        ids[b, : len(x)] = torch.tensor(x)
        labels[b, : len(y)] = torch.tensor(y)
        mask[b, : len(x)] = 1
    return ids.to(device), mask.to(device), labels.to(device)


def train_adapter(
    engine: HFEngine,
    examples: Sequence[tuple[str, str]],
    out_dir: str | os.PathLike[str],
    settings: LoraSettings = LoraSettings(),
) -> list[float]:
    """Fine-tune LoRA adapters on all linear layers of ``engine.model``; save them to ``out_dir``.

    AdamW with linear decay, ``batch_size`` examples per forward pass and
    ``gradient_accumulation`` passes per step, gradients clipped to
    ``max_grad_norm``. The directory is written atomically; afterwards
    ``engine.model`` is the unchanged base model again. Returns the loss of
    every optimiser step.
    """
    encoded = encode_examples(engine, examples)
    torch.manual_seed(settings.seed)
    config = LoraConfig(
        r=settings.rank,
        lora_alpha=settings.alpha,
        lora_dropout=settings.dropout,
        target_modules="all-linear",
        bias="none",
        task_type="CAUSAL_LM",
    )
    base = engine.model  # peft puts the LoRA layers into its modules in place
    with peft_quietly():
        model = get_peft_model(base, config)
    if settings.gradient_checkpointing:
        model.activation_checkpointing_enable()  # transformers 5.24's name (the old one warns)
        model.enable_input_require_grads()
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=settings.learning_rate, weight_decay=settings.weight_decay)
    batches_per_epoch = math.ceil(len(encoded) / settings.batch_size)
    steps = settings.epochs * math.ceil(batches_per_epoch / settings.gradient_accumulation)
    schedule = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=0, num_training_steps=steps)
    order_rng = torch.Generator().manual_seed(settings.seed)
    losses: list[float] = []
    model.train()
    try:
        for epoch in range(settings.epochs):
            order = torch.randperm(len(encoded), generator=order_rng).tolist()
            batches = [order[i : i + settings.batch_size] for i in range(0, len(order), settings.batch_size)]
            for start in range(0, len(batches), settings.gradient_accumulation):
                group = batches[start : start + settings.gradient_accumulation]
                step_loss = 0.0
                for idx in group:
                    # the mean over target tokens of their negative log-likelihood (the model's own
                    # labels= loss, without its output layer over every context position)
                    _, picked = target_logprobs(base, *_batch([encoded[i] for i in idx], engine.device))
                    loss = -picked.mean() / len(group)
                    loss.backward()
                    step_loss += float(loss.detach())
                torch.nn.utils.clip_grad_norm_(trainable, settings.max_grad_norm)
                optimizer.step()
                schedule.step()
                optimizer.zero_grad(set_to_none=True)
                losses.append(step_loss)
            log.info("LoRA epoch %d/%d: last step loss %.4f", epoch + 1, settings.epochs, losses[-1])
        with atomic_dir(out_dir) as tmp:
            model.save_pretrained(str(tmp))
            write_json(Path(tmp) / "training.json", {"settings": asdict(settings), "losses": losses, "n": len(encoded)})
    finally:
        engine.model = _base(model, settings.gradient_checkpointing)
        engine.model.eval()
    return losses


def _base(model: PeftModel, checkpointing: bool) -> PreTrainedModel:
    """The base model with the LoRA layers removed (its own weights were never changed)."""
    base = cast(PreTrainedModel, model.unload())
    if checkpointing:
        base.activation_checkpointing_disable()
    return base

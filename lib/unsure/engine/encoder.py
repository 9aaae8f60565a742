"""Multiple-choice encoders (``AutoModelForMultipleChoice``): fine-tuning and scoring.

The discriminative model of the decision-risk study: a BERT-style encoder reads
each (prompt, choice) pair, a linear head scores it, and the softmax over the
choices is the model's confidence set. :func:`finetune` trains one per
benchmark with a plain, seeded ``torch`` loop (AdamW, linear warm-up and
decay, cross-entropy over the choices) and saves it with ``save_pretrained``;
:class:`MultipleChoiceEncoder` loads a saved one and scores instances.
"""

from __future__ import annotations

import logging
import math
import os
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from transformers import AutoModelForMultipleChoice, AutoTokenizer, get_linear_schedule_with_warmup

from unsure.engine.identity import local_device, require_local_folder
from unsure.engine.pretrained import explained_loading, hub_source
from unsure.io import atomic_dir

log = logging.getLogger(__name__)


def _n_choices(choices: Sequence[Sequence[str]]) -> int:
    sizes = {len(c) for c in choices}
    if len(sizes) != 1:
        raise ValueError(f"every instance needs the same number of choices, got sizes {sorted(sizes)}")
    (k,) = sizes
    if k < 2:
        raise ValueError(f"a multiple-choice instance needs at least two choices, got {k}")
    return k


class MultipleChoiceEncoder:
    """A multiple-choice encoder and its tokenizer, by hub id or local path."""

    def __init__(
        self,
        model_id: str | os.PathLike[str],
        *,
        revision: str | None = None,
        device: str | None = None,
        max_length: int = 128,
        trust_remote_code: bool = False,
    ) -> None:
        require_local_folder(str(model_id))
        source = hub_source(str(model_id), revision)
        self.device = torch.device(device or (local_device()))
        with explained_loading(str(model_id), revision, trust_remote_code=trust_remote_code):
            self.tokenizer = AutoTokenizer.from_pretrained(
                str(model_id), revision=revision, trust_remote_code=trust_remote_code, **source
            )
            model = AutoModelForMultipleChoice.from_pretrained(
                str(model_id), revision=revision, trust_remote_code=trust_remote_code, **source
            )
        self.model = model.to(self.device)
        self.model_id = str(model_id)
        self.max_length = max_length

    def batch(self, prompts: Sequence[str], choices: Sequence[Sequence[str]]) -> dict[str, torch.Tensor]:
        """Tensors of shape (instances, choices, tokens): every prompt paired with each of its choices.

        Long pairs lose tokens from the longer side first; an empty prompt (no
        question) is a pair with an empty first segment.
        """
        k = _n_choices(choices)
        first = [p for p in prompts for _ in range(k)]
        second = [c for cs in choices for c in cs]
        enc = self.tokenizer(
            first, second, truncation="longest_first", max_length=self.max_length, padding=True, return_tensors="pt"
        )
        return {key: value.view(len(prompts), k, -1).to(self.device) for key, value in enc.items()}

    def probs(
        self, prompts: Sequence[str], choices: Sequence[Sequence[str]], *, batch_size: int = 32
    ) -> npt.NDArray[np.float64]:
        """Softmax over each instance's choices, one row per instance."""
        if len(prompts) != len(choices):
            raise ValueError(f"{len(prompts)} prompts but {len(choices)} choice lists")
        if not prompts:
            return np.zeros((0, 0))
        self.model.eval()
        out = []
        with torch.inference_mode():
            for start in range(0, len(prompts), batch_size):
                sl = slice(start, start + batch_size)
                logits = self.model(**self.batch(prompts[sl], choices[sl])).logits
                out.append(torch.softmax(logits.double(), dim=-1).cpu().numpy())
        return np.concatenate(out)

    def save(self, out_dir: str | os.PathLike[str]) -> None:
        """Save model and tokenizer into ``out_dir`` (atomically: a complete directory or none)."""
        with atomic_dir(out_dir) as tmp:
            self.model.save_pretrained(tmp)
            self.tokenizer.save_pretrained(tmp)


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def finetune(
    model_id: str | os.PathLike[str],
    prompts: Sequence[str],
    choices: Sequence[Sequence[str]],
    labels: Sequence[int],
    out_dir: str | os.PathLike[str],
    *,
    epochs: int = 3,
    learning_rate: float = 1e-5,
    batch_size: int = 16,
    max_length: int = 128,
    warmup: float = 0.1,
    seed: int = 0,
    revision: str | None = None,
    device: str | None = None,
) -> dict[str, Any]:
    """Fine-tune ``model_id`` on (prompt, choices, gold index) and save it under ``out_dir``.

    Seeded (initialisation of the head, dropout, batch order), so a rerun on
    the same machine gives the same weights. Returns a summary: instances,
    steps, mean training loss per epoch and seconds.
    """
    k = _n_choices(choices)
    y = np.asarray(labels, dtype=np.int64)
    if len(prompts) != len(choices) or len(y) != len(prompts):
        raise ValueError(f"{len(prompts)} prompts, {len(choices)} choice lists and {len(y)} labels differ in number")
    if len(y) and (y.min() < 0 or y.max() >= k):
        raise ValueError(f"gold labels must index the {k} choices; got values {y.min()}..{y.max()}")
    _seed_everything(seed)
    enc = MultipleChoiceEncoder(model_id, revision=revision, device=device, max_length=max_length)
    model = enc.model
    steps_per_epoch = math.ceil(len(y) / batch_size)
    total = max(1, steps_per_epoch * epochs)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=0.01)
    schedule = get_linear_schedule_with_warmup(optimizer, int(warmup * total), total)
    order_rng = np.random.default_rng(seed)
    losses = []
    start = time.perf_counter()
    model.train()
    for epoch in range(epochs):
        order = order_rng.permutation(len(y))
        epoch_loss = 0.0
        for step in range(steps_per_epoch):
            idx = order[step * batch_size : (step + 1) * batch_size]
            batch = enc.batch([prompts[i] for i in idx], [choices[i] for i in idx])
            target = torch.as_tensor(y[idx], device=enc.device)
            loss = model(**batch, labels=target).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            epoch_loss += float(loss.detach()) * len(idx)
        losses.append(epoch_loss / max(1, len(y)))
        log.info("epoch %d/%d: mean training loss %.4f", epoch + 1, epochs, losses[-1])
    enc.save(Path(out_dir))
    return {
        "model_id": str(model_id),
        "instances": len(y),
        "choices": k,
        "steps": total,
        "epoch_loss": losses,
        "seconds": time.perf_counter() - start,
    }

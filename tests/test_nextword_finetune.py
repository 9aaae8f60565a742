"""Appendix F as the authors fine-tuned: language modelling on passages, what each protocol trains, the loss curves."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from unsure.nextword.finetuning import FINETUNE_SPLITS, finetune_lm, lm_batch, passage_texts, unfreeze

SETTINGS = {
    "seed": 0,
    "trainable_blocks": 2,
    "batch_size": 2,
    "max_length": 24,
    "epochs": 2,
    "learning_rate": 5e-3,
    "adam_eps": 1e-8,
    "warmup_steps": 1,
}
TEXTS = ["The cat sat on the mat.", "A dog ran in the park today.", "Rain fell on the old town."]


def _trainable(model: torch.nn.Module) -> set[str]:
    return {name for name, p in model.named_parameters() if p.requires_grad}


def test_paper_unfreezes_only_the_layernorms_the_authors_list(tiny_models: dict[str, Path]) -> None:
    model = AutoModelForCausalLM.from_pretrained(tiny_models["gpt2"])
    n = model.config.n_layer
    count = unfreeze(model, "paper", 2)
    want = {
        f"transformer.h.{i}.{ln}.{w}" for i in (n - 2, n - 1) for ln in ("ln_1", "ln_2") for w in ("weight", "bias")
    }
    want |= {"transformer.ln_f.weight", "transformer.ln_f.bias"}
    assert _trainable(model) == want  # their module_to_unfreeze: h[-1].ln_1/ln_2, h[-2].ln_1/ln_2, ln_f
    assert count == 10 * model.config.n_embd
    unfreeze(model, "corrected", 2)
    got = _trainable(model)
    assert got == {
        name
        for name, _ in model.named_parameters()
        if name.startswith((f"transformer.h.{n - 2}.", f"transformer.h.{n - 1}."))
    }


def test_lm_batch_puts_padding_in_the_loss_only_under_paper(tiny_models: dict[str, Path]) -> None:
    tok = AutoTokenizer.from_pretrained(tiny_models["gpt2"])
    paper = lm_batch(tok, TEXTS[:2], max_length=24, protocol="paper")
    corrected = lm_batch(tok, TEXTS[:2], max_length=24, protocol="corrected")
    assert paper["input_ids"].shape == (2, 24) and int(paper["input_ids"][0, 0]) == tok.bos_token_id
    pads = paper["attention_mask"] == 0
    assert pads.any() and torch.equal(paper["labels"], paper["input_ids"])  # the model learns to predict padding
    assert (corrected["labels"][pads] == -100).all() and torch.equal(corrected["labels"][~pads], paper["labels"][~pads])
    long = lm_batch(tok, [" ".join(["word"] * 60)], max_length=24, protocol="paper")
    assert long["input_ids"].shape[1] > 24  # kept whole, never cut


def test_passage_texts_are_the_last_context_and_word() -> None:
    positions = pd.DataFrame(
        {
            "text_id": [1, 1, 2],
            "word_num": [2, 3, 2],
            "context": ["A", "A cat", "Dogs"],
            "corpus_word": ["cat", "sat.", "run"],
        }
    )
    assert passage_texts(positions) == {1: "A cat sat.", 2: "Dogs run"}


@pytest.mark.parametrize("protocol", ["paper", "corrected"])
def test_finetune_lm_trains_what_the_protocol_says_and_curves_do_not_mix_modes(
    tiny_models: dict[str, Path], tmp_path: Path, protocol: str
) -> None:
    base = AutoModelForCausalLM.from_pretrained(tiny_models["gpt2"]).eval()
    tok = AutoTokenizer.from_pretrained(tiny_models["gpt2"])
    curves = finetune_lm(
        tiny_models["gpt2"], TEXTS, TEXTS[:1], tmp_path / "tuned", protocol=protocol, settings=SETTINGS
    )  # type: ignore[arg-type]
    assert set(curves["split"]) == set(FINETUNE_SPLITS)
    at0 = curves[curves["epoch"] == 0]
    assert sorted(at0["split"]) == ["train", "validation"]  # no dropout-mode point before training
    assert (curves.groupby("epoch").size().loc[1:] == 3).all()
    # Epoch 0's train point is the eval-mode loss of the untouched model over the training batches.
    with torch.inference_mode():
        direct = np.mean(
            [
                float(base(**lm_batch(tok, TEXTS[i : i + 2], max_length=24, protocol=protocol)).loss)  # type: ignore[arg-type]
                for i in range(0, 3, 2)
            ]
        )
    assert at0.set_index("split").loc["train", "loss"] == pytest.approx(direct, rel=1e-5)
    tuned = AutoModelForCausalLM.from_pretrained(tmp_path / "tuned")
    before, after = dict(base.named_parameters()), dict(tuned.named_parameters())
    changed = {name for name in before if not torch.equal(before[name], after[name])}
    check = AutoModelForCausalLM.from_pretrained(tiny_models["gpt2"])
    unfreeze(check, protocol, 2)  # type: ignore[arg-type]
    assert changed and changed <= _trainable(check)  # nothing outside what the protocol unfreezes moved
    assert curves["trainable_parameters"].iloc[0] == sum(p.numel() for p in check.parameters() if p.requires_grad)

"""Verbalised numeric answers from the KV cache: each prompt is encoded once, and the
digits equal those of the reference, ``steps`` full unbatched forward passes with
the argmax over digit tokens, whatever the batch, its padding or an out-of-memory
retry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

from unsure.engine import NumericRequest
from unsure.engine.hf import HFEngine

MULTI_DIGIT = ["00", "10", "25", "50", "75", "99", "125"]

FEATURES = [
    "Age is: 50 years old.",
    "Occupation: baker.",
    "Hours per week: 40.",
    "Class of worker: working for a private company.",
    "Highest educational attainment: bachelor's degree.",
    "Marital status: married.",
    "Place of birth: Ohio.",
]
PROMPTS = [
    "0.",
    "Answer (between 0 and 1): 0.",
    "The old baker was brave. They missed him inside. The probability is 0.",
    *(
        "The following data describes a survey respondent.\n"
        + "\n".join(f"- {f}" for f in FEATURES[:n])
        + "\nQuestion: What is the probability that the income is above 50,000 dollars?\nAnswer (between 0 and 1): 0."
        for n in (1, 3, 4, 7)
    ),
    "yes",
]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory, tiny_models: dict[str, Path]) -> dict[str, Path]:
    """The session's GPT-2 and Llama and a random GPT-2 whose vocabulary also holds the
    multi-digit tokens real GPT-2's does, scaled up with the single digits so they win."""
    out = tmp_path_factory.mktemp("numeric-models") / "gpt2-digits"
    tok = AutoTokenizer.from_pretrained(tiny_models["gpt2"])
    tok.add_tokens(MULTI_DIGIT)
    config = GPT2Config(
        vocab_size=len(tok),
        n_embd=64,
        n_layer=2,
        n_head=4,
        n_positions=512,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config)
    with torch.no_grad():
        # the zoo's vocabulary holds multi-digit tokens of its own (Census text): the single digits
        # and the added ones are scaled alike, so that both kinds win somewhere
        model.transformer.wte.weight[tok.convert_tokens_to_ids([*MULTI_DIGIT, *"0123456789"])] *= 8
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return {**tiny_models, "gpt2-digits": out}


def digit_ids(engine: HFEngine) -> list[int]:
    return sorted(i for tok, i in engine.tokenizer.get_vocab().items() if tok.isdecimal())


def reference(engine: HFEngine, prompts: list[str], steps: int) -> list[str]:
    """The old computation: per prompt, ``steps`` full forward passes over the whole
    sequence, each appending the digit token with the largest logit; the digits' text."""
    digits = digit_ids(engine)
    out = []
    for prompt in prompts:
        ids = engine.encode(prompt)
        text = ""
        for _ in range(steps):
            with torch.inference_mode():
                logits = engine.model(torch.tensor([ids])).logits[0, -1]
            best = digits[int(torch.argmax(logits[digits]))]
            ids.append(best)
            text += engine.tokenizer.convert_ids_to_tokens(best)
        out.append(text)
    return out


def values(texts: list[str]) -> list[float]:
    return [float("0." + t) for t in texts]


def record_inputs(engine: HFEngine) -> tuple[list[tuple[int, ...]], list[tuple[int, ...]]]:
    """Shapes of the ids each base-model pass gets and of the states the output projection gets."""
    fed: list[tuple[int, ...]] = []
    projected: list[tuple[int, ...]] = []

    def on_base(module: Any, args: Any, kwargs: dict[str, Any]) -> None:
        fed.append(tuple(kwargs["input_ids"].shape))

    def on_head(module: Any, args: Any) -> None:
        projected.append(tuple(args[0].shape))

    engine.model.base_model.register_forward_pre_hook(on_base, with_kwargs=True)
    engine.model.get_output_embeddings().register_forward_pre_hook(on_head)
    return fed, projected


@pytest.mark.parametrize("steps", [2, 3])
@pytest.mark.parametrize("name", ["gpt2", "llama", "gpt2-digits"])
def test_numeric_equals_full_forward_passes_at_any_batch_size(name: str, steps: int, models: dict[str, Path]) -> None:
    one_batch = HFEngine(str(models[name]), token_budget=1 << 20)
    texts = reference(one_batch, PROMPTS, steps)
    want = values(texts)
    assert len(set(want)) >= 3  # the prompts get different answers, so a mix-up would show
    if name == "gpt2-digits":  # both single- and multi-digit tokens were chosen
        assert any(len(t) > steps for t in texts) and any(len(t) < 2 * steps for t in texts)
    fed, _ = record_inputs(one_batch)
    assert one_batch.numeric([NumericRequest(q, steps=steps) for q in PROMPTS]) == want
    lengths = {len(one_batch.encode(p)) for p in PROMPTS}
    assert fed[0] == (len(PROMPTS), max(lengths)) and len(lengths) >= 5  # one left-padded batch of mixed lengths
    singles = HFEngine(str(models[name]), max_batch_size=1)
    assert singles.numeric([NumericRequest(q, steps=steps) for q in PROMPTS]) == want
    budgeted = HFEngine(str(models[name]), token_budget=120)
    assert budgeted.numeric([NumericRequest(q, steps=steps) for q in PROMPTS]) == want


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_each_prompt_is_encoded_once(name: str, tiny_models: dict[str, Path]) -> None:
    steps = 2
    engine = HFEngine(str(tiny_models[name]), max_batch_size=1)  # no padding: ids fed are tokens processed
    fed, projected = record_inputs(engine)
    engine.numeric([NumericRequest(q, steps=steps) for q in PROMPTS])
    lengths = [len(engine.encode(p)) for p in PROMPTS]
    processed = sum(lengths) + len(PROMPTS) * (steps - 1)  # the prompt, then one cached token per later step
    assert sum(b * n for b, n in fed) == engine.counters.tokens == processed
    assert engine.counters.forward_passes == steps * len(PROMPTS)
    two_pass = steps * sum(lengths) + len(PROMPTS) * steps * (steps - 1) // 2  # what re-encoding counted
    assert processed < 0.6 * two_pass
    hidden = engine.model.config.hidden_size
    assert projected == [(1, hidden)] * (steps * len(PROMPTS))  # the last position only, never the sequence


@pytest.mark.parametrize(
    "error", [torch.OutOfMemoryError("CUDA out of memory (simulated)"), RuntimeError("out of memory (simulated)")]
)
def test_out_of_memory_halves_the_batch(
    error: RuntimeError, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = HFEngine(str(tiny_models["llama"]), token_budget=1 << 20)
    want = values(reference(engine, PROMPTS, 2))
    base = engine.model.base_model
    real = base.forward
    sizes: list[int] = []

    def flaky(**kwargs: Any) -> Any:
        rows, cols = kwargs["input_ids"].shape
        if rows > 3:
            raise error
        if kwargs.get("attention_mask") is not None and cols > 1:  # prompts (past the opening they share)
            sizes.append(rows)
        return real(**kwargs)

    monkeypatch.setattr(base, "forward", flaky)
    assert engine.numeric([NumericRequest(q) for q in PROMPTS]) == want
    assert sum(sizes) == len(PROMPTS) and max(sizes) <= 3
    assert engine.token_budget < 1 << 20


def test_no_prompts_and_bad_steps(tiny_models: dict[str, Path]) -> None:
    engine = HFEngine(str(tiny_models["gpt2"]))
    assert engine.numeric([]) == []
    with pytest.raises(ValueError, match=r"gpt2.*steps >= 1, got 0"):
        engine.numeric([NumericRequest("0.", steps=0)])

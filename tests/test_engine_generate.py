"""Batched greedy generation: every reply equals the one-prompt-at-a-time reply
(the reference is a fresh, unpadded ``model.generate`` per prompt), whatever the
batch, its padding, its token budget or an out-of-memory retry."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

from unsure.config import ZooModel
from unsure.engine import NumericReplyRequest, ReplyRequest
from unsure.engine.hf import HFEngine
from unsure.zoo.build import build, training_texts

USERS = [
    "",
    "A",
    "Is the income above 50,000 dollars?",
    "The old baker was brave. They missed him inside. Jordan saw my dog near the river in the morning.",
    "Answer (between 0 and 1): 0.",
    "- Age is: 50 years old. - Occupation: baker. - Hours per week: 40. Is the income above 50,000 dollars?",
    "Definition: Positive Example: Negative Example: Input: Output:",
    "yes",
]
STEPS = 12


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory, tiny_models: dict[str, Path]) -> dict[str, Path]:
    """The session's GPT-2 and Llama, a ChatML chat Llama and a bigram model on its tokenizer."""
    root = tmp_path_factory.mktemp("generate-models")
    spec = ZooModel(architecture="llama", vocab_size=800, hidden_size=64, layers=2, heads=4, chat=True)
    build("llama-chat", spec, training_texts(seed=0, n_sentences=3000), root / "llama-chat", zoo_seed=0)
    return {**tiny_models, "llama-chat": root / "llama-chat", "bigram": bigram_model(root / "llama-chat", root / "bi")}


def bigram_model(tokenizer_dir: Path, out: Path) -> Path:
    """A Llama whose next token depends on the current token only (attention and MLP
    outputs are zero): after a chat prompt with the ``Probability:`` prefill it
    replies ``0.75`` and stops; after a bare chat prompt it says ``the cat`` forever."""
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    vocab = tok.get_vocab()
    newline = tok(tok.apply_chat_template([{"role": "user", "content": "q"}], tokenize=False))["input_ids"][-1]
    follows = {  # current token -> next token; every other token is followed by "0"
        vocab["0"]: vocab["."],
        vocab["."]: vocab["7"],
        vocab["7"]: vocab["5"],
        vocab["5"]: tok.eos_token_id,
        newline: vocab["▁the"],
        vocab["▁the"]: vocab["▁cat"],
        vocab["▁cat"]: vocab["▁the"],
    }
    hidden = len(follows) + 1
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=hidden,
        intermediate_size=8,
        num_hidden_layers=1,
        num_attention_heads=1,
        num_key_value_heads=1,
        tie_word_embeddings=False,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith(("o_proj.weight", "down_proj.weight")):
                param.zero_()
        model.model.embed_tokens.weight.zero_()
        model.model.embed_tokens.weight[:, 0] = 1.0  # slot 0: any other token
        model.lm_head.weight.zero_()
        model.lm_head.weight[vocab["0"], 0] = 10.0
        for slot, (current, following) in enumerate(follows.items(), start=1):
            model.model.embed_tokens.weight[current] = 0.0
            model.model.embed_tokens.weight[current, slot] = 1.0
            model.lm_head.weight[following, slot] = 10.0
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def prompts_for(engine: HFEngine, name: str) -> list[str]:
    if name == "llama-chat":
        return [engine.chat_prompt(u) for u in USERS]
    return list(USERS)


def reference(engine: HFEngine, prompts: list[str], max_new_tokens: int) -> list[tuple[str, int]]:
    """The unbatched reply and its generated token count (EOS included), one prompt at a time."""
    out = []
    for prompt in prompts:
        ids = torch.tensor([engine.encode(prompt)])
        with torch.inference_mode():
            seq = engine.model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=max_new_tokens,
                do_sample=False,
                pad_token_id=engine.tokenizer.eos_token_id,
            )
        new = seq[0, ids.shape[1] :]
        out.append((engine.tokenizer.decode(new, skip_special_tokens=True), len(new)))
    return out


def spy_batches(engine: HFEngine, monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    """Records the prompt lengths of every ``model.generate`` call."""
    calls: list[list[int]] = []
    real = engine.model.generate

    def spy(input_ids: torch.Tensor, **kwargs: Any) -> Any:
        calls.append(kwargs["attention_mask"].sum(dim=1).tolist())
        return real(input_ids, **kwargs)

    monkeypatch.setattr(engine.model, "generate", spy)
    return calls


@pytest.mark.parametrize("name", ["gpt2", "llama", "llama-chat"])
def test_batched_replies_equal_unbatched_replies(
    name: str, models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = HFEngine(str(models[name]), token_budget=1 << 20)
    prompts = prompts_for(engine, name)
    want = reference(engine, prompts, STEPS)
    calls = spy_batches(engine, monkeypatch)
    got = engine.generate([ReplyRequest(q, max_new_tokens=STEPS) for q in prompts])
    assert got == [text for text, _ in want]
    assert len(calls) == 1 and len(set(calls[0])) >= 5, calls  # one batch, mixed lengths, so padded
    lengths = [len(engine.encode(p)) for p in prompts]
    assert engine.counters.tokens == sum(lengths) + sum(n for _, n in want)
    assert engine.counters.forward_passes == max(n for _, n in want)
    assert any(text for text in got)


def test_chat_prompts_get_no_second_bos(models: dict[str, Path]) -> None:
    engine = HFEngine(str(models["llama-chat"]))
    ids = engine.encode(engine.chat_prompt("yes"))
    assert ids[0] != engine.tokenizer.bos_token_id
    assert engine.encode("yes")[0] == engine.tokenizer.bos_token_id


def test_token_budget_splits_batches_without_changing_replies(
    models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = HFEngine(str(models["gpt2"]), token_budget=100)
    prompts = USERS
    want = [text for text, _ in reference(engine, prompts, STEPS)]
    calls = spy_batches(engine, monkeypatch)
    assert engine.generate([ReplyRequest(q, max_new_tokens=STEPS) for q in prompts]) == want
    assert len(calls) > 1 and sum(len(c) for c in calls) == len(prompts)
    for lengths in calls:  # padded prompt plus new tokens within the budget (a lone prompt may exceed it)
        assert len(lengths) == 1 or (max(lengths) + STEPS) * len(lengths) <= 100
        assert lengths == sorted(lengths, reverse=True)  # longest first
    firsts = [max(c) for c in calls]
    assert firsts == sorted(firsts, reverse=True)  # batches are length-sorted


def test_a_reply_ends_at_its_own_eos(models: dict[str, Path]) -> None:
    engine = HFEngine(str(models["bigram"]), token_budget=1 << 20)
    early = engine.chat_prompt("What is the probability?", prefill="Probability:")
    late = engine.chat_prompt("Tell me a story.")
    got = engine.generate(
        [
            ReplyRequest(early, max_new_tokens=STEPS),
            ReplyRequest(late, max_new_tokens=STEPS),
            ReplyRequest(early, max_new_tokens=STEPS),
        ]
    )
    assert got[0] == got[2] == "0.75"  # no padding or EOS text after the early end
    assert got[1] == " ".join(["the", "cat"] * (STEPS // 2))
    assert got == [text for text, _ in reference(engine, [early, late, early], STEPS)]
    prompt_tokens = 2 * len(engine.encode(early)) + len(engine.encode(late))
    assert engine.counters.tokens == prompt_tokens + 5 + STEPS + 5  # "0", ".", "7", "5", EOS
    assert engine.counters.forward_passes == STEPS


def test_numeric_chat_parses_batched_replies(models: dict[str, Path]) -> None:
    engine = HFEngine(str(models["bigram"]))
    values = engine.numeric_chat(
        [
            NumericReplyRequest(engine.chat_prompt("q", prefill="Probability:"), max_new_tokens=8),
            NumericReplyRequest(engine.chat_prompt("q"), max_new_tokens=8),
        ]
    )
    assert values[0] == 0.75 and math.isnan(values[1])


@pytest.mark.parametrize(
    "error", [torch.OutOfMemoryError("CUDA out of memory (simulated)"), RuntimeError("out of memory (simulated)")]
)
def test_out_of_memory_halves_the_batch(
    error: RuntimeError, models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = HFEngine(str(models["llama"]), token_budget=1 << 20)
    prompts = USERS
    want = [text for text, _ in reference(engine, prompts, STEPS)]
    real = engine.model.generate
    sizes: list[int] = []

    def flaky(input_ids: torch.Tensor, **kwargs: Any) -> Any:
        if input_ids.shape[0] > 3:
            raise error
        sizes.append(input_ids.shape[0])
        return real(input_ids, **kwargs)

    monkeypatch.setattr(engine.model, "generate", flaky)
    assert engine.generate([ReplyRequest(q, max_new_tokens=STEPS) for q in prompts]) == want
    assert sum(sizes) == len(prompts) and max(sizes) <= 3
    assert engine.token_budget < 1 << 20


def test_other_errors_and_a_single_prompt_out_of_memory_propagate(
    models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = HFEngine(str(models["gpt2"]))

    def broken(input_ids: torch.Tensor, **kwargs: Any) -> Any:
        raise RuntimeError("shape mismatch")

    monkeypatch.setattr(engine.model, "generate", broken)
    with pytest.raises(RuntimeError, match="shape mismatch"):
        engine.generate([ReplyRequest(q, max_new_tokens=2) for q in USERS])

    def no_memory(input_ids: torch.Tensor, **kwargs: Any) -> Any:
        raise torch.OutOfMemoryError("out of memory")

    monkeypatch.setattr(engine.model, "generate", no_memory)
    with pytest.raises(torch.OutOfMemoryError):
        engine.generate([ReplyRequest(q, max_new_tokens=2) for q in USERS[:1]])


def test_no_prompts_and_bad_lengths(models: dict[str, Path]) -> None:
    engine = HFEngine(str(models["gpt2"]))
    assert engine.generate([]) == []
    with pytest.raises(ValueError, match="max_new_tokens"):
        engine.generate([ReplyRequest("x", max_new_tokens=0)])

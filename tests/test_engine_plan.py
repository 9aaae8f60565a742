"""unsure.engine.plan_counters: the counters of a real run, counted without a model."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from unsure.engine import (
    ChoiceRequest,
    ContinuationRequest,
    NumericReplyRequest,
    NumericRequest,
    ReplyRequest,
    TokenLogprobsRequest,
    WordSamplingRequest,
    plan_counters,
)
from unsure.engine.forward import Counters
from unsure.engine.hf import HFEngine

OPENING = "Answer the question about the person below with the letter of the right option only.\n\n"
PEOPLE = [
    "The person is 34 years old, works 40 hours a week as a nurse in California.",
    "The person is 61 years old, retired, and lives in Texas with a spouse.",
    "The person is 19 years old and a student.",
    "The person is 45 years old, works part time as a cook, and never married.",
    "A short one.",
]


def choice(person: str, order: int) -> ChoiceRequest:
    """A risk-score style prompt: both option orders share the opening and the person."""
    options = ("A. Above 50,000 dollars.\nB. Below.", "A. Below.\nB. Above 50,000 dollars.")[order]
    return ChoiceRequest(f"{OPENING}{person}\nIs the income above 50,000 dollars?\n{options}\nAnswer:", ("A", "B"))


KINDS: dict[str, list[Any]] = {
    "choices, both orders": [choice(p, o) for o in (0, 1) for p in PEOPLE],
    "choices, longer options": [ChoiceRequest(OPENING + p, ("yes", "no way")) for p in PEOPLE],
    "labels with EOS": [
        ContinuationRequest(OPENING + p + "\nOutput:", (" positive", " negative", " neutral"), eos=True) for p in PEOPLE
    ],
    "numeric": [NumericRequest(OPENING + p + "\nAnswer: 0.", steps=s) for p in PEOPLE for s in (1, 2)],
    "token logprobs": [TokenLogprobsRequest(tuple(range(5, 30 + 7 * i)), (3, 4, 9)) for i in range(4)],
}


def real(path: Path, requests: list[Any], **kwargs: Any) -> tuple[HFEngine, Counters]:
    engine = HFEngine(str(path), token_budget=256, **kwargs)
    for kind in dict.fromkeys(type(r) for r in requests):
        method = {ChoiceRequest: engine.choice_probs, ContinuationRequest: engine.continuation_scores,
                  NumericRequest: engine.numeric, TokenLogprobsRequest: engine.token_logprobs,
                  ReplyRequest: engine.generate, NumericReplyRequest: engine.numeric_chat,
                  WordSamplingRequest: engine.sample_words}[kind]  # fmt: skip
        method([r for r in requests if type(r) is kind])
    return engine, engine.counters


def planned(engine: HFEngine, requests: list[Any], **kwargs: Any) -> Counters:
    kwargs = {"device": "cpu", **kwargs}  # the real runs here are on the CPU
    return plan_counters(requests, engine.tokenizer, config=engine.model.config, token_budget=256,
                         vocab_size=engine.runner.vocab_size, **kwargs)  # fmt: skip


def work(c: Counters) -> tuple[int, int, int, int]:
    return c.tokens, c.forward_passes, c.logit_rows, c.attended


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_planned_counters_equal_a_real_run(arch: str, kind: str, tiny_models: dict[str, Path]) -> None:
    engine, counters = real(tiny_models[arch], KINDS[kind])
    assert counters.tokens > 0
    assert work(planned(engine, KINDS[kind])) == work(counters)


def test_all_kinds_in_one_plan_and_the_default_config(tiny_models: dict[str, Path]) -> None:
    everything = [r for rs in KINDS.values() for r in rs]
    engine, counters = real(tiny_models["llama"], everything)
    assert work(planned(engine, everything)) == work(counters)
    # the tokenizer's BOS and EOS are the zoo model's: no config needed
    alone = plan_counters(
        everything, engine.tokenizer, token_budget=256, vocab_size=engine.runner.vocab_size, device="cpu"
    )
    assert work(alone) == work(counters)
    # the shared prefix of the option orders and the shared opening of a batch are counted once
    both = KINDS["choices, both orders"]
    tokens = sum(len(engine.encode(r.prompt)) for r in both)
    assert plan_counters(both, engine.tokenizer).tokens < tokens * 0.6


def test_a_gpu_runs_planned_label_requests_in_the_waves_it_tokenises_them_in(tiny_models: dict[str, Path]) -> None:
    """A GPU engine tokenises a call's label requests in waves of two token budgets, each wave its own
    batches: the plan for a GPU counts those batches, as the engine does."""
    requests = KINDS["labels with EOS"] * 4
    engine = HFEngine(str(tiny_models["llama"]), token_budget=256)
    engine.runner.wave_tokens = 2 * engine.runner.token_budget  # as on a GPU
    engine.continuation_scores(requests)
    assert work(planned(engine, requests, device="cuda")) == work(engine.counters)
    assert work(planned(engine, requests)) != work(engine.counters)  # one wave, as on a CPU: other batches


def test_replies_at_their_full_length(tiny_models: dict[str, Path]) -> None:
    requests = [ReplyRequest(OPENING + p, 6) for p in PEOPLE] + [NumericReplyRequest(PEOPLE[0], 4)]
    engine = HFEngine(str(tiny_models["gpt2"]), token_budget=256)
    engine.model.generation_config.eos_token_id = None  # no reply ends early: the plan's upper bound is exact
    engine.generate(requests[:-1])
    engine.numeric_chat(requests[-1:])
    assert work(planned(engine, requests)) == work(engine.counters)
    assert planned(engine, requests, reply_tokens=2).tokens < engine.counters.tokens


def test_word_samples_at_most_the_plan(tiny_models: dict[str, Path]) -> None:
    requests = [WordSamplingRequest(p, n=40, seed=i, max_new_tokens=5) for i, p in enumerate(PEOPLE)]
    engine, counters = real(tiny_models["llama"], requests)
    bound = planned(engine, requests)  # every sample drawing max_new_tokens, no row shared
    assert 0 < counters.tokens <= bound.tokens and counters.attended <= bound.attended
    assert counters.forward_passes <= bound.forward_passes
    contexts = planned(engine, requests, sample_tokens=1)  # the contexts' pass alone
    assert contexts.tokens == sum(len(engine.encode(p)) for p in PEOPLE) < counters.tokens


def test_unknown_request_kind() -> None:
    @dataclasses.dataclass(frozen=True)
    class Other:
        prompt: str

    with pytest.raises(TypeError, match="Other is no engine request kind"):
        plan_counters([Other("x")], None)  # type: ignore[list-item]

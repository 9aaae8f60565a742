"""The engine's numbers: exact against fresh forward passes, invariant to batching,
equal to lm-evaluation-harness and folktexts on the same model and inputs."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import torch

from unsure.engine import ChoiceRequest, ContinuationRequest, NumericRequest, ReplyRequest
from unsure.engine.forward import PackedResult, common_prefix_length
from unsure.engine.hf import HFEngine, _continuation_scores

CONTEXTS = [
    "The old baker was brave. They missed him inside. Jordan saw my",
    "Question: Is the income above 50,000 dollars?\nA. Yes.\nB. No.\nAnswer:",
    "",
    "A short one",
]
CONTINUATIONS = [
    (" dirty room", " dog", " house in the morning."),
    (" A", " B"),
    (" the", " a cat"),
    (" x", " yes", " no"),
]
REQUESTS = [ContinuationRequest(c, k) for c, k in zip(CONTEXTS, CONTINUATIONS, strict=True)] * 5


def fresh_logprob(engine: HFEngine, context: str, continuation: str) -> float:
    """The reference: one independent, unpadded forward pass per continuation."""
    ctx, cont = engine.split_pair(context, continuation)
    with torch.no_grad():
        logprobs = engine.model(torch.tensor([ctx + cont])).logits[0].double().log_softmax(-1)
    return float(sum(logprobs[len(ctx) - 1 + j, t] for j, t in enumerate(cont)))


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_continuations_equal_fresh_forward_passes(arch: str, tiny_models: dict[str, Path]) -> None:
    engine = HFEngine(str(tiny_models[arch]))
    for req, res in zip(REQUESTS, engine.continuation_scores(REQUESTS), strict=True):
        for cont, lp, n in zip(req.continuations, res.logprob, res.n_tokens, strict=True):
            assert lp == pytest.approx(fresh_logprob(engine, req.context, cont), abs=1e-5)
            assert n == len(engine.split_pair(req.context, cont)[1])


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_numbers_do_not_depend_on_batch_size(arch: str, tiny_models: dict[str, Path]) -> None:
    one = HFEngine(str(tiny_models[arch]), max_batch_size=1)
    many = HFEngine(str(tiny_models[arch]), max_batch_size=64, token_budget=1 << 20)
    a = one.continuation_scores(REQUESTS)
    b = many.continuation_scores(REQUESTS)
    assert one.counters.forward_passes == len(REQUESTS) and many.counters.forward_passes == 1
    for x, y in zip(a, b, strict=True):
        np.testing.assert_allclose(x.logprob, y.logprob, rtol=0, atol=1e-6)
    ca = one.choice_probs([ChoiceRequest(c, ("A", "B")) for c in CONTEXTS])
    cb = many.choice_probs([ChoiceRequest(c, ("A", "B")) for c in CONTEXTS])
    for x, y in zip(ca, cb, strict=True):
        np.testing.assert_allclose(x.probs, y.probs, rtol=0, atol=1e-6)


def test_out_of_memory_halves_the_batch(tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    engine = HFEngine(str(tiny_models["llama"]), token_budget=1 << 20)
    real = engine.runner._launch

    def flaky(plan: object, a: int, b: int) -> object:
        if b - a > 3:
            raise torch.OutOfMemoryError("simulated")
        return real(plan, a, b)  # type: ignore[arg-type]

    monkeypatch.setattr(engine.runner, "_launch", flaky)
    got = engine.continuation_scores(REQUESTS)
    want = HFEngine(str(tiny_models["llama"])).continuation_scores(REQUESTS)
    for x, y in zip(got, want, strict=True):
        np.testing.assert_allclose(x.logprob, y.logprob, rtol=0, atol=1e-6)
    assert engine.token_budget < 1 << 20


def test_parity_with_lm_evaluation_harness(tiny_models: dict[str, Path]) -> None:
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    path = str(tiny_models["llama"])
    harness = HFLM(pretrained=path, device="cpu", dtype="float32", batch_size=4, add_bos_token=True)
    pairs = [(r.context, c) for r in REQUESTS[:4] for c in r.continuations if r.context]
    instances = [Instance("loglikelihood", {}, pair, i) for i, pair in enumerate(pairs)]
    theirs = harness.loglikelihood(instances)
    ours = HFEngine(path).continuation_scores([ContinuationRequest(c, (k,)) for c, k in pairs])
    for (lp, greedy), mine in zip(theirs, ours, strict=True):
        assert mine.logprob[0] == pytest.approx(lp, abs=1e-4)
        assert bool(mine.greedy[0]) == greedy


def test_parity_with_folktexts_choice_probabilities(tiny_models: dict[str, Path]) -> None:
    from folktexts.llm_utils import load_model_tokenizer, query_model_batch
    from folktexts.qa_interface import Choice, MultipleChoiceQA

    path = str(tiny_models["gpt2"])
    engine = HFEngine(path)
    model, tokenizer = load_model_tokenizer(path)
    qa = MultipleChoiceQA(
        column="PINCP", text="Is the income above 50,000 dollars?", choices=(Choice("Yes", 1), Choice("No", 0))
    )
    prompts = [c + "\nAnswer:" for c in CONTEXTS]
    probs = query_model_batch(prompts, model, tokenizer, context_size=512)
    ours = engine.choice_probs([ChoiceRequest(p, ("A", "B")) for p in prompts])
    for row, mine in zip(probs, ours, strict=True):
        theirs = qa._decode_model_output_to_choice_distribution(row, tokenizer.get_vocab())
        p_yes = theirs[qa.choices[0]]
        assert mine.probs[0] == pytest.approx(p_yes, abs=2e-4)


def test_multi_token_options_are_scored_as_continuations(tiny_models: dict[str, Path]) -> None:
    engine = HFEngine(str(tiny_models["llama"]))
    got = engine.choice_probs([ChoiceRequest("The answer is", ("very likely indeed", "no"))])[0]
    assert got.prefix is None
    lps = np.array([fresh_logprob(engine, "The answer is", " " + o) for o in ("very likely indeed", "no")])
    np.testing.assert_allclose(got.probs, np.exp(lps) / np.exp(lps).sum(), atol=1e-6)


def test_numeric_answer_is_greedy_over_digits(tiny_models: dict[str, Path]) -> None:
    engine = HFEngine(str(tiny_models["gpt2"]))
    prompt = "What is the probability? Answer (between 0 and 1): 0."
    value = engine.numeric([NumericRequest(prompt)])[0]
    vocab = engine.tokenizer.get_vocab()
    digits = sorted(i for t, i in vocab.items() if t.isdecimal())
    ids = engine.encode(prompt)
    text = ""
    for _ in range(2):
        with torch.no_grad():
            logits = engine.model(torch.tensor([ids])).logits[0, -1]
        best = digits[int(torch.argmax(logits[digits]))]
        ids.append(best)
        text += engine.tokenizer.convert_ids_to_tokens(best)
    assert value == float("0." + text)
    assert 0 <= value < 1


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_option_orders_share_their_prefix_and_score_as_if_alone(tiny_models: dict[str, Path], family: str) -> None:
    """The two option orders of one row differ only in their last tokens: they go in one packed
    sequence, the features encoded once, with the numbers of separate sequences."""
    engine = HFEngine(str(tiny_models[family]), device="cpu")
    features = [f"- The age is {20 + i} years.\n- The occupation is baker number {i}.\n" * 3 for i in range(5)]
    prompts = [
        f"Data:\n{f}Question: Is the income high?\nA. {a}.\nB. {b}.\nAnswer:"
        for f in features
        for a, b in (("Yes", "No"), ("No", "Yes"))
    ]
    prompts.append("A short prompt unlike the others. Answer:")
    requests = [ChoiceRequest(p, ("A", "B")) for p in prompts]
    before = engine.counters.tokens
    together = engine.choice_probs(requests)
    packed_tokens = engine.counters.tokens - before
    alone = [engine.choice_probs([r])[0] for r in requests]
    separate_tokens = engine.counters.tokens - before - packed_tokens
    for t, a in zip(together, alone, strict=True):
        np.testing.assert_allclose(t.probs, a.probs, atol=1e-5)
        assert t.mass == pytest.approx(a.mass, abs=1e-5) and t.prefix == a.prefix
    assert packed_tokens < 0.7 * separate_tokens, (packed_tokens, separate_tokens)


def test_common_prefix_length_is_the_first_difference() -> None:
    """Halving slices finds the first differing token of two lists wherever it lies (first, last,
    none, one list the other's prefix), within the asked bound: checked against a token-by-token scan."""
    rng = np.random.default_rng(0)
    for _ in range(2000):
        a = rng.integers(0, 3, size=int(rng.integers(0, 40))).tolist()
        b = a[: int(rng.integers(0, len(a) + 1))] + rng.integers(0, 3, size=int(rng.integers(0, 5))).tolist()
        most = None if rng.random() < 0.5 else int(rng.integers(0, 45))
        scan = next((k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
        assert common_prefix_length(a, b, most) == (scan if most is None else min(scan, most)), (a, b, most)


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_a_batch_encodes_the_opening_its_rows_share_once(tiny_models: dict[str, Path], family: str) -> None:
    """Prompts that open with the same instruction (a task definition, a chat header) encode it
    once per batch, as a cache every row attends to, with the numbers of separate sequences."""
    engine = HFEngine(str(tiny_models[family]), device="cpu")
    opening = "Definition: Read what the survey says about a person and answer the question. " * 3
    prompts = [f"{opening}\nInput: person {i} works as a baker aged {20 + 3 * i}.\nOutput:" for i in range(6)]
    requests = [ContinuationRequest(p, (" yes", " no", " maybe not")) for p in prompts]
    before = engine.counters.tokens
    together = engine.continuation_scores(requests)
    used = engine.counters.tokens - before
    for req, res in zip(requests, together, strict=True):
        for cont, lp in zip(req.continuations, res.logprob, strict=True):
            assert lp == pytest.approx(fresh_logprob(engine, req.context, cont), abs=1e-5)
    separate = sum(len(engine.encode(p)) + 6 for p in prompts)
    assert used < 0.6 * separate, (used, separate)
    choices = [ChoiceRequest(p, ("A", "B")) for p in prompts]
    for t, a in zip(engine.choice_probs(choices), [engine.choice_probs([c])[0] for c in choices], strict=True):
        np.testing.assert_allclose(t.probs, a.probs, atol=1e-5)
    numeric = [p + f"{' padding' * i} 0." for i, p in enumerate(prompts)]  # uneven lengths: left padding
    before = engine.counters.tokens
    assert engine.numeric([NumericRequest(q) for q in numeric]) == [
        engine.numeric([NumericRequest(p)])[0] for p in numeric
    ]
    assert engine.counters.tokens - before < 1.6 * sum(len(engine.encode(p)) + 1 for p in numeric)


def test_attention_work_is_counted_per_causal_prefix(tiny_models: dict[str, Path]) -> None:
    """The counter behind attention FLOPs: each token attends to its own causal prefix (a
    continuation to the context and itself), a batch's shared opening counted once."""
    engine = HFEngine(str(tiny_models["llama"]), device="cpu")
    opening = "Definition: Read what the survey says about a person and answer the question. " * 2
    requests = [
        ContinuationRequest(f"{opening}Input: person {i} bakes bread.\nOutput:", (" yes", " no")) for i in range(4)
    ]

    def pairs(n: int, after: int = 0) -> int:  # tokens at positions after..n-1 attend position + 1 keys each
        return (n * (n + 1) - after * (after + 1)) // 2

    singles = []
    for req in requests:
        (ctx, yes), (_, no) = (engine.split_pair(req.context, c) for c in req.continuations)
        singles.append(pairs(len(ctx)) + pairs(len(ctx) + len(yes), len(ctx)) + pairs(len(ctx) + len(no), len(ctx)))
        before = engine.counters.attended
        engine.continuation_scores([req])
        assert engine.counters.attended - before == singles[-1]
    contexts = [engine.split_pair(r.context, " yes")[0] for r in requests]
    head = next(i for i, column in enumerate(zip(*contexts, strict=False)) if len(set(column)) > 1)
    before = engine.counters.attended
    engine.continuation_scores(requests)
    assert head >= 16 and engine.counters.attended - before == sum(singles) - 3 * pairs(head)
    prompt = "The probability is 0."
    before = engine.counters.attended
    engine.numeric([NumericRequest(prompt, steps=2)])  # the prompt, then the first digit fed back
    assert engine.counters.attended - before == pairs(len(engine.encode(prompt)) + 1)


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_no_request_kind_passes_a_keyword_transformers_deprecates(arch: str, tiny_models: dict[str, Path]) -> None:
    """transformers 5.24 renamed ``past_key_values=`` to ``cache=`` and 5.40 removes the old name;
    every request kind runs with transformers' FutureWarnings raised as errors."""
    import warnings

    from unsure.engine import WordSamplingRequest

    engine = HFEngine(str(tiny_models[arch]))
    opening = "Definition: answer with one word. " * 4  # a shared opening: its KV cache is built and reused
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        engine.continuation_scores(
            [ContinuationRequest(opening + c, k) for c, k in zip(CONTEXTS, CONTINUATIONS, strict=True)]
        )
        engine.choice_probs([ChoiceRequest(opening + c, ("A", "B")) for c in CONTEXTS])
        engine.numeric([NumericRequest(opening + "The probability is 0."), NumericRequest(opening + "It is 0.")])
        engine.generate([ReplyRequest(opening + "Say:", max_new_tokens=3)])
        engine.sample_words([WordSamplingRequest(opening + "The", n=20, seed=0, max_new_tokens=3)])


SYNCING = ("tolist", "item", "cpu", "numpy", "__bool__", "__int__", "__float__", "__index__")
"""Tensor methods that make the host wait for the device (on a GPU) before it can go on."""


def _syncs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every call of a synchronising tensor method from now on, by name."""
    calls: list[str] = []
    for name in SYNCING:
        real = getattr(torch.Tensor, name)

        def spy(self: torch.Tensor, *args: object, _real: object = real, _name: str = name) -> object:
            calls.append(_name)
            return _real(self, *args)  # type: ignore[operator]

        monkeypatch.setattr(torch.Tensor, name, spy)
    return calls


def test_the_host_waits_for_the_device_once_per_batch_not_per_row_or_step(
    tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Packed scoring reads each batch's results once, however many rows and reads it holds;
    greedy decoding reads its tokens once per batch, however many steps it takes."""
    engine = HFEngine(str(tiny_models["llama"]), token_budget=1 << 20)
    few = [ContinuationRequest(c, k) for c, k in zip(CONTEXTS, CONTINUATIONS, strict=True)]
    counts = []
    for requests in (few, few * 8):
        for kind in ("scores", "choices"):
            calls = _syncs(monkeypatch)
            if kind == "scores":
                engine.continuation_scores(requests)
            else:
                engine.choice_probs([ChoiceRequest(r.context, ("A", "B")) for r in requests])
            counts.append(len(calls))
            monkeypatch.undo()
    assert counts[:2] == counts[2:]  # 4 requests or 32, one batch: the same waits
    waits = []
    for steps in (1, 6):
        calls = _syncs(monkeypatch)
        engine.numeric([NumericRequest(p, steps=steps) for p in ("The probability is 0.", "It is 0.", "0.")])
        waits.append(len(calls))
        monkeypatch.undo()
    assert waits[0] == waits[1] <= 2


def test_warming_up_changes_no_number_and_no_counter(tiny_models: dict[str, Path]) -> None:
    """The warm-up a GPU engine runs at load (here asked for on the CPU) leaves the counters as they
    were and every request's numbers as a cold engine gives them."""
    from unsure.engine import WordSamplingRequest

    cold = HFEngine(str(tiny_models["llama"]), warm_up=False)
    warm = HFEngine(str(tiny_models["llama"]), warm_up=True)
    assert warm.counters == cold.counters
    for x, y in zip(cold.continuation_scores(REQUESTS), warm.continuation_scores(REQUESTS), strict=True):
        np.testing.assert_array_equal(x.logprob, y.logprob)
    assert cold.numeric([NumericRequest(q) for q in CONTEXTS]) == warm.numeric([NumericRequest(q) for q in CONTEXTS])
    draws = [WordSamplingRequest(CONTEXTS[0], n=50, seed=3, max_new_tokens=4)]
    assert cold.sample_words(draws) == warm.sample_words(draws)


def test_packed_items_of_every_shape_score_alike_in_one_call_and_alone(tiny_models: dict[str, Path]) -> None:
    """Scored continuations, ids read after a context, and tails read after a shared prefix, mixed
    in one call (one batch), give each item's numbers as it gets them alone."""
    from unsure.engine.forward import Packed

    engine = HFEngine(str(tiny_models["llama"]), token_budget=1 << 20)
    ids = [engine.encode(c + " and more words") for c in CONTEXTS]
    items = [
        Packed(ids[0], [ids[1][1:4], ids[2][1:2]]),
        Packed(ids[1], read_ids=[5, 7, 9]),
        Packed(ids[3][:3], [ids[3][3:], ids[0][1:5]], read_ids=[4, 6], read_tails=True),
        Packed(ids[2]),
        Packed(ids[0], [ids[3][1:3]], read_ids=[11]),
    ]
    together = engine.runner.run_packed(items)
    for item, got in zip(items, together, strict=True):
        (alone,) = engine.runner.run_packed([item])
        assert (
            len(got.token_logprobs) == len(alone.token_logprobs) == (0 if item.read_tails else len(item.continuations))
        )
        for x, y in zip(got.token_logprobs, alone.token_logprobs, strict=True):
            np.testing.assert_allclose(x, y, rtol=0, atol=1e-6)
        for x, y in zip(got.token_greedy, alone.token_greedy, strict=True):
            np.testing.assert_array_equal(x, y)
        np.testing.assert_allclose(got.read_logprobs, alone.read_logprobs, rtol=0, atol=1e-6)
        assert got.read_logprobs.shape == ((2, 2) if item.read_tails else (len(item.read_ids),))


def test_each_batch_is_laid_out_and_launched_before_the_previous_one_is_read(
    tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a GPU the host prepares batch k + 1 while the device runs batch k: the read of a batch's
    results (the one wait) comes after the next batch is queued."""
    from unsure.engine import forward

    engine = HFEngine(str(tiny_models["llama"]), token_budget=64)
    events: list[str] = []
    launch, fill = forward.Runner._launch, forward.Plan.results

    def spy_launch(self: forward.Runner, plan: forward.Plan, a: int, b: int) -> object:
        events.append(f"launch {id(plan)}:{a}")  # a batch: its plan (one per wave) and first item
        return launch(self, plan, a, b)

    def spy_fill(self: forward.Plan, done: forward._Launched) -> object:
        events.append(f"read {id(self)}:{done.a}")
        return fill(self, done)

    monkeypatch.setattr(forward.Runner, "_launch", spy_launch)
    monkeypatch.setattr(forward.Plan, "results", spy_fill)
    engine.continuation_scores(REQUESTS)
    starts = [e.split()[1] for e in events if e.startswith("launch")]
    assert len(starts) >= 3
    for first, second in itertools.pairwise(starts):
        assert events.index(f"launch {second}") < events.index(f"read {first}")


def test_each_wave_of_label_requests_is_tokenised_before_the_last_batch_of_the_wave_before_is_read(
    tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a GPU a call's requests are tokenised in waves of about two token budgets: the host tokenises
    wave k + 1 while the device runs the last batch of wave k, which is read after. The numbers are those
    of fresh forward passes."""
    from unsure.engine import forward, tokens

    engine = HFEngine(str(tiny_models["llama"]), token_budget=64)
    assert engine.runner.wave_tokens is None  # on a CPU, one wave: the host is the device
    engine.runner.wave_tokens = 2 * engine.runner.token_budget  # as on a GPU
    events: list[tuple[str, int]] = []
    split, fill = tokens.Codec.split_pairs, forward.Plan.results

    def spy_split(self: tokens.Codec, pairs: list[tuple[str, str]]) -> object:
        events.append(("tokenise", 0))
        return split(self, pairs)

    def spy_fill(self: forward.Plan, done: forward._Launched) -> object:
        events.append(("read", id(self)))
        return fill(self, done)

    monkeypatch.setattr(tokens.Codec, "split_pairs", spy_split)
    monkeypatch.setattr(forward.Plan, "results", spy_fill)
    got = engine.continuation_scores(REQUESTS * 2)
    waves = [n for n, (kind, _) in enumerate(events) if kind == "tokenise"]
    plans = list(dict.fromkeys(plan for kind, plan in events if kind == "read"))
    assert len(waves) == len(plans) >= 3
    for k in range(1, len(plans)):
        last_read = max(n for n, (kind, plan) in enumerate(events) if kind == "read" and plan == plans[k - 1])
        assert waves[k] < last_read
    monkeypatch.undo()
    for req, res in zip(REQUESTS * 2, got, strict=True):
        for cont, lp in zip(req.continuations, res.logprob, strict=True):
            assert lp == pytest.approx(fresh_logprob(engine, req.context, cont), abs=1e-5)


def test_continuation_summaries_cut_at_each_continuation_and_read_the_eos_apart() -> None:
    """A request's continuations are summed together (at each one's start); with ``eos`` each one's last
    token is the EOS, whose log-prob is read apart and whose greedy flag does not count."""
    plain = _continuation_scores(
        PackedResult(
            np.array([-1.0, -2.0, -0.5, -3.0, -0.25, -0.125]),
            np.array([True, True, False, True, False, True]),
            np.array([2, 1, 3]),
            np.empty(0),
        ),
        eos=False,
    )
    assert plain.logprob.tolist() == [-3.0, -0.5, -3.375] and plain.n_tokens.tolist() == [2, 1, 3]
    assert plain.greedy.tolist() == [True, False, False] and plain.eos_logprob is None
    ended = _continuation_scores(
        PackedResult(
            np.array([-1.0, -2.0, -9.0, -0.5, -8.0, -3.0, -0.25, -0.125, -7.0]),
            np.array([True, True, False, True, False, True, True, False, True]),
            np.array([3, 2, 4]),
            np.empty(0),
        ),
        eos=True,
    )
    assert ended.logprob.tolist() == [-3.0, -0.5, -3.375] and ended.n_tokens.tolist() == [2, 1, 3]
    assert ended.greedy.tolist() == [True, True, False]
    assert ended.eos_logprob is not None and ended.eos_logprob.tolist() == [-9.0, -8.0, -7.0]

"""Host work per token: what the engine does outside the model, per request kind.

    .venv/bin/python -m bench.host [--tokenizer ../shared/data/tokenizers/llama-3-8b-instruct] [--out FILE]

On a GPU the model's work runs asynchronously; whatever the host does per batch
(tokenising, laying out ids, positions and read indices, Python per row or per
decoding step) either overlaps it or leaves the device waiting. A 1B forward at
50% MFU on an H100 takes about 5.5 µs per token, an 8B one about 40 µs; host
work above that is the bound at 1B.

Here a 1-layer, 64-wide Llama with a real tokenizer (Llama-3's 128k vocabulary)
makes the model's share small, and the model's work is timed apart: the body's
forward, the output projection, the log-softmax and reads on its output, the
attention layout built from the host's segments, and the sampler's inverse CDF
(all of which a GPU runs). Times are the process's CPU seconds (``process_time``:
other processes on the machine do not count; the tokenizer's threads do), torch
on one thread. Host time is the total less the model's; the tokenizer's share
(its Rust core, spread over the host's cores on a larger machine) is given apart.
Prints, per request kind, host µs per token run (the run of median host time among ``--repeats``,
with the range over all), and writes the table to ``--out``.
"""

from __future__ import annotations

import argparse
import functools
import gc
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from bench.engine import NEW_TOKENS, acs_rows, sni_requests
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

from unsure.engine import (
    ChoiceRequest,
    ContinuationRequest,
    NumericRequest,
    WordSamplingRequest,
    decoding,
    forward,
    tokens,
)
from unsure.engine.hf import HFEngine
from unsure.generate.text import sentences
from unsure.riskscores.prompts import LETTERS, build_prompt
from unsure.riskscores.tasks import FOLKTABLES

TOKENIZER = Path(__file__).resolve().parents[2] / "shared/data/tokenizers/llama-3-8b-instruct"
DEVICE_WORK = (
    (forward.Runner, "logits"),
    (forward.Runner, "_reads"),
    (forward, "packed_mask"),
    (decoding, "_inverse_cdf"),
    (decoding, "prompt_mask"),
    (decoding, "greedy_pick"),
    (forward.Runner, "head_cache"),
    (decoding, "additive_mask"),
)
"""Functions whose time is the device's: each runs torch kernels on the model's output or
builds the attention layout from tensors already on the device."""
TOKENIZER_WORK = ((tokens.Codec, "_ids"), (tokens.Codec, "decode_many"))
"""The tokenizer's calls (its Rust core, which spreads a list over the host's cores), timed apart; the
engine's own work around them (cutting texts into lines, joining their ids) is the host's."""


def build_model(root: Path, tokenizer: Path) -> Path:
    """A 1-layer, 64-wide Llama over ``tokenizer``'s vocabulary, saved with it."""
    tok = AutoTokenizer.from_pretrained(tokenizer)
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=1,
        num_attention_heads=1,
        num_key_value_heads=1,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(root / "model")
    tok.save_pretrained(root / "model")
    return root / "model"


@dataclass
class Clock:
    """Seconds spent in device work, nested calls counted once."""

    seconds: float = 0.0
    depth: int = 0

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if self.depth:
                return fn(*args, **kwargs)
            self.depth += 1
            start = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.process_time() - start
                self.depth -= 1

        return timed


@contextmanager
def clocks(engine: HFEngine) -> Iterator[tuple[Clock, Clock]]:
    """Time the model's body with :data:`DEVICE_WORK`, and :data:`TOKENIZER_WORK`, while the block runs."""
    device, tokenizer = Clock(), Clock()
    saved = [(owner, name, getattr(owner, name), device) for owner, name in DEVICE_WORK]
    saved += [(owner, name, getattr(owner, name), tokenizer) for owner, name in TOKENIZER_WORK]
    body = engine.model.base_model
    for owner, name, fn, clock in saved:
        setattr(owner, name, clock.wrap(fn))
    body.forward = device.wrap(body.forward)
    try:
        yield device, tokenizer
    finally:
        for owner, name, fn, _ in saved:
            setattr(owner, name, fn)
        del body.forward


@dataclass
class Host:
    """One workload's run: CPU seconds in all, in the model's work and in the tokenizer; tokens run."""

    kind: str
    wall: float
    device: float
    tokenizer: float
    tokens: int

    @property
    def host(self) -> float:
        return self.wall - self.device

    def per_token(self, seconds: float) -> float:
        return 1e6 * seconds / self.tokens


def measure(engine: HFEngine, kind: str, run: Callable[[], object], repeats: int) -> list[Host]:
    """``repeats`` runs after a first (which warms caches and the tokenizer's state), in order."""
    run()
    out = []
    for _ in range(repeats):
        tokens = engine.counters.tokens
        with clocks(engine) as (device, tokenizer):
            start = time.process_time()
            run()
            wall = time.process_time() - start
        out.append(Host(kind, wall, device.seconds, tokenizer.seconds, engine.counters.tokens - tokens))
    return out


def workloads(engine: HFEngine, root: Path, rows: int, contexts: int, samples: int, repeats: int) -> list[list[Host]]:
    """The engine's four request kinds, on requests built beforehand (the studies' prompt
    building is not the engine's host work)."""
    task = FOLKTABLES["ACSIncome"]
    _, text = acs_rows(root, rows)
    choices = [
        ChoiceRequest(build_prompt(task, t, "multiple_choice", order, year=2018, protocol="paper"), LETTERS)
        for order in (0, 1)
        for t in text
    ]
    numeric = [NumericRequest(build_prompt(task, t, "numeric", 0, year=2018, protocol="paper")) for t in text]
    labels = [ContinuationRequest(c, ks) for c, ks in sni_requests(contexts)]
    shared = [ContinuationRequest(c, ks) for c, ks in sni_requests(contexts, tasks=max(1, contexts // 8))]
    prompts = [" ".join(s.split()[:6]) for s in sentences(8, seed=3)]
    draws = [WordSamplingRequest(p, n=samples, seed=i, max_new_tokens=NEW_TOKENS) for i, p in enumerate(prompts)]
    return [
        measure(engine, "risk scores", lambda: engine.choice_probs(choices), repeats),
        measure(engine, "label scores", lambda: engine.continuation_scores(labels), repeats),
        measure(engine, "label scores, 8 prompts a task", lambda: engine.continuation_scores(shared), repeats),
        measure(engine, "numeric answers", lambda: engine.numeric(numeric), repeats),
        measure(engine, "word sampling", lambda: engine.sample_words(draws), repeats),
    ]


def table(results: list[list[Host]], budget: int) -> str:
    """Per request kind, the run of median host time, and the range of host µs per token over all runs."""
    runs = len(results[0])
    lines = [
        f"| request kind | tokens run | CPU s | model s | host s | of which tokenizer s "
        f"| host µs/token | range over {runs} runs | tokenizer µs/token | rest µs/token (budget {budget:,}) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for kind in results:
        r = sorted(kind, key=lambda h: h.host)[(len(kind) - 1) // 2]
        spread = [h.per_token(h.host) for h in kind]
        lines.append(
            f"| {r.kind} | {r.tokens:,} | {r.wall:.3f} | {r.device:.3f} | {r.host:.3f} | {r.tokenizer:.3f} "
            f"| {r.per_token(r.host):.2f} | {min(spread):.2f}-{max(spread):.2f} | {r.per_token(r.tokenizer):.2f} "
            f"| {r.per_token(r.host - r.tokenizer):.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokenizer", type=Path, default=TOKENIZER)
    parser.add_argument("--rows", type=int, default=256, help="ACS rows (risk scores, numeric answers)")
    parser.add_argument("--contexts", type=int, default=128, help="SNI-style label prompts")
    parser.add_argument("--samples", type=int, default=1000, help="word samples per context (8 contexts)")
    parser.add_argument("--budget", type=int, default=16_384, help="token budget (a GPU's by default)")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per request kind, after a first")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(1)  # the host's own work, not the model's, is what this measures
    # The imports frozen out of the garbage collector, as every rule job has them (unsure.logs.logged):
    # unfrozen, a full collection walks their millions of objects (about 0.3 s) wherever it falls.
    gc.freeze()
    with tempfile.TemporaryDirectory() as tmp:
        path = build_model(Path(tmp), args.tokenizer)
        engine = HFEngine(str(path), device="cpu", dtype="float32", token_budget=args.budget)
        engine.runner.wave_tokens = forward.wave_tokens(torch.device("cuda"), args.budget)  # as on a GPU
        results = workloads(engine, Path(tmp), args.rows, args.contexts, args.samples, args.repeats)
    text = table(results, args.budget)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()

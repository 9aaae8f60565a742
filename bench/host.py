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
(all of which a GPU runs). Host time is the wall time less those. Prints, per
request kind, host µs per token run (and for sampling, host seconds), and writes
them as a Markdown table to ``--out``.
"""

from __future__ import annotations

import argparse
import functools
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

from unsure.engine import ContinuationRequest, WordSamplingRequest, decoding, forward
from unsure.engine.hf import HFEngine
from unsure.generate.text import sentences
from unsure.riskscores.scoring import make_scorer
from unsure.riskscores.tasks import FOLKTABLES

TOKENIZER = Path(__file__).resolve().parents[2] / "shared/data/tokenizers/llama-3-8b-instruct"
DEVICE_WORK = (
    (forward.Runner, "logits"),
    (forward.Runner, "_reads"),
    (forward.Runner, "_packed_mask"),
    (decoding, "_inverse_cdf"),
)
"""Functions whose time is the device's: each runs torch kernels on the model's output or
builds the attention layout from tensors already on the device."""


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
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start
                self.depth -= 1

        return timed


@contextmanager
def device_clock(engine: HFEngine) -> Iterator[Clock]:
    """Time the model's body and :data:`DEVICE_WORK` while the block runs."""
    clock = Clock()
    saved = [(owner, name, getattr(owner, name)) for owner, name in DEVICE_WORK if hasattr(owner, name)]
    body = engine.model.base_model
    for owner, name, fn in saved:
        setattr(owner, name, clock.wrap(fn))
    body.forward = clock.wrap(body.forward)
    try:
        yield clock
    finally:
        for owner, name, fn in saved:
            setattr(owner, name, fn)
        del body.forward


@dataclass
class Host:
    """One workload's run: wall seconds, device seconds, tokens run through the model."""

    kind: str
    wall: float
    device: float
    tokens: int

    @property
    def host_us_per_token(self) -> float:
        return 1e6 * (self.wall - self.device) / self.tokens


def measure(engine: HFEngine, kind: str, run: Callable[[], object]) -> Host:
    """The second of two runs (the first warms caches and the tokenizer's state)."""
    run()
    tokens = engine.counters.tokens
    with device_clock(engine) as clock:
        start = time.perf_counter()
        run()
        wall = time.perf_counter() - start
    return Host(kind, wall, clock.seconds, engine.counters.tokens - tokens)


def workloads(engine: HFEngine, root: Path, rows: int, contexts: int, samples: int) -> list[Host]:
    task = FOLKTABLES["ACSIncome"]
    table, text = acs_rows(root, rows)
    scored = table.assign(text=text.to_numpy())
    risk = make_scorer(engine, task, "multiple_choice", year=2018, instruct=False, both_orders=True, protocol="paper")
    numeric = make_scorer(engine, task, "numeric", year=2018, instruct=False, both_orders=False, protocol="paper")
    labels = [ContinuationRequest(c, ks) for c, ks in sni_requests(contexts)]
    prompts = [" ".join(s.split()[:6]) for s in sentences(8, seed=3)]
    draws = [WordSamplingRequest(p, n=samples, seed=i, max_new_tokens=NEW_TOKENS) for i, p in enumerate(prompts)]
    return [
        measure(engine, "risk scores", lambda: risk(scored)),
        measure(engine, "label scores", lambda: engine.continuation_scores(labels)),
        measure(engine, "numeric answers", lambda: numeric(scored)),
        measure(engine, "word sampling", lambda: engine.sample_words(draws)),
    ]


def table(results: list[Host], budget: int) -> str:
    lines = [
        f"| request kind | tokens run | wall s | model s | host s | host µs/token (budget {budget:,}) |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.kind} | {r.tokens:,} | {r.wall:.3f} | {r.device:.3f} | {r.wall - r.device:.3f} "
            f"| {r.host_us_per_token:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokenizer", type=Path, default=TOKENIZER)
    parser.add_argument("--rows", type=int, default=256, help="ACS rows (risk scores, numeric answers)")
    parser.add_argument("--contexts", type=int, default=128, help="SNI-style label prompts")
    parser.add_argument("--samples", type=int, default=1000, help="word samples per context (8 contexts)")
    parser.add_argument("--budget", type=int, default=16_384, help="token budget (a GPU's by default)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(1)  # the host's own work, not the model's, is what this measures
    with tempfile.TemporaryDirectory() as tmp:
        path = build_model(Path(tmp), args.tokenizer)
        engine = HFEngine(str(path), device="cpu", dtype="float32", token_budget=args.budget)
        results = workloads(engine, Path(tmp), args.rows, args.contexts, args.samples)
    text = table(results, args.budget)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()

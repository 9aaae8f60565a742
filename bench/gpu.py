"""The engine on a GPU, against its peers on the same device and weights, with MFU per request kind.

    python bench/gpu.py [--device cuda] [--shapes 1b 8b] [--tokenizer DIR] [--out docs/engine-gpu.md]
    bash bench/gpu_run.sh          # on a GPU machine with no network, with the wheels of bench/gpu_wheels.sh

For each shape it builds random bf16 Llama weights directly on the device
(``LlamaForCausalLM`` from a ``LlamaConfig`` with the tokenizer's vocabulary
and BOS/EOS ids), saves them with the tokenizer into a temporary folder, and
loads them back by path, as the engine and lm-evaluation-harness load a model:

- ``1b``: Llama-3.2-1B (hidden 2048, 16 layers, 32 heads, 8 KV heads, MLP 8192,
  untied output projection);
- ``8b``: Llama-3-8B (hidden 4096, 32 layers, 32 heads, 8 KV heads, MLP 14336);
- ``tiny``: hidden 64, 2 layers, for the CPU test.

On the four workloads of ``bench/engine.py`` (ACSIncome risk scores under
``protocol: paper``, both option orders; SNI-style label scores; word sampling,
contexts x samples x 5 tokens; numeric answers) it times :class:`HFEngine`
(bf16 on a GPU, float32 on a CPU) twice, the first call and the steady second
call, and counts its model FLOPs from ``engine.counters`` as ``bench/engine.py``
does (:class:`ModelFlops`); MFU is that over the device's measured matmul peak
(bf16 8192^3 on a GPU, float32 1024^3 on a CPU). On the same device and weights
it times the peers as their users run them: folktexts
``TransformersLLMClassifier.predict_proba`` (batch 16, on the engine's loaded
model), lm-eval ``HFLM.loglikelihood`` (batch 16 and 64, loaded by path with
``add_bos_token=True``: handed a loaded model it ignores that flag) and HF
``generate(do_sample=True, num_return_sequences=n)`` on the engine's model.

Agreement: the engine and each scoring peer against a float32 forward of the
same weights (the engine loaded in float32 on the same device), on the first
``--reference-rows`` requests, so that bf16 rounding and real differences are
told apart; word sampling against ``generate`` by a chi-square test of equal
word distributions. Writes a Markdown table to ``--out`` and the same figures
as JSON beside it (``.json``), which ``bench/scale.py`` reads for its MFU per
request kind and shape. Downloads nothing.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import logging
import math
import os
import platform
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine import NEW_TOKENS, ModelFlops, Timed, acs_rows, sni_requests, timed  # bench/engine.py

from unsure.engine import ContinuationRequest, NumericRequest, WordSamples, WordSamplingRequest
from unsure.engine.hf import HFEngine
from unsure.engine.words import first_word
from unsure.generate.text import sentences
from unsure.riskscores.prompts import build_prompt
from unsure.riskscores.scoring import make_scorer
from unsure.riskscores.tasks import FOLKTABLES

REPO = Path(__file__).resolve().parents[1]
DEFAULT_TOKENIZER = REPO.parent / "shared" / "data" / "tokenizers" / "llama-3-8b-instruct"
DEFAULT_OUT = REPO / "docs" / "engine-gpu.md"

SHAPES: dict[str, dict[str, int]] = {
    "tiny": {
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 192,
    },
    "1b": {  # Llama-3.2-1B (its output projection untied here)
        "hidden_size": 2048,
        "num_hidden_layers": 16,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 8192,
    },
    "8b": {  # Llama-3-8B
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 14336,
    },
}
"""Model shapes by name; every one has Llama-3's RoPE base and an untied output projection."""

WORKLOADS: dict[str, tuple[str, str]] = {
    "risk_scores": ("risk scores, ACSIncome, both orders", "rows/s"),
    "label_scores": ("label scores, 8 demos, 2-10 labels", "requests/s"),
    "word_sampling": ("word sampling, 5 new tokens", "words/s"),
    "numeric": ("numeric answers", "rows/s"),
}
"""The request kinds timed, as ``bench/scale.py`` names them: (what, rate unit)."""

TASK = FOLKTABLES["ACSIncome"]
YEAR = 2018
CHI_SQUARE_MIN = 5
"""Words seen fewer times than this (both sides together) are pooled in the chi-square test."""

log = logging.getLogger("bench.gpu")


# --------------------------------------------------------------------------- device


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def free(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return str(torch.cuda.get_device_name(device))
    return f"CPU ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


def matmul_peak(device: torch.device) -> tuple[float, str]:
    """FLOP/s of a large matmul on the device: bf16 8192^3 on a GPU, float32 1024^3 on a CPU."""
    n, dtype = (8192, torch.bfloat16) if device.type == "cuda" else (1024, torch.float32)
    gen = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, device=device, dtype=dtype, generator=gen)
    b = torch.randn(n, n, device=device, dtype=dtype, generator=gen)
    for _ in range(3):
        a @ b
    sync(device)
    reps = 10
    start = time.perf_counter()
    for _ in range(reps):
        a @ b
    sync(device)
    seconds = time.perf_counter() - start
    return 2 * n**3 * reps / seconds, f"{str(dtype).removeprefix('torch.')} {n}^3"


def build_weights(shape: str, tokenizer: Path, device: torch.device, root: Path) -> tuple[Path, float]:
    """Random bf16 weights of ``shape``, made on ``device``, saved with the tokenizer; (folder, seconds)."""
    start = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(tokenizer)
    config = LlamaConfig(
        vocab_size=len(tok),
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        tie_word_embeddings=False,
        max_position_embeddings=8192,
        rope_parameters={"rope_type": "default", "rope_theta": 500_000.0},
        **SHAPES[shape],
    )
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    path = root / f"llama-{shape}"
    model.save_pretrained(path)
    tok.save_pretrained(path)
    del model
    free(device)
    return path, time.perf_counter() - start


# --------------------------------------------------------------------------- inputs and engine runs


@dataclass
class Inputs:
    """The workloads' requests, identical for every side."""

    rows: pd.DataFrame
    """ACSIncome rows with their feature text (``text``) in folktexts' words."""
    numeric_rows: pd.DataFrame
    sni: list[tuple[str, tuple[str, ...]]]
    contexts: list[str]
    samples: int


def make_inputs(root: Path, args: argparse.Namespace) -> Inputs:
    n = max(args.rows, args.numeric, args.folktexts_rows)
    rows, text = acs_rows(root, n)
    rows = rows.assign(text=text.to_numpy())
    return Inputs(
        rows=rows.head(args.rows),
        numeric_rows=rows.head(args.numeric),
        sni=sni_requests(args.labels),
        contexts=[" ".join(s.split()[:6]) for s in sentences(args.contexts, seed=3)],  # bench/engine.py's
        samples=args.samples,
    )


def risk_scores(engine: HFEngine, rows: pd.DataFrame) -> np.ndarray:
    score = make_scorer(engine, TASK, "multiple_choice", year=YEAR, instruct=False, both_orders=True, protocol="paper")
    p_hat: np.ndarray = score(rows)["p_hat"].to_numpy(dtype=np.float64)
    return p_hat


def numeric_scores(engine: HFEngine, rows: pd.DataFrame) -> np.ndarray:
    score = make_scorer(engine, TASK, "numeric", year=YEAR, instruct=False, both_orders=False, protocol="paper")
    p_hat: np.ndarray = score(rows)["p_hat"].to_numpy(dtype=np.float64)
    return p_hat


def label_scores(engine: HFEngine, sni: Sequence[tuple[str, tuple[str, ...]]]) -> np.ndarray:
    """Every label's log-likelihood, requests in order, labels in order (lm-eval's instance order)."""
    scores = engine.continuation_scores([ContinuationRequest(c, labels) for c, labels in sni])
    return np.array([float(v) for s in scores for v in s.logprob], dtype=np.float64)


def word_samples(engine: HFEngine, contexts: Sequence[str], n: int) -> list[WordSamples]:
    requests = [WordSamplingRequest(c, n=n, seed=i, max_new_tokens=NEW_TOKENS) for i, c in enumerate(contexts)]
    results: list[WordSamples] = engine.sample_words(requests)
    return results


def decoding_share(engine: HFEngine, rows: pd.DataFrame) -> dict[str, float]:
    """Seconds of numeric answers with 1 and with 2 greedy steps on the same prompts (steady calls), and the
    second step's share: the decoding that a static KV cache with CUDA graphs could speed up. The first
    step is the prompts' forward and a pick; the second feeds one token per row through the KV cache."""
    prompts = [build_prompt(TASK, text, "numeric", 0, year=YEAR, protocol="paper") for text in rows["text"]]
    seconds = {}
    for steps in (1, 2):
        requests = [NumericRequest(p, steps=steps) for p in prompts]
        seconds[steps] = twice(engine, partial(engine.numeric, requests))[2].seconds
    return {"one_step_s": seconds[1], "two_steps_s": seconds[2], "share": 1 - seconds[1] / seconds[2]}


def twice(engine: HFEngine, run: Callable[[], Any]) -> tuple[Any, Timed, Timed]:
    """The output, the first call's run and the steady (second) call's run."""

    def synced() -> Any:
        out = run()
        sync(engine.device)
        return out

    _, first = timed(engine, synced)
    out, steady = timed(engine, synced)
    return out, first, steady


# --------------------------------------------------------------------------- peers


def folktexts_scores(engine: HFEngine, path: Path, rows: pd.DataFrame) -> tuple[np.ndarray, float, bool]:
    """folktexts' risk scores on the engine's loaded model (batch 16): (scores, seconds, prompts equal)."""
    from folktexts.acs.acs_tasks import acs_income_task
    from folktexts.classifier.transformers_classifier import TransformersLLMClassifier
    from folktexts.llm_utils import add_pad_token
    from folktexts.prompting import encode_row_prompt

    ours = build_prompt(TASK, rows["text"].iloc[0], "multiple_choice", 0, year=YEAR, protocol="paper")
    same = ours == encode_row_prompt(rows.iloc[0], acs_income_task, question=acs_income_task.multiple_choice_qa)
    tok = AutoTokenizer.from_pretrained(path)
    add_pad_token(tok)  # folktexts pads its batches; Llama-3's tokenizer has no pad token
    peer = TransformersLLMClassifier(
        engine.model, tok, acs_income_task, correct_order_bias=True, batch_size=16, context_size=2048
    )
    logging.disable(logging.WARNING)  # it warns per row of the random weights' low mass on A/B
    try:
        start = time.perf_counter()
        scores = peer.predict_proba(rows[list(TASK.features)])[:, 1]
        sync(engine.device)
        seconds = time.perf_counter() - start
    finally:
        logging.disable(logging.NOTSET)
    return np.asarray(scores, dtype=np.float64), seconds, same


def lm_eval_scores(
    path: Path, device: torch.device, dtype: str, sni: Sequence[tuple[str, tuple[str, ...]]], batch: int
) -> tuple[np.ndarray, float]:
    """lm-eval's log-likelihoods of every label, loaded by path as its users load it: (scores, seconds)."""
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    harness = HFLM(pretrained=str(path), device=str(device), dtype=dtype, batch_size=batch, add_bos_token=True)
    requests = [Instance("loglikelihood", {}, (c, k), i) for i, (c, ks) in enumerate(sni) for k in ks]
    try:
        start = time.perf_counter()
        scores = [ll for ll, _ in harness.loglikelihood(requests, disable_tqdm=True)]
        sync(device)
        seconds = time.perf_counter() - start
    finally:
        del harness
        free(device)
    return np.array(scores, dtype=np.float64), seconds


def generate_words(engine: HFEngine, contexts: Sequence[str], n: int) -> tuple[Counter[str], float]:
    """HF ``generate`` on the engine's model, one call per context with ``n`` return sequences, reduced to
    first words as the engine reduces a reply: (context|word counts, seconds).

    Each context starts from the token ids the engine runs (with Llama-3's BOS, which its tokenizer does
    not add to plain text), so that the test compares the samplers, not the tokenisation.
    """
    model, tok = engine.model, engine.tokenizer
    eos = tok.eos_token_id
    counts: Counter[str] = Counter()
    torch.manual_seed(0)
    start = time.perf_counter()
    for context in contexts:
        ids = torch.tensor([engine.encode(context)], device=engine.device)
        with torch.inference_mode():
            out = model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                do_sample=True,
                num_return_sequences=n,
                max_new_tokens=NEW_TOKENS,
                top_k=0,
                pad_token_id=eos,
            )
        new = out[:, ids.shape[1] :]
        finished = (new == eos).any(dim=1).tolist()
        for text, done in zip(tok.batch_decode(new, skip_special_tokens=True), finished, strict=True):
            word, settled = first_word(text, finished=bool(done))
            counts[f"{context}|{word if settled else None}"] += 1
    sync(engine.device)
    return counts, time.perf_counter() - start


def engine_words(contexts: Sequence[str], results: Sequence[WordSamples]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for context, res in zip(contexts, results, strict=True):
        for word in res.words:
            counts[f"{context}|{word}"] += 1
        counts[f"{context}|None"] += res.rejected
    return counts


def chi_square_p(contexts: Sequence[str], theirs: Counter[str], ours: Counter[str]) -> float:
    """Bonferroni-corrected smallest p-value over contexts of the test that both word distributions are one."""
    from scipy.stats import chi2_contingency

    pvalues = []
    for context in contexts:
        keys = sorted(k for k in theirs.keys() | ours.keys() if k.startswith(context + "|"))
        table = np.array([[theirs[k], ours[k]] for k in keys], dtype=float)
        big = table.sum(axis=1) >= CHI_SQUARE_MIN
        table = np.vstack([table[big], table[~big].sum(axis=0, keepdims=True)])
        table = table[table.sum(axis=1) > 0]
        if len(table) > 1:
            pvalues.append(float(chi2_contingency(table)[1]))
    return min(1.0, min(pvalues) * len(pvalues)) if pvalues else 1.0


# --------------------------------------------------------------------------- one shape


def agreement(values: np.ndarray, reference: np.ndarray) -> dict[str, float | int]:
    """Max and median |values - reference| over the requests both have."""
    n = min(len(values), len(reference))
    diff = np.abs(np.asarray(values[:n], dtype=np.float64) - np.asarray(reference[:n], dtype=np.float64))
    if not n:
        return {"n": 0, "max": math.nan, "median": math.nan}
    return {"n": int(n), "max": float(diff.max()), "median": float(np.median(diff))}


@dataclass
class Peer:
    name: str
    rate: float | None = None
    agreement: dict[str, float | int] | None = None
    note: str = ""


@dataclass
class Workload:
    kind: str
    count: int
    """Rows, requests or words per call (the rate's numerator)."""
    first: Timed
    steady: Timed
    agreement: dict[str, float | int] | None = None
    peers: list[Peer] = field(default_factory=list)


def run_peer(name: str, what: Callable[[], Peer]) -> Peer:
    """A peer's result, or its error in the table rather than a lost run."""
    try:
        with stage(f"peer {name}"):
            return what()
    except Exception as err:
        traceback.print_exc()
        return Peer(name, note=f"failed: {type(err).__name__}: {str(err).splitlines()[0][:120] if str(err) else ''}")


@contextmanager
def stage(what: str) -> Iterator[None]:
    start, cpu = time.perf_counter(), time.process_time()
    log.info("%s ...", what)
    yield
    log.info("%s: %.1f s (%.1f s of CPU time)", what, time.perf_counter() - start, time.process_time() - cpu)


def bench_shape(shape: str, args: argparse.Namespace, device: torch.device, root: Path) -> dict[str, Any]:
    """Every workload, peer and reference on one shape: its JSON record."""
    dtype = args.dtype if args.dtype != "auto" else ("bfloat16" if device.type == "cuda" else "float32")
    with stage(f"{shape}: random weights on {device}"):
        path, build_s = build_weights(shape, args.tokenizer, device, root)
    inputs = make_inputs(root, args)
    with stage(f"{shape}: engine load ({dtype})"):
        start = time.perf_counter()
        engine = HFEngine(str(path), dtype=dtype, device=str(device))
        load_s = time.perf_counter() - start
    flops = ModelFlops.of(engine.model)
    params = sum(p.numel() for p in engine.model.parameters())
    out: dict[str, Workload] = {}

    with stage(f"{shape}: engine, risk scores x2"):
        p_risk, first, steady = twice(engine, lambda: risk_scores(engine, inputs.rows))
        out["risk_scores"] = Workload("risk_scores", len(inputs.rows), first, steady)
    with stage(f"{shape}: engine, label scores x2"):
        ll, first, steady = twice(engine, lambda: label_scores(engine, inputs.sni))
        out["label_scores"] = Workload("label_scores", len(inputs.sni), first, steady)
    with stage(f"{shape}: engine, word sampling x2"):
        words, first, steady = twice(engine, lambda: word_samples(engine, inputs.contexts, inputs.samples))
        out["word_sampling"] = Workload("word_sampling", len(inputs.contexts) * inputs.samples, first, steady)
    with stage(f"{shape}: engine, numeric x2"):
        p_num, first, steady = twice(engine, lambda: numeric_scores(engine, inputs.numeric_rows))
        out["numeric"] = Workload("numeric", len(inputs.numeric_rows), first, steady)
    with stage(f"{shape}: engine, numeric with 1 and 2 greedy steps"):
        decoding = decoding_share(engine, inputs.numeric_rows)

    budgets: dict[str, float] = {}
    chosen = engine.token_budget
    for budget in args.budgets:
        with stage(f"{shape}: risk scores at token budget {budget:,}"):
            engine.token_budget = budget
            budgets[str(budget)] = len(inputs.rows) / timed(engine, lambda: risk_scores(engine, inputs.rows))[1].seconds
    engine.token_budget = chosen

    folk: np.ndarray | None = None
    if shape in args.skip_folktexts_at or args.folktexts_rows == 0:
        out["risk_scores"].peers.append(Peer("folktexts predict_proba (batch 16)", note="skipped"))
    else:

        def folktexts() -> Peer:
            nonlocal folk
            rows = inputs.rows.head(args.folktexts_rows) if args.folktexts_rows else inputs.rows
            folk, seconds, same = folktexts_scores(engine, path, rows)
            note = f"{len(rows)} rows" + ("" if same else "; its prompts differ from ours")
            return Peer("folktexts predict_proba (batch 16)", len(rows) / seconds, note=note)

        out["risk_scores"].peers.append(run_peer("folktexts", folktexts))

    harness: dict[int, np.ndarray] = {}
    for batch in args.lm_eval_batch_sizes:

        def lm_eval(batch: int = batch) -> Peer:
            harness[batch], seconds = lm_eval_scores(path, device, dtype, inputs.sni, batch)
            return Peer(f"lm-eval loglikelihood (batch {batch})", len(inputs.sni) / seconds)

        out["label_scores"].peers.append(run_peer(f"lm-eval batch {batch}", lm_eval))

    def generate() -> Peer:
        theirs, seconds = generate_words(engine, inputs.contexts, inputs.samples)
        p = chi_square_p(inputs.contexts, theirs, engine_words(inputs.contexts, words))
        return Peer("HF generate", len(inputs.contexts) * inputs.samples / seconds, note=f"chi-square p {p:.2f}")

    out["word_sampling"].peers.append(run_peer("generate", generate))
    out["numeric"].peers.append(Peer("none", note="no peer answers it"))

    # the float32 reference: the same weights, the engine in float32 on the same device
    n_ref = args.reference_rows
    reference = engine
    if engine.dtype != torch.float32:
        del engine
        free(device)
        with stage(f"{shape}: float32 reference load"):
            reference = HFEngine(str(path), dtype="float32", device=str(device))
    with stage(f"{shape}: float32 reference, {n_ref} requests per workload"):
        ref_risk = risk_scores(reference, inputs.rows.head(n_ref))
        ref_ll = label_scores(reference, inputs.sni[:n_ref])
        ref_num = numeric_scores(reference, inputs.numeric_rows.head(n_ref))
    del reference
    free(device)
    out["risk_scores"].agreement = agreement(p_risk, ref_risk)
    out["label_scores"].agreement = agreement(ll, ref_ll)
    out["numeric"].agreement = agreement(p_num, ref_num)
    for peer in out["risk_scores"].peers:
        if folk is not None and peer.rate is not None:
            peer.agreement = agreement(folk, ref_risk)
    for batch, peer in zip(args.lm_eval_batch_sizes, out["label_scores"].peers, strict=True):
        if batch in harness:
            peer.agreement = agreement(harness[batch], ref_ll)

    def mfu(run: Timed) -> float:
        return float(run.flops(flops) / run.seconds / args.peak)

    return {
        "config": SHAPES[shape],
        "parameters": params,
        "body_parameters": flops.dense,
        "dtype": dtype,
        "build_seconds": build_s,
        "load_seconds": load_s,
        "workloads": {
            kind: {
                "what": WORKLOADS[kind][0],
                "unit": WORKLOADS[kind][1],
                "count": w.count,
                "first": {"seconds": w.first.seconds, "rate": w.count / w.first.seconds, "mfu": mfu(w.first)},
                "steady": {"seconds": w.steady.seconds, "rate": w.count / w.steady.seconds, "mfu": mfu(w.steady)},
                "tokens": w.steady.tokens,
                "agreement": w.agreement,
                "peers": [{"name": p.name, "rate": p.rate, "agreement": p.agreement, "note": p.note} for p in w.peers],
            }
            for kind, w in out.items()
        },
        "budgets": budgets,
        "decoding": decoding,
    }


# --------------------------------------------------------------------------- the table


def _diff(a: dict[str, Any] | None) -> str:
    return "—" if not a or not a["n"] else f"{a['max']:.1e} / {a['median']:.1e} (n={a['n']})"


def _rate(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def markdown(result: dict[str, Any]) -> str:
    lines = [
        f"# The engine on {result['device']}",
        "",
        f"Written by `bench/gpu.py` on {result['date']}: {result['device']}, matmul peak measured "
        f"{result['peak_tflops']:.4g} TFLOP/s ({result['peak_what']}), torch {result['torch']}, transformers "
        f"{result['transformers']}, tokenizer `{result['tokenizer']}` ({result['vocab_size']:,} tokens). Random "
        "weights built on the device; the engine and the peers run them on the same device; MFU counts the "
        "body's matmuls on every token run, the output projection where logits are read and attention on each "
        "token's causal prefix. Agreement: max / median |difference| from a float32 forward of the same weights "
        "(the engine in float32 on the same device); risk and numeric scores as probabilities, label scores as "
        "log-likelihoods.",
        "",
        f"Sizes: {result['sizes']}.",
        "",
        "| shape | workload | engine, first call | engine, steady | MFU first / steady | engine vs float32 "
        "| peer | peer rate | engine / peer | peer vs float32 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for shape, rec in result["shapes"].items():
        for w in rec["workloads"].values():
            first, steady = w["first"], w["steady"]
            head = (
                f"| {shape} | {w['what']} ({w['unit']}) | {_rate(first['rate'])} | {_rate(steady['rate'])} "
                f"| {first['mfu']:.1%} / {steady['mfu']:.1%} | {_diff(w['agreement'])} "
            )
            for i, p in enumerate(w["peers"]):
                rate = "—" if p["rate"] is None else _rate(p["rate"])
                ratio = "—" if not p["rate"] else f"{steady['rate'] / p['rate']:.2g}x"
                name = p["name"] + (f" ({p['note']})" if p["note"] else "")
                lead = head if i == 0 else "| | | | | | "
                lines.append(f"{lead}| {name} | {rate} | {ratio} | {_diff(p['agreement'])} |")
    sweeps = {s: r["budgets"] for s, r in result["shapes"].items() if r["budgets"]}
    if sweeps:
        budgets = sorted({int(b) for b in next(iter(sweeps.values()))})
        lines += ["", "Token budget sweep (risk scores, rows/s):", ""]
        lines += ["| shape | " + " | ".join(f"{b:,}" for b in budgets) + " |", "|---|" + "---|" * len(budgets)]
        for shape, rates in sweeps.items():
            lines.append(f"| {shape} | " + " | ".join(_rate(rates[str(b)]) for b in budgets) + " |")
    lines += ["", "Model FLOP utilisation per request kind (steady), as `bench/scale.py` reads it:", ""]
    kinds = list(WORKLOADS)
    lines += ["| shape | parameters | " + " | ".join(kinds) + " |", "|---|---|" + "---|" * len(kinds)]
    for shape, rec in result["shapes"].items():
        cells = " | ".join(f"{result['mfu'][shape][k]:.1%}" for k in kinds)
        lines.append(f"| {shape} | {rec['parameters'] / 1e9:.3g}B | {cells} |")
    shares = ", ".join(f"{shape} {rec['decoding']['share']:.0%}" for shape, rec in result["shapes"].items())
    lines += [
        "",
        f"Decoding's share of numeric answers (steady; the same prompts with 1 and 2 greedy steps): {shares}. "
        "The second step feeds one token per row through the KV cache: the most that a static KV cache with "
        "CUDA graphs could take off numeric answers.",
    ]
    lines += ["", f"Run: `{result['command']}` ({result['seconds']:.0f} s in all)."]
    return "\n".join(lines) + "\n"


def write(result: dict[str, Any], out: Path) -> None:
    """The Markdown table at ``out`` and the JSON record beside it, each written atomically."""
    out.parent.mkdir(parents=True, exist_ok=True)
    for target, text in ((out, markdown(result)), (out.with_suffix(".json"), json.dumps(result, indent=1) + "\n")):
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, target)


# --------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--tokenizer", type=Path, default=DEFAULT_TOKENIZER, help="a real tokenizer folder")
    parser.add_argument("--shapes", nargs="+", choices=list(SHAPES), default=["1b", "8b"])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the Markdown table; its .json beside it")
    parser.add_argument("--dtype", choices=("auto", "bfloat16", "float32"), default="auto",
                        help="the engine's and the peers' dtype (auto: bfloat16 on cuda, float32 on cpu)")  # fmt: skip
    parser.add_argument("--rows", type=int, default=512, help="risk scores: ACSIncome rows")
    parser.add_argument("--labels", type=int, default=256, help="label scores: SNI-style requests")
    parser.add_argument("--contexts", type=int, default=8, help="word sampling: contexts")
    parser.add_argument("--samples", type=int, default=1000, help="word sampling: samples per context")
    parser.add_argument("--numeric", type=int, default=512, help="numeric answers: rows")
    parser.add_argument("--folktexts-rows", type=int, default=128,
                        help="rows folktexts scores (it is bound by its own Python: ~4 s per batch of 16)")  # fmt: skip
    parser.add_argument("--reference-rows", type=int, default=64, help="requests per workload in float32")
    parser.add_argument("--lm-eval-batch-sizes", type=int, nargs="*", default=[16, 64])
    parser.add_argument("--budgets", type=int, nargs="*", default=[4_096, 16_384, 65_536],
                        help="token budgets of the risk-score sweep (none: no sweep)")  # fmt: skip
    parser.add_argument("--skip-folktexts-at", nargs="*", default=["8b"], choices=list(SHAPES), metavar="SHAPE")
    parser.add_argument("--workdir", type=Path, help="where the weights are saved (default: a temporary folder)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    for noisy in ("lm_eval", "lm-eval", "transformers", "folktexts"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    transformers.logging.set_verbosity_error()
    if not (args.tokenizer / "tokenizer_config.json").is_file():
        print(f"bench/gpu.py: {args.tokenizer}: no tokenizer folder (--tokenizer)", file=sys.stderr)
        return 2
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("bench/gpu.py: --device cuda, but torch sees no GPU", file=sys.stderr)
        return 2
    gc.freeze()  # the imports out of the garbage collector's walks, as every rule job has them (unsure.logs.logged)
    started = time.perf_counter()
    args.peak, peak_what = matmul_peak(device)
    name = device_name(device)
    log.info("%s: matmul peak %.4g TFLOP/s (%s)", name, args.peak / 1e12, peak_what)
    result: dict[str, Any] = {
        "device": name,
        "device_type": device.type,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "peak_tflops": args.peak / 1e12,
        "peak_what": peak_what,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tokenizer": args.tokenizer.name,
        "vocab_size": len(AutoTokenizer.from_pretrained(args.tokenizer)),
        "sizes": (
            f"{args.rows} risk-score rows, {args.labels} label requests, {args.contexts} contexts x {args.samples} "
            f"samples x {NEW_TOKENS} tokens, {args.numeric} numeric rows; folktexts on {args.folktexts_rows} rows; "
            f"float32 reference on {args.reference_rows} requests per workload"
        ),
        "command": "python bench/gpu.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "shapes": {},
        "mfu": {},
        "seconds": 0.0,
    }
    for shape in args.shapes:
        with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
            rec = bench_shape(shape, args, device, Path(tmp))
        free(device)
        result["shapes"][shape] = rec
        result["mfu"][shape] = {k: w["steady"]["mfu"] for k, w in rec["workloads"].items()}
        result["seconds"] = time.perf_counter() - started
        write(result, args.out)  # after every shape, so that a run cut short keeps what it measured
    print(markdown(result))
    print(f"bench/gpu.py: wrote {args.out} and {args.out.with_suffix('.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

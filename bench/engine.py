"""Engine throughput against its peers, each run as its users run it, on the same models.

    .venv/bin/python bench/engine.py [--rows 64] [--sizes 256x2 512x4 640x4 768x4] [--contexts 4] [--samples 1000]

Builds Llama-style models locally (32k-token vocabulary, zoo tokenizer), one per
size, and times on each, in one run, three workloads on identical inputs:

- **risk scores**: folktexts' ``TransformersLLMClassifier.predict_proba`` (its own
  prompts, both option orders, batch 16) on ACS rows, against the riskscores
  scorer under ``protocol: paper`` (the same prompt strings, checked here) on
  ``HFEngine.choice_probs``;
- **label scores**: lm-evaluation-harness ``HFLM.loglikelihood`` on SNI-style
  prompts (8 demonstrations, 2-10 labels) against ``HFEngine.continuation_scores``;
- **word sampling**: HF ``generate(do_sample=True, num_return_sequences=n)``
  reduced to first words (as the nextword reference code does) against
  ``HFEngine.sample_words``, with a chi-square test that the two word
  distributions are the same.

Model FLOP utilisation = the model FLOPs of the engine's run (2 x body parameters
per token it ran, 2 x output-projection parameters per position whose logits it
read, and attention as PaLM counts it: 4 x layers x attention width per query-key
pair, each token on its causal prefix) per second, over the matmul FLOP/s
measured in this run. Prints Markdown
tables per size: the peers as their users run them, the project's own prompts
(generated sentences of uneven length), and risk-score rows/s per token budget.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np
import pandas as pd
import torch
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

from unsure.config import ZooModel
from unsure.engine import ChoiceRequest, ContinuationRequest, TokenLogprobsRequest, WordSamplingRequest
from unsure.engine.hf import HFEngine
from unsure.engine.words import first_word
from unsure.generate.acs import write_data_dictionary, write_state_zip
from unsure.generate.text import sentences
from unsure.riskscores.dictionary import read_dictionary
from unsure.riskscores.prompts import build_prompt, row_texts
from unsure.riskscores.scoring import make_scorer
from unsure.riskscores.tasks import BASE_COLUMNS, FOLKTABLES, read_person_zip, task_rows
from unsure.zoo.build import build, training_texts

_R = TypeVar("_R")
BUDGETS = (1_024, 2_048, 4_096, 8_192, 16_384)
"""Token budgets the sweep times."""

NEW_TOKENS = 5
"""Tokens generated per sample: the nextword reference code's ``add_tokens``."""
AGREEMENT = 5e-4
"""Largest score difference from a peer that counts as the same number."""
NEAR_TIE = 1e-3
"""Relative gap between two prefixes' option masses below which float noise may pick either."""

REAL_DICTIONARY = Path(__file__).resolve().parents[2] / "shared/data/acs/PUMS_Data_Dictionary_2014-2018.csv"
"""folktexts' value words are this file's; the generated dictionary stands in without ../shared."""


def build_model(root: Path, hidden: int, layers: int) -> Path:
    spec = ZooModel(architecture="llama", vocab_size=8000, hidden_size=64, layers=1, heads=4)
    build("tok", spec, training_texts(seed=0, n_sentences=20000), root / "tok", zoo_seed=0)
    tok = AutoTokenizer.from_pretrained(root / "tok")
    config = LlamaConfig(
        vocab_size=32_000,
        hidden_size=hidden,
        intermediate_size=int(hidden * 8 / 3) // 64 * 64,
        num_hidden_layers=layers,
        num_attention_heads=hidden // 64,
        num_key_value_heads=max(1, hidden // 256),
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(root / "model")
    tok.save_pretrained(root / "model")
    return root / "model"


def matmul_flops() -> float:
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    for _ in range(3):
        a @ b
    start, n = time.perf_counter(), 20
    for _ in range(n):
        a @ b
    return 2 * 2048**3 * n / (time.perf_counter() - start)


def acs_rows(root: Path, n: int) -> tuple[pd.DataFrame, pd.Series]:
    """ACSIncome evaluation rows (raw Census columns) and their feature text in folktexts' words."""
    write_state_zip(root / "ca.zip", state="CA", year=2018, n_rows=max(400, 4 * n), seed=5)
    if REAL_DICTIONARY.is_file():
        dictionary = read_dictionary(REAL_DICTIONARY)
    else:
        write_data_dictionary(root / "dict.csv", year=2018)
        dictionary = read_dictionary(root / "dict.csv")
    task = FOLKTABLES["ACSIncome"]
    rows = task_rows(read_person_zip(root / "ca.zip", list(BASE_COLUMNS)), task, n_train=0, n_eval=n, seed=0)
    return rows, row_texts(rows, task.features, dictionary, protocol="paper")


@dataclass
class ModelFlops:
    """Per-unit model FLOPs: parameters of the body and of the output projection, attention per pair."""

    dense: int
    unembedding: int
    pair: int

    @classmethod
    def of(cls, model: torch.nn.Module) -> ModelFlops:
        config = model.config
        unembedding = model.get_output_embeddings().weight.numel()
        dense = sum(p.numel() for p in model.parameters()) - model.get_input_embeddings().weight.numel() - unembedding
        width = config.num_attention_heads * getattr(
            config, "head_dim", config.hidden_size // config.num_attention_heads
        )
        return cls(dense, unembedding, 4 * config.num_hidden_layers * width)  # q.k and the weighted sum of v


@dataclass
class Timed:
    """An engine run: its seconds and what it computed (for model FLOPs)."""

    seconds: float
    tokens: int
    logit_rows: int
    attended: int

    def flops(self, model: ModelFlops) -> float:
        """Model FLOPs: the body on every token run, the output projection where it was read,
        attention on every query-key pair."""
        return 2 * model.dense * self.tokens + 2 * model.unembedding * self.logit_rows + model.pair * self.attended


def timed(engine: HFEngine, run: Callable[[], _R]) -> tuple[_R, Timed]:
    c = engine.counters
    start, tokens, logits, attended = time.perf_counter(), c.tokens, c.logit_rows, c.attended
    out = run()
    took = Timed(time.perf_counter() - start, c.tokens - tokens, c.logit_rows - logits, c.attended - attended)
    return out, took


def prefix_margin(engine: HFEngine, prompt: str, options: tuple[str, ...] = ("A", "B")) -> float:
    """Relative gap between the two space-marker prefixes holding the most option mass after ``prompt``.

    folktexts (and ``protocol: paper``) read the options under the prefix with
    the most mass; where two prefixes are this close, float noise decides it.
    """
    variants = engine.option_token_ids(options)
    ids = sorted({t for v in variants.values() for t in v if t is not None})
    (read,) = engine.token_logprobs([TokenLogprobsRequest(tuple(engine.encode(prompt)), tuple(ids))])
    prob = dict(zip(ids, np.exp(read.logprobs), strict=True))
    masses = sorted((sum(prob[i] for i in v if i is not None) for v in variants.values()), reverse=True)
    return (masses[0] - masses[1]) / masses[0] if len(masses) > 1 else 1.0


def risk_scores(path: str, engine: HFEngine, root: Path, n: int) -> tuple[float, Timed, str]:
    """(folktexts rows/s, the engine's run, the scores' agreement).

    Rows past :data:`AGREEMENT` whose prefix choice is a near-tie (within
    :data:`NEAR_TIE`) in either option order are counted apart: there the
    choice, not the arithmetic, differs.
    """
    from folktexts.acs.acs_tasks import acs_income_task
    from folktexts.classifier.transformers_classifier import TransformersLLMClassifier
    from folktexts.llm_utils import load_model_tokenizer
    from folktexts.prompting import encode_row_prompt

    rows, text = acs_rows(root, n)
    task = FOLKTABLES["ACSIncome"]
    first = rows.iloc[0]
    same = build_prompt(task, text.iloc[0], "multiple_choice", 0, year=2018, protocol="paper") == encode_row_prompt(
        first, acs_income_task, question=acs_income_task.multiple_choice_qa
    )
    _, tok = load_model_tokenizer(path)  # folktexts' tokenizer set-up
    # folktexts loads the weights in half precision; the same weights in float32, as the engine
    # runs here, so that the scores compare (upcasting a half-precision copy would not)
    model = LlamaForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    peer = TransformersLLMClassifier(
        model, tok, acs_income_task, correct_order_bias=True, batch_size=16, context_size=2048
    )
    logging.disable(logging.WARNING)  # folktexts warns per row of this random model's low mass on A/B
    start = time.perf_counter()
    theirs = peer.predict_proba(rows[list(task.features)])[:, 1]
    t_peer = time.perf_counter() - start
    logging.disable(logging.NOTSET)
    scored = rows.assign(text=text.to_numpy())
    score = make_scorer(engine, task, "multiple_choice", year=2018, instruct=False, both_orders=True, protocol="paper")
    out, run = timed(engine, lambda: score(scored))
    diff = np.abs(out["p_hat"].to_numpy() - theirs)
    tied = [
        i
        for i in np.flatnonzero(diff > AGREEMENT)
        if min(
            prefix_margin(
                engine, build_prompt(task, text.iloc[i], "multiple_choice", order, year=2018, protocol="paper")
            )
            for order in (0, 1)
        )
        < NEAR_TIE
    ]
    agreement = f"max abs diff {np.delete(diff, tied).max():.1e}; prompts equal: {same}"
    if tied:
        count = f"{len(tied)} row{'s' * (len(tied) > 1)}"
        agreement += f"; {count} at an A/▁A near-tie left out (diff up to {diff[tied].max():.1e})"
    return n / t_peer, run, agreement


def sni_requests(n: int, tasks: int | None = None) -> list[tuple[str, tuple[str, ...]]]:
    """``n`` label prompts of 8 demonstrations and 2-10 labels, each with demonstrations of its own; with
    ``tasks``, prompt ``i`` is task ``i % tasks``'s, whose demonstrations and labels all its prompts share,
    as the label-bias study's prompts of one task and demonstration set do."""
    text = sentences(n * 20, seed=2)
    rng = np.random.default_rng(0)
    labels = ["yes", "no", "maybe", "positive", "negative", "neutral", "A", "B", "C", "D"]
    reqs = []
    for i in range(n):
        drawn = int(rng.integers(2, 11))  # drawn either way: without tasks, the requests are as they were
        shots = i % tasks if tasks else i  # whose demonstrations
        k = 2 + shots % 9 if tasks else drawn
        demos = "\n\n".join(f"Input: {text[shots * 20 + j]}\nOutput: {labels[j % k]}" for j in range(8))
        reqs.append(
            (
                f"Definition: Classify the sentence.\n\n{demos}\n\nInput: {text[i * 20 + 9]}\nOutput:",
                tuple(" " + lab for lab in labels[:k]),
            )
        )
    return reqs


def label_scores(path: str, engine: HFEngine, n: int) -> tuple[float, Timed, float]:
    """(lm-eval requests/s, the engine's run, max |log-likelihood difference|)."""
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    reqs = sni_requests(n)
    harness = HFLM(pretrained=path, device="cpu", dtype="float32", batch_size=16, add_bos_token=True)
    inst = [Instance("loglikelihood", {}, (c, k), i) for i, (c, ks) in enumerate(reqs) for k in ks]
    start = time.perf_counter()
    theirs = [ll for ll, _ in harness.loglikelihood(inst, disable_tqdm=True)]
    t_peer = time.perf_counter() - start
    scores, run = timed(engine, lambda: engine.continuation_scores([ContinuationRequest(c, ks) for c, ks in reqs]))
    ours = [float(v) for r in scores for v in r.logprob]
    return n / t_peer, run, float(np.abs(np.subtract(ours, theirs)).max())


def word_sampling(path: str, engine: HFEngine, contexts: int, n: int) -> tuple[float, Timed, float]:
    """(HF generate words/s, the engine's run, chi-square p-value of equal word distributions)."""
    from scipy.stats import chi2_contingency

    tok = AutoTokenizer.from_pretrained(path)
    model = LlamaForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    prompts = [" ".join(s.split()[:6]) for s in sentences(contexts, seed=3)]
    theirs: Counter[str] = Counter()
    torch.manual_seed(0)
    start = time.perf_counter()
    for prompt in prompts:  # the reference code's loop: one generate call per context, n return sequences
        ids = tok(prompt, return_tensors="pt")
        with torch.inference_mode():
            out = model.generate(
                **ids,
                do_sample=True,
                num_return_sequences=n,
                max_new_tokens=NEW_TOKENS,
                top_k=0,
                pad_token_id=tok.eos_token_id,
            )
        new = out[:, ids["input_ids"].shape[1] :]
        for seq, text in zip(new, tok.batch_decode(new, skip_special_tokens=True), strict=True):
            # as the engine reduces a reply: a word is settled by what follows it or by the
            # end of the reply; one still open when the tokens run out is rejected (None)
            word, done = first_word(text, finished=bool((seq == tok.eos_token_id).any()))
            theirs[f"{prompt}|{word if done else None}"] += 1
    t_peer = time.perf_counter() - start
    results, run = timed(
        engine,
        lambda: engine.sample_words(
            [WordSamplingRequest(p, n=n, seed=i, max_new_tokens=NEW_TOKENS) for i, p in enumerate(prompts)]
        ),
    )
    ours: Counter[str] = Counter()
    for prompt, res in zip(prompts, results, strict=True):
        for word in res.words:
            ours[f"{prompt}|{word}"] += 1
        ours[f"{prompt}|None"] += res.rejected
    pvalues = []
    for prompt in prompts:  # per context, words seen at least 5 times in all, the rest pooled
        keys = sorted({k for k in theirs | ours if k.startswith(prompt + "|")})
        table = np.array([[theirs[k], ours[k]] for k in keys], dtype=float)
        big = table.sum(axis=1) >= 5
        table = np.vstack([table[big], table[~big].sum(axis=0, keepdims=True)])
        table = table[table.sum(axis=1) > 0]
        if len(table) > 1:
            pvalues.append(chi2_contingency(table)[1])
    return contexts * n / t_peer, run, float(np.min(pvalues) * len(pvalues))


def own_prompts(engine: HFEngine, n: int) -> Timed:
    """The project's generated risk prompts (uneven lengths), both option orders."""
    text = sentences(n * 12, seed=1)
    prompts = []
    for i in range(n):
        features = "\n".join(f"- {s}" for s in text[i * 12 : i * 12 + 10])
        for a, b in (("Yes", "No"), ("No", "Yes")):
            prompts.append(
                "The following data describes a survey respondent.\n"
                f"{features}\nQuestion: Is the income above 50,000 dollars?\nA. {a}.\nB. {b}.\nAnswer:"
            )
    return timed(engine, lambda: engine.choice_probs([ChoiceRequest(p, ("A", "B")) for p in prompts]))[1]


def budget_sweep(path: str, engine: HFEngine, root: Path, n: int) -> dict[int, float]:
    """Risk-score rows/s per token budget (the batch shape the engine is tuned on)."""
    task = FOLKTABLES["ACSIncome"]
    rows, text = acs_rows(root, n)
    score = make_scorer(engine, task, "multiple_choice", year=2018, instruct=False, both_orders=True, protocol="paper")
    scored = rows.assign(text=text.to_numpy())
    chosen, rates = engine.token_budget, {}
    for budget in BUDGETS:
        engine.token_budget = budget
        rates[budget] = n / timed(engine, lambda: score(scored))[1].seconds
    engine.token_budget = chosen
    return rates


def bench_size(hidden: int, layers: int, args: argparse.Namespace, peak: float) -> None:
    """Every workload on one model size; prints its tables."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        path = str(build_model(root, hidden, layers))
        engine = HFEngine(path, dtype="float32")
        params = sum(p.numel() for p in engine.model.parameters())
        model = ModelFlops.of(engine.model)

        def mfu(run: Timed) -> str:
            return f"{run.flops(model) / run.seconds / peak:.0%}"

        rows = []
        peer, run, agreement = risk_scores(path, engine, root, args.rows)
        rows.append(("risk scores, ACSIncome (rows/s)", "folktexts predict_proba", peer, args.rows / run.seconds,
                     mfu(run), agreement))  # fmt: skip
        peer, run, diff = label_scores(path, engine, args.rows)
        rows.append(("label scores, 8 demos, 2-10 labels (requests/s)", "lm-eval loglikelihood", peer,
                     args.rows / run.seconds, mfu(run), f"max abs diff {diff:.1e}"))  # fmt: skip
        peer, run, p = word_sampling(path, engine, args.contexts, args.samples)
        rows.append(("first-word sampling (words/s)", "HF generate", peer, args.contexts * args.samples / run.seconds,
                     mfu(run), f"chi-square p (Bonferroni) {min(p, 1.0):.2f}"))  # fmt: skip
        own = own_prompts(engine, args.rows)
        sweep = budget_sweep(path, engine, root, args.rows)
        chosen = engine.token_budget

    print(f"\n### Llama, hidden {hidden}, {layers} layers: {params / 1e6:.1f}M parameters "
          f"({model.dense / 1e6:.1f}M in the body), 32k vocabulary\n")  # fmt: skip
    print("| workload | peer | peer rate | engine rate | ratio | engine MFU | agreement |")
    print("|---|---|---|---|---|---|---|")
    for name, peer_name, theirs, ours, util, agree in rows:
        print(f"| {name} | {peer_name} | {theirs:.2f} | {ours:.2f} | {ours / theirs:.1f}x | {util} | {agree} |")
    print("\n| project prompts | engine rate | engine MFU |\n|---|---|---|")
    print(f"| generated risk prompts, both orders (rows/s) | {args.rows / own.seconds:.2f} | {mfu(own)} |")
    print("\n| token budget | " + " | ".join(f"{b:,}" + (" (default)" if b == chosen else "") for b in sweep) + " |")
    print("|---|" + "---|" * len(sweep))
    print("| risk scores (rows/s) | " + " | ".join(f"{r:.1f}" for r in sweep.values()) + " |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument(
        "--sizes", nargs="+", default=["256x2", "512x4", "640x4", "768x4"], help="model sizes, HIDDENxLAYERS"
    )
    parser.add_argument("--contexts", type=int, default=4, help="word sampling: contexts")
    parser.add_argument(
        "--samples", type=int, default=1000, help="word sampling: samples per context (the reference code's 1,000)"
    )
    args = parser.parse_args()
    peak = matmul_flops()
    print(f"matmul peak measured here: {peak / 1e9:.1f} GFLOP/s, {torch.get_num_threads()} threads; MFU counts")
    print("the body's matmuls on every token run, the output projection where its logits are read, attention")
    print("on each token's causal prefix")
    for size in args.sizes:
        hidden, layers = (int(v) for v in size.split("x"))
        bench_size(hidden, layers, args, peak)


if __name__ == "__main__":
    main()

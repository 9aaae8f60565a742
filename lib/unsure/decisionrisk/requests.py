"""What decisionrisk asks a generative model, from its instances: one place that says it.

The scorer (:mod:`.infer`), the zoo's examples and the cost estimate take the requests and
prompts from here; the estimate's counts of them per rule are here too (:func:`request_sets`,
:func:`rule_work`; :mod:`unsure.workload`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from unsure.config import Config
from unsure.decisionrisk.confidences import LETTERS
from unsure.engine import ContinuationRequest, ReplyRequest
from unsure.workload import CHAT_TOKENS, RequestSet, Work, evenly, need, work

MCQA_SIZES = {
    # official (train, validation) instances and choices per instance: aNLI (ART, Bhagavatula et al. 2020),
    # HellaSwag (Zellers et al. 2019), PIQA (Bisk et al. 2020), Social IQa (Sap et al. 2019)
    "anli": (169_654, 1_532, 2),
    "hellaswag": (39_905, 10_042, 4),
    "piqa": (16_113, 1_838, 2),
    "siqa": (33_410, 1_954, 3),
}


def continuation_request(prompt: str, choices: Sequence[str]) -> ContinuationRequest:
    """Each choice as a continuation of the prompt, after one space (as lm-evaluation-harness does)."""
    return ContinuationRequest(prompt, tuple(" " + c for c in choices))


def verbal_prompt(prompt: str, choices: Sequence[str]) -> str:
    """The user message asking a chat model for its confidence in each choice (0 to 100)."""
    if len(choices) > len(LETTERS):
        raise ValueError(f"at most {len(LETTERS)} choices can be lettered, got {len(choices)}")
    options = "\n".join(f"{LETTERS[i]}. {c}" for i, c in enumerate(choices))
    example = ", ".join(f"{LETTERS[i]}: <number>" for i in range(len(choices)))
    return (
        f"Question: {prompt}\nOptions:\n{options}\n\n"
        "For each option, how confident are you (0 to 100) that it is the correct answer? "
        f"Reply with one line per option and nothing else, in the form {example}."
    )


def likelihood_requests(prompts: Sequence[str], choices: Sequence[Sequence[str]]) -> list[ContinuationRequest]:
    """One request per instance: its choices' log-likelihoods after its prompt."""
    return [continuation_request(p, c) for p, c in zip(prompts, choices, strict=True)]


def verbal_requests(
    prompts: Sequence[str], choices: Sequence[Sequence[str]], *, chat: Callable[[str], str], max_new_tokens: int
) -> list[ReplyRequest]:
    """One greedy reply per instance to :func:`verbal_prompt`, through the model's chat template."""
    return [ReplyRequest(chat(verbal_prompt(p, c)), max_new_tokens) for p, c in zip(prompts, choices, strict=True)]


def request_sets(cfg: Config, data: Path, *, sample: int, tokenizer: Any, encoder: Any = None) -> Iterator[RequestSet]:
    """Per benchmark, sampled validation instances: ``mcqa/<b>`` (likelihoods), ``mcqa/verbal/<b>``, ``mcqa/text/<b>``
    (a prompt and its choices, embedded) and, with ``encoder``, ``mcqa/pair/<b>`` (the encoder's longest (prompt,
    choice) pair of a batch of 16 instances, which its batches are padded to)."""
    from unsure.decisionrisk.data import load_benchmark

    dr = cfg.studies.decisionrisk
    if not (dr.models or dr.encoder):
        return
    for b in dr.benchmarks:
        frame = evenly(load_benchmark(need(data / "mcqa" / "raw" / b, f"{b} files"), b, "val"), sample)
        prompts, choices = frame["prompt"].tolist(), [list(c) for c in frame["choices"]]
        texts = [" ".join([p, *c]) for p, c in zip(prompts, choices, strict=True)]
        yield RequestSet(f"mcqa/{b}", likelihood_requests(prompts, choices), len(prompts), texts)
        verbal = verbal_requests(prompts, choices, chat=str, max_new_tokens=dr.verbal_max_new_tokens)
        yield RequestSet(f"mcqa/verbal/{b}", verbal, len(prompts), [r.prompt for r in verbal])
        yield RequestSet(f"mcqa/text/{b}", (), len(texts), texts)
        if encoder is not None:
            first = [p for p, cs in zip(prompts, choices, strict=True) for _ in cs]
            second = [c for cs in choices for c in cs]
            enc = encoder(first, second, truncation="longest_first", max_length=dr.finetune.max_length)
            per_row = np.array([len(i) for i in enc["input_ids"]]).reshape(len(prompts), -1).max(axis=1)
            pair = float(np.mean([per_row[i : i + 16].max() for i in range(0, len(per_row), 16)]))
            yield RequestSet(f"mcqa/pair/{b}", (), len(prompts), value=pair)


def rule_work(cfg: Config, per_unit: Mapping[str, float]) -> list[Work]:
    """``decisionrisk_generative`` per model (the validation split and its injected copies: likelihoods on a GPU,
    completions with echo on an API, a confidence per choice from an instruct model) and, with an encoder,
    ``decisionrisk_encoder`` per benchmark (fine-tuned on the train split, both splits scored) and
    ``decisionrisk_similarity`` (every distinct prompt and choice embedded once)."""
    study, out = cfg.studies.decisionrisk, []
    benchmarks = list(study.benchmarks) if study.encoder else []
    copies = 1 + len(study.injections)
    train = {b: min(study.n_train, MCQA_SIZES[b][0]) for b in benchmarks}
    val = {b: min(study.n_val, MCQA_SIZES[b][1]) for b in benchmarks}
    for m in study.models:
        entry = cfg.models[m]
        tokens = requests = 0.0
        for b in benchmarks:
            if entry.backend == "hf":
                tokens += val[b] * copies * per_unit[f"mcqa/{b}"]
            elif not entry.instruct:
                requests += val[b] * copies  # chat APIs give no log-likelihoods
            if entry.instruct:
                tokens += val[b] * copies * (per_unit[f"mcqa/verbal/{b}"] + CHAT_TOKENS)
                requests += val[b] * copies
        out.append(work("decisionrisk_generative", m, {"model": m}, api=entry.backend == "openai", tokens=tokens,
                        requests=requests, loads=study.shards, kind="label_scores"))  # fmt: skip
    if study.encoder:
        for b in benchmarks:
            k, pair = MCQA_SIZES[b][2], per_unit[f"mcqa/pair/{b}"]
            out.append(Work("decisionrisk", "decisionrisk_encoder", study.encoder, {"benchmark": b}, loads=2,
                            tokens=(train[b] + val[b]) * copies * k * pair,  # both splits, injected copies too
                            train_tokens=study.finetune.epochs * train[b] * k * pair))  # fmt: skip
        tokens = sum((train[b] + val[b]) * per_unit[f"mcqa/text/{b}"] for b in benchmarks)
        out.append(Work("decisionrisk", "decisionrisk_similarity", study.embedder, {}, tokens=tokens, loads=1))
    return out

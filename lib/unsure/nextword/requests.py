"""What nextword asks the engine, from its positions and settings: one place that says it.

The scorers (:mod:`.inference`), the zoo's examples and the cost estimate take the prompts
and requests from here; the estimate's counts of them per rule are here too (:func:`request_sets`,
:func:`rule_work`; :mod:`unsure.workload`).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from unsure.config import Config
from unsure.engine import ContinuationRequest, ReplyRequest, TokenLogprobsRequest, WordSamplingRequest
from unsure.workload import CHAT_TOKENS, RequestSet, Work, evenly, need, work

Chat = Callable[[str], str]
"""An instruct model's chat template around a user turn (``engine.chat_prompt``)."""
Split = Callable[[str, str], tuple[Sequence[int], Sequence[int]]]
"""A tokenizer's split of a context and a continuation into their token ids (``engine.split_pair``)."""

CHAT_SINGLE = (
    "Here is the beginning of a text:\n\n{context}\n\n"
    "Which word comes next? Answer with exactly one word and nothing else."
)
"""Prompt of the ``single`` chat mode: one word per call."""
CHAT_LIST = (
    "Here is the beginning of a text:\n\n{context}\n\n"
    "Give {n} guesses of the word that comes next, as a comma-separated list of single words "
    "(repeat a word as often as you find it likely). Answer with the list only."
)
"""Prompt of the ``list`` chat mode: one call asking for ``n`` words."""


def position_seed(seed: int, row_id: str) -> int:
    """A sampling seed of one position: a function of the config seed and the row id only."""
    return zlib.crc32(f"{seed}:{row_id}".encode()) & 0x7FFFFFFF


def sampling_requests(
    row_ids: Sequence[str],
    contexts: Sequence[str],
    *,
    n: int,
    seed: int,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_p: float | None = None,
    top_k: int | None = None,
    chat: Chat | None = None,
) -> list[WordSamplingRequest]:
    """``n`` samples after each position's context (``chat``: the ``single`` mode's question about
    it, through the model's chat template), seeded per position (:func:`position_seed`)."""
    return [
        WordSamplingRequest(
            context=c if chat is None else chat(CHAT_SINGLE.format(context=c)),
            n=n,
            temperature=temperature,
            top_p=top_p,
            top_k=top_k,
            seed=position_seed(seed, str(r)),
            max_new_tokens=max_new_tokens,
        )
        for r, c in zip(row_ids, contexts, strict=True)
    ]


def list_requests(contexts: Sequence[str], *, n: int, chat: Chat) -> list[ReplyRequest]:
    """The ``list`` chat mode: one greedy reply per position, asked for ``n`` words (room for
    ``n`` words and their separators)."""
    return [ReplyRequest(chat(CHAT_LIST.format(context=c, n=n)), 4 * n + 16) for c in contexts]


def support_requests(contexts: Sequence[str], surfaces: Sequence[Sequence[str]]) -> list[ContinuationRequest]:
    """The biased estimator: each surface form of a position's support as a continuation of its
    context, with the leading space the model would produce."""
    return [ContinuationRequest(c, tuple(" " + s for s in forms)) for c, forms in zip(contexts, surfaces, strict=True)]


def support_sampling_requests(
    row_ids: Sequence[str],
    contexts: Sequence[str],
    *,
    nucleus: Sequence[float],
    nucleus_samples: int,
    seed: int,
    max_new_tokens: int,
) -> list[list[WordSamplingRequest]]:
    """The biased estimator's own samples, which widen each position's support: per setting, one
    request per position. The settings are ``nucleus_samples`` samples at each ``top_p`` of
    ``nucleus``, then the greedy word (top-k 1, one sample); setting ``i`` is seeded from
    ``seed + 1 + i``, so none shares the unbiased samples' seeds."""
    settings: list[tuple[float | None, int | None, int]] = [(p, None, nucleus_samples) for p in nucleus]
    settings.append((None, 1, 1))
    return [
        sampling_requests(
            row_ids, contexts, n=n, seed=seed + 1 + i, max_new_tokens=max_new_tokens, top_p=top_p, top_k=top_k
        )
        for i, (top_p, top_k, n) in enumerate(settings)
    ]


def first_tokens(context: str, words: Sequence[str], split: Split) -> tuple[tuple[int, ...], dict[str, int]]:
    """The token level: each word's first token after ``context`` (the word with its leading space,
    split as running text), and the context's ids as the last word's split gives them."""
    context_ids: Sequence[int] = ()
    firsts = {}
    for w in words:
        context_ids, cont = split(context, " " + w)
        firsts[w] = int(cont[0])
    return tuple(int(i) for i in context_ids), firsts


def token_request(context_ids: Sequence[int], firsts: Mapping[str, int]) -> TokenLogprobsRequest:
    """The token level's request of one position: the log-probabilities of its words' distinct
    first tokens (in id order) after its context."""
    return TokenLogprobsRequest(tuple(context_ids), tuple(sorted(set(firsts.values()))))


PROVO_PASSAGES = 55
PROVO_POSITIONS = 2_687
"""Provo Corpus predictability norms (Luke & Christianson 2018, OSF): 55 passages, 2,687 cloze positions."""
PROVO_RESPONSE_TYPES = 39_794
"""Distinct (position, response) pairs in the norms: the fine-tuning examples (14.8 per position)."""


def request_sets(cfg: Config, data: Path, *, sample: int, tokenizer: Any, encoder: Any = None) -> Iterator[RequestSet]:
    """Per sampled position of the norms: ``provo/sample`` (``_large``: the large models' count), ``provo/single``,
    ``provo/list``, ``provo/biased`` (its own samples and a support as wide as it can get), ``provo/tokens`` and
    ``provo/example`` (a fine-tuning example)."""
    from unsure.nextword.data import read_norms

    study = cfg.studies.nextword
    if not study.models:
        return
    norms = read_norms(need(data / "provo" / "raw" / "Provo_Corpus-Predictability_Norms.csv", "Provo"))
    positions = evenly(norms, sample)
    contexts, words = positions["context"].astype(str).tolist(), positions["corpus_word"].astype(str).tolist()
    ids, n = [str(i) for i in range(len(contexts))], len(contexts)
    # a sample draws its word and the token that ends it (the rest of the tree's rows are not shared here)
    drawn = 1 + math.ceil(np.mean([len(i) for i in tokenizer([" " + w for w in words])["input_ids"]]))
    sampled = partial(sampling_requests, ids, contexts, seed=0, max_new_tokens=12)
    for key, k in (("", study.n_samples), ("_large", study.n_samples_large)):
        yield RequestSet(f"provo/sample{key}", sampled(n=k), n, contexts, sample_tokens=drawn)
        yield RequestSet(f"provo/single{key}", sampled(n=k, chat=str), n, contexts, sample_tokens=drawn)
    yield RequestSet("provo/list", list_requests(contexts, n=study.n_samples, chat=str), n, contexts)
    nucleus = [r for p in study.nucleus for r in sampled(n=study.nucleus_samples, top_p=p)] + sampled(n=1, top_k=1)
    support = round(study.n_samples + len(study.nucleus) * study.nucleus_samples + 2 + PROVO_RESPONSE_TYPES
                    / PROVO_POSITIONS)  # fmt: skip  # at most every sample distinct, the corpus word, the responses
    scored = support_requests(contexts, [[w] * support for w in words])
    yield RequestSet("provo/biased", [*nucleus, *scored], n, contexts, sample_tokens=drawn)
    tokens = [TokenLogprobsRequest(tuple(tokenizer(c)["input_ids"]), (0,)) for c in contexts]
    yield RequestSet("provo/tokens", tokens, n, contexts)
    examples = [ContinuationRequest(c, (" " + w,)) for c, w in zip(contexts, words, strict=True)]
    yield RequestSet("provo/example", examples, n, contexts)


def rule_work(cfg: Config, per_unit: Mapping[str, float]) -> list[Work]:
    """Per model and mode ``nextword_sample``, ``nextword_biased``, ``nextword_tokens`` (a job per model and shard),
    and per fold ``nextword_finetune`` and ``nextword_finetune_sample``, over the configured passages' positions."""
    study, out = cfg.studies.nextword, []
    positions = PROVO_POSITIONS * (len(study.passages) / PROVO_PASSAGES if study.passages else 1)
    for m in study.models:
        entry = cfg.models[m]
        api, large = entry.backend == "openai", "_large" if m in study.large_models else ""
        calls = math.ceil((study.n_samples_large if large else study.n_samples) / 128)  # an API's n: 128 at most
        each = partial(work, "nextword_sample", m, api=api, loads=study.shards, kind="word_sampling")
        for mode in list(study.chat_modes) if entry.instruct else [f"t{t:g}" for t in study.temperatures]:
            key = {"single": f"single{large}", "list": "list"}.get(mode, f"sample{large}")
            chat = CHAT_TOKENS if mode in ("single", "list") else 0
            tokens = positions * (per_unit[f"provo/{key}"] + chat)
            requests = positions * (1 if mode == "list" else calls)  # a list is one reply
            out.append(each({"model": m, "mode": mode}, tokens=tokens, requests=requests))
        if m in study.biased_models:
            out.append(work("nextword_biased", m, {"model": m}, api=api, tokens=positions * per_unit["provo/biased"],
                            requests=0, loads=study.shards, kind="word_sampling"))  # fmt: skip
        if m in study.token_models:
            out.append(work("nextword_tokens", m, {"model": m}, api=api, tokens=positions * per_unit["provo/tokens"],
                            requests=0, loads=1, kind="label_scores"))  # fmt: skip
    ft = study.finetune
    if ft.model is not None:
        share = (ft.passages[1] - ft.passages[0] + 1) / PROVO_PASSAGES
        held, held_positions = PROVO_RESPONSE_TYPES * share / ft.folds, PROVO_POSITIONS * share / ft.folds
        train, example = held * (ft.folds - 1), per_unit["provo/example"]
        sample = per_unit["provo/sample_large" if ft.n_samples == study.n_samples_large else "provo/sample"]
        for fold in range(ft.folds):
            match = {"fold": str(fold)}
            out.append(Work("nextword", "nextword_finetune", ft.model, match, loads=1,
                            tokens=(train + (ft.epochs + 1) * held) * example,  # the loss curves, no gradient
                            train_tokens=ft.epochs * train * example))  # fmt: skip
            out.append(Work("nextword", "nextword_finetune_sample", ft.model, match, loads=2,  # before and after
                            tokens=2 * held_positions * sample, kind="word_sampling"))  # fmt: skip
    return out

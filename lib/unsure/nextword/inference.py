"""The model side of the study: what is asked of the engine, and how its answers become distributions.

Every function here takes an engine (:func:`unsure.engine.load_engine`) and
rows of the positions table, and returns plain data frames; the sharded,
resumable running is :func:`unsure.engine.shards.run_shard`'s job.

* :func:`sample_scorer`: unbiased (or tempered) ancestral samples, the first
  complete word of each; samples with no complete word are rejected and
  counted.
* :func:`chat_scorer`: instruct models, in the study's two prompting modes:
  ``single`` (one word per call, ``n`` calls) and ``list`` (one call asking
  for ``n`` words).
* :func:`biased_scorer` (appendix A): the biased estimator. Its support is
  every word seen in unbiased samples, nucleus samples (p = 0.7, 0.8, 0.9),
  the greedy word, the corpus word and the human responses; each word's
  probability is the summed probability of its surface forms (as generated
  or typed) as continuations of the context, renormalised over the support.
* :func:`token_scorer` (appendix D): the model's full-softmax next-token
  probabilities of the first tokens of the human responses.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
import numpy.typing as npt
import pandas as pd

from unsure.engine import ContinuationRequest, Engine, ReplyRequest, TokenLogprobsRequest, WordSamplingRequest
from unsure.nextword.frames import KEY, ROW_KEY, require
from unsure.nextword.requests import (
    first_tokens,
    list_requests,
    sampling_requests,
    support_requests,
    support_sampling_requests,
    token_request,
)
from unsure.nextword.words import normalize_word, surface_form

if TYPE_CHECKING:  # torch and transformers, only where a token-level job loads them
    from unsure.engine.hf import HFEngine


def position_rows(positions: pd.DataFrame, passages: Sequence[int] = ()) -> pd.DataFrame:
    """The rows to score: ``row_id, text_id, word_num, context`` (only ``passages`` when given).

    ``row_id`` is ``"<text_id>-<word_num>"``, stable whatever else is in the
    table, so a position's shard and its sampling seed never change.

    Raises:
        ValueError: if a requested passage is not in the positions table.
    """
    require(positions, [*KEY, "context"], "positions table")
    if passages:
        have = set(positions["text_id"].astype(int))
        missing = sorted(set(passages) - have)
        if missing:
            raise ValueError(f"studies.nextword.passages: passage(s) {missing} not in the norms (have {sorted(have)})")
        positions = positions[positions["text_id"].isin(list(passages))]
    rows = positions[[*KEY, "context"]].reset_index(drop=True)
    rows.insert(0, "row_id", [f"{int(t)}-{int(n)}" for t, n in zip(rows["text_id"], rows["word_num"], strict=True)])
    return rows


def _sample_frame(chunk: pd.DataFrame, words: list[list[str]], rejected: list[int]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "row_id": chunk["row_id"].to_numpy(),
            "text_id": chunk["text_id"].to_numpy(dtype=np.int64),
            "word_num": chunk["word_num"].to_numpy(dtype=np.int64),
            "words": [json.dumps(w, ensure_ascii=False) for w in words],
            "rejected": np.asarray(rejected, dtype=np.int64),
        }
    )


@dataclass(frozen=True)
class WordScorer:
    """Scorer of a position's words: ``row_id, text_id, word_num, words, rejected``.

    ``mode`` ``sample``: ``n`` ancestral samples of the context (tempered or truncated as
    set), the first complete word of each; ``single``: the same of the reply to
    :data:`~.requests.CHAT_SINGLE`; ``list``: one greedy reply to :data:`~.requests.CHAT_LIST`,
    parsed by :func:`parse_word_list`. ``words`` is the JSON list of the words (raw, as
    generated); ``rejected`` counts samples with no complete word within ``max_new_tokens``
    (``list``: the words missing from the ``n`` asked for). :meth:`requests` says what each
    row sends the engine (the request cache's key).
    """

    engine: Engine
    n: int
    mode: Literal["sample", "single", "list"] = "sample"
    temperature: float = 1.0
    top_p: float | None = None
    top_k: int | None = None
    seed: int = 0
    max_new_tokens: int = 12

    def _samples(self, chunk: pd.DataFrame) -> list[WordSamplingRequest]:
        return sampling_requests(
            [str(r) for r in chunk["row_id"]],
            [str(c) for c in chunk["context"]],
            n=self.n,
            seed=self.seed,
            max_new_tokens=self.max_new_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            chat=self.engine.chat_prompt if self.mode == "single" else None,
        )

    def _lists(self, chunk: pd.DataFrame) -> list[ReplyRequest]:
        return list_requests([str(c) for c in chunk["context"]], n=self.n, chat=self.engine.chat_prompt)

    def requests(self, chunk: pd.DataFrame) -> list[tuple[WordSamplingRequest | ReplyRequest]]:
        """Per position, the one request it sends."""
        asked: list[WordSamplingRequest] | list[ReplyRequest]
        asked = self._lists(chunk) if self.mode == "list" else self._samples(chunk)
        return [(r,) for r in asked]

    def __call__(self, chunk: pd.DataFrame) -> pd.DataFrame:
        if self.mode == "list":
            words = [parse_word_list(r, self.n) for r in self.engine.generate(self._lists(chunk))]
            return _sample_frame(chunk, words, [self.n - len(w) for w in words])
        out = self.engine.sample_words(self._samples(chunk))
        return _sample_frame(chunk, [o.words for o in out], [o.rejected for o in out])


def sample_scorer(
    engine: Engine,
    *,
    n: int,
    temperature: float = 1.0,
    top_p: float | None = None,
    top_k: int | None = None,
    seed: int = 0,
    max_new_tokens: int = 12,
) -> WordScorer:
    """Scorer of ``n`` ancestral samples per context (see :class:`WordScorer`)."""
    return WordScorer(engine, n, "sample", temperature, top_p, top_k, seed, max_new_tokens)


_LIST_ITEM = re.compile(r"^\s*(?:\d+[.)]|[-*•])?\s*")


def parse_word_list(reply: str, n: int) -> list[str]:
    """The words of a ``list``-mode reply: items split on commas, semicolons and new lines.

    Numbering and bullets are removed; an item that is not a single word after
    normalisation (empty, or several words) is dropped; at most ``n`` are kept.
    """
    words = []
    for item in re.split(r"[,;\n]", reply):
        word = normalize_word(_LIST_ITEM.sub("", item))
        if word and " " not in word:
            words.append(word)
    return words[:n]


def chat_scorer(
    engine: Engine,
    *,
    mode: Literal["single", "list"],
    n: int,
    seed: int = 0,
    max_new_tokens: int = 12,
) -> WordScorer:
    """Scorer of an instruct model in one of the study's two prompting modes (see :class:`WordScorer`):
    ``single`` samples the reply ``n`` times (temperature 1), ``list`` asks once for ``n`` words."""
    if mode not in ("single", "list"):
        raise ValueError(f"studies.nextword.chat_modes: unknown mode {mode!r} (single or list)")
    return WordScorer(engine, n, mode, seed=seed, max_new_tokens=max_new_tokens)


def sample_counts(shards: Sequence[pd.DataFrame]) -> tuple[pd.DataFrame, dict[str, int]]:
    """Merge sampled shards into a counts table (normalised words) and totals of samples and rejections."""
    frame = pd.concat(list(shards), ignore_index=True)
    require(frame, [*KEY, "words", "rejected"], "samples")
    rows = [
        (t, n, w)
        for t, n, ws in zip(frame["text_id"], frame["word_num"], frame["words"], strict=True)
        for w in json.loads(ws)
    ]
    long = pd.DataFrame(rows, columns=ROW_KEY)
    long["word"] = long["word"].map(normalize_word)
    unusable = int((long["word"] == "").sum())
    long = long[long["word"] != ""]
    counts = long.groupby(ROW_KEY, sort=True).size().rename("count").reset_index()
    counts["word"] = counts["word"].astype(object)
    counts["count"] = counts["count"].astype(np.int64)
    stats = {
        "positions": len(frame),
        "samples": len(long),
        "rejected": int(frame["rejected"].sum()) + unusable,
        "positions_without_samples": int(len(frame) - counts[KEY].drop_duplicates().shape[0]),
    }
    return counts, stats


def surface_counts(shards: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Merge sampled shards into counts of the words as generated (``text_id, word_num, word, count``, raw words).

    This is what the samples file stores: readers normalise it
    (:func:`unsure.nextword.data.read_samples`), and the biased estimator
    scores the surfaces themselves. Words that normalise to nothing are left
    out (:func:`sample_counts` counts them as rejected).
    """
    frame = pd.concat(list(shards), ignore_index=True)
    require(frame, [*KEY, "words"], "samples")
    rows = [
        (int(t), int(n), w)
        for t, n, ws in zip(frame["text_id"], frame["word_num"], frame["words"], strict=True)
        for w in json.loads(ws)
        if normalize_word(w)
    ]
    long = pd.DataFrame(rows, columns=ROW_KEY)
    counts = long.groupby(ROW_KEY, sort=True).size().rename("count").reset_index()
    counts["word"] = counts["word"].astype(object)
    return counts.astype({"text_id": np.int64, "word_num": np.int64, "count": np.int64})


# ----------------------------------------------------------------------------- biased estimator


def biased_support(chunk: pd.DataFrame, *tables: pd.DataFrame) -> dict[tuple[int, int], dict[str, list[str]]]:
    """Support of the biased estimator per position: normalised word -> the surface forms that give it.

    Each table has ``text_id, word_num, surface``: samples as generated,
    responses as typed, the corpus word as in the text, nucleus and greedy
    words. Surfaces are reduced to :func:`~unsure.nextword.words.surface_form`
    (so ``"nationwide."`` is scored as ``nationwide``) and grouped by their
    normalised word; words and surfaces are sorted.
    """
    keys = {(int(t), int(n)) for t, n in zip(chunk["text_id"], chunk["word_num"], strict=True)}
    support: dict[tuple[int, int], dict[str, set[str]]] = {k: {} for k in keys}
    for table in tables:
        for t, n, raw in zip(table["text_id"], table["word_num"], table["surface"], strict=True):
            key = (int(t), int(n))
            surface = surface_form(str(raw))
            word = normalize_word(surface)
            if key in support and word:
                support[key].setdefault(word, set()).add(surface)
    return {k: {w: sorted(v[w]) for w in sorted(v)} for k, v in support.items()}


def word_logprobs(surfaces: dict[str, list[str]], logprobs: npt.ArrayLike) -> list[float]:
    """Per normalised word, the log-sum-exp of its surfaces' log-probabilities (given in the support's order).

    ``Parker`` and ``parker`` are two ways the model can write the word
    ``parker``; the word's probability is the sum of both.
    """
    lp = np.asarray(logprobs, dtype=np.float64)
    out, i = [], 0
    for forms in surfaces.values():
        out.append(float(np.logaddexp.reduce(lp[i : i + len(forms)])))
        i += len(forms)
    if i != len(lp):
        raise ValueError(f"{len(lp)} log-probabilities for {i} surface forms")
    return out


@dataclass(frozen=True, eq=False)
class BiasedScorer:
    """Scorer of the biased estimator (appendix A): per position, its support and the words' log-probabilities.

    ``samples``, ``human`` and ``corpus`` are surface tables (``text_id,
    word_num, surface``): the unbiased samples as generated
    (:func:`unsure.nextword.data.read_surface_samples`), the responses as
    typed and the corpus word as in the text. The support adds the words of
    the estimator's own nucleus and greedy samples
    (:func:`~.requests.support_sampling_requests`). Every surface form is scored as
    the model would produce it (its joint log-probability after the context,
    with a leading space: ``" Parker"``, never the normalised ``" parker"``)
    and a word's log-probability is the log-sum-exp over its surfaces.
    Columns ``row_id, text_id, word_num, words, logprobs, surfaces`` (JSON);
    :func:`biased_table` renormalises over the support. :meth:`requests` says
    what each position sends the engine (the request cache's key).
    """

    engine: Engine
    samples: pd.DataFrame
    human: pd.DataFrame
    corpus: pd.DataFrame
    nucleus: tuple[float, ...]
    nucleus_samples: int
    seed: int = 0
    max_new_tokens: int = 12

    def _sampling(self, chunk: pd.DataFrame) -> list[list[WordSamplingRequest]]:
        return support_sampling_requests(
            [str(r) for r in chunk["row_id"]],
            [str(c) for c in chunk["context"]],
            nucleus=self.nucleus,
            nucleus_samples=self.nucleus_samples,
            seed=self.seed,
            max_new_tokens=self.max_new_tokens,
        )

    def _support(self, chunk: pd.DataFrame, *sampled: pd.DataFrame) -> dict[tuple[int, int], dict[str, list[str]]]:
        return biased_support(chunk, self.samples, self.human, self.corpus, *sampled)

    def requests(self, chunk: pd.DataFrame) -> list[tuple[WordSamplingRequest | ContinuationRequest, ...]]:
        """Per position, its sampling requests (one per setting) and the continuation request of
        the support known before them (samples, responses, corpus word). The surfaces the
        sampling adds are the engine's answers to those requests, so the two decide what is
        scored; a changed samples file or response changes only its positions' keys."""
        support = self._support(chunk)
        keys = [(int(t), int(n)) for t, n in zip(chunk["text_id"], chunk["word_num"], strict=True)]
        known = support_requests(
            [str(c) for c in chunk["context"]], [[s for forms in support[k].values() for s in forms] for k in keys]
        )
        per_setting = self._sampling(chunk)
        return [(*(setting[i] for setting in per_setting), known[i]) for i in range(len(chunk))]

    def __call__(self, chunk: pd.DataFrame) -> pd.DataFrame:
        keys = [(int(t), int(n)) for t, n in zip(chunk["text_id"], chunk["word_num"], strict=True)]
        extra_rows: list[tuple[int, int, str]] = []
        for requests in self._sampling(chunk):
            for key, out in zip(keys, self.engine.sample_words(requests), strict=True):
                extra_rows += [(*key, w) for w in out.words]
        extra = pd.DataFrame(extra_rows, columns=[*KEY, "surface"])
        support = self._support(chunk, extra)
        surfaces = [[s for forms in support[k].values() for s in forms] for k in keys]
        contexts = [str(c) for c in chunk["context"]]
        scores = self.engine.continuation_scores(support_requests(contexts, surfaces))
        return pd.DataFrame(
            {
                "row_id": chunk["row_id"].to_numpy(),
                "text_id": chunk["text_id"].to_numpy(dtype=np.int64),
                "word_num": chunk["word_num"].to_numpy(dtype=np.int64),
                "words": [json.dumps(list(support[k]), ensure_ascii=False) for k in keys],
                "logprobs": [
                    json.dumps(word_logprobs(support[k], s.logprob)) for k, s in zip(keys, scores, strict=True)
                ],
                "surfaces": [json.dumps(support[k], ensure_ascii=False) for k in keys],
            }
        )


def biased_scorer(
    engine: Engine,
    *,
    samples: pd.DataFrame,
    human: pd.DataFrame,
    corpus: pd.DataFrame,
    nucleus: Sequence[float],
    nucleus_samples: int,
    seed: int = 0,
    max_new_tokens: int = 12,
) -> BiasedScorer:
    """Scorer of the biased estimator (see :class:`BiasedScorer`)."""
    return BiasedScorer(engine, samples, human, corpus, tuple(nucleus), nucleus_samples, seed, max_new_tokens)


def biased_table(shards: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """The biased estimator's probability table (``text_id, word_num, word, logprob, prob``) from scored shards.

    ``prob`` is ``exp(logprob)`` renormalised over the position's support.
    """
    frame = pd.concat(list(shards), ignore_index=True)
    require(frame, [*KEY, "words", "logprobs"], "biased estimator scores")
    parts = []
    for t, n, words, lps in zip(frame["text_id"], frame["word_num"], frame["words"], frame["logprobs"], strict=True):
        lp = np.asarray(json.loads(lps), dtype=np.float64)
        z = np.exp(lp - lp.max())
        parts.append(
            pd.DataFrame(
                {"text_id": int(t), "word_num": int(n), "word": json.loads(words), "logprob": lp, "prob": z / z.sum()}
            )
        )
    out = pd.concat(parts, ignore_index=True)
    return out.sort_values(ROW_KEY, ignore_index=True)


# ----------------------------------------------------------------------------- token level


@dataclass(frozen=True, eq=False)
class TokenScorer:
    """Scorer of the token level (appendix D), for a Hugging Face engine.

    For every human word at a position, its first token after the context
    (the word with its leading space, split as running text:
    :func:`~.requests.first_tokens`); the model's full-softmax log-probability
    of each such token, and the model's modal token over the whole vocabulary
    (Table 4 scores it against the humans' majority token), both from
    :meth:`HFEngine.token_logprobs`. Returns one row per position: ``row_id,
    text_id, word_num, tokens`` (JSON: word -> token id), ``logprobs`` (JSON:
    token id -> log-probability), ``modal_token`` and ``modal_logprob``.
    :meth:`requests` says what each position sends and reads (the request cache's key).
    """

    engine: HFEngine
    words: dict[tuple[int, int], list[str]]
    """The human words of each position (``text_id, word_num``)."""

    def _asked(self, chunk: pd.DataFrame) -> list[tuple[TokenLogprobsRequest, dict[str, int]]]:
        out = []
        for t, n, c in zip(chunk["text_id"], chunk["word_num"], chunk["context"], strict=True):
            words = self.words.get((int(t), int(n)), [])
            if not words:
                raise ValueError(f"token level: no human responses at position (text_id={t}, word_num={n})")
            context_ids, firsts = first_tokens(str(c), words, self.engine.split_pair)
            out.append((token_request(context_ids, firsts), firsts))
        return out

    def requests(self, chunk: pd.DataFrame) -> list[tuple[TokenLogprobsRequest, tuple[tuple[str, int], ...]]]:
        """Per position, its request and the words it reads the answer for (word, first token):
        a word whose first token the request already reads still changes the row's ``tokens``."""
        return [(request, tuple(firsts.items())) for request, firsts in self._asked(chunk)]

    def __call__(self, chunk: pd.DataFrame) -> pd.DataFrame:
        asked = self._asked(chunk)
        requests = [r for r, _ in asked]
        results = self.engine.token_logprobs(requests)
        return pd.DataFrame(
            {
                "row_id": chunk["row_id"].to_numpy(),
                "text_id": chunk["text_id"].to_numpy(dtype=np.int64),
                "word_num": chunk["word_num"].to_numpy(dtype=np.int64),
                "tokens": [json.dumps(m, ensure_ascii=False) for _, m in asked],
                "logprobs": [
                    json.dumps({str(i): float(lp) for i, lp in zip(req.read_ids, r.logprobs, strict=True)})
                    for req, r in zip(requests, results, strict=True)
                ],
                "modal_token": np.asarray([r.modal_token for r in results], dtype=np.int64),
                "modal_logprob": np.asarray([r.modal_logprob for r in results]),
            }
        )


def token_scorer(engine: HFEngine, human: pd.DataFrame) -> TokenScorer:
    """Scorer of the token level of the human responses ``human`` (a counts table; see :class:`TokenScorer`)."""
    return TokenScorer(engine, {(int(t), int(n)): list(g["word"]) for (t, n), g in human.groupby(KEY, sort=False)})


OTHER_TOKENS = "<other>"
"""Pseudo-token holding the model's probability mass outside the human responses' first tokens."""


def token_distributions(scored: pd.DataFrame, counts: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Human first-token counts and the model's token probability table, for :func:`unsure.nextword.metrics.tvd`.

    ``counts`` is a counts table of words (the human responses, or one half of
    an oracle split): each word's count goes to its first token. The model's
    table holds the probabilities of those tokens plus :data:`OTHER_TOKENS`
    with the rest of its mass, so the TVD over it is exact although only the
    human tokens were read.
    """
    require(scored, [*KEY, "tokens", "logprobs"], "token-level scores")
    human_rows = []
    model_rows = []
    maps = {}
    for t, n, tokens, lps in zip(
        scored["text_id"], scored["word_num"], scored["tokens"], scored["logprobs"], strict=True
    ):
        key = (int(t), int(n))
        maps[key] = json.loads(tokens)
        probs = {k: float(np.exp(v)) for k, v in json.loads(lps).items()}
        for tok, p in probs.items():
            model_rows.append((*key, tok, p))
        model_rows.append((*key, OTHER_TOKENS, max(0.0, 1.0 - sum(probs.values()))))
    for t, n, w, c in zip(counts["text_id"], counts["word_num"], counts["word"], counts["count"], strict=True):
        key = (int(t), int(n))
        if key in maps:
            if w not in maps[key]:
                raise ValueError(f"token level: word {w!r} at position {key} has no first token")
            human_rows.append((*key, str(maps[key][w]), int(c)))
    human_tokens = pd.DataFrame(human_rows, columns=[*KEY, "word", "count"])
    human_tokens = human_tokens.groupby([*KEY, "word"], sort=True, as_index=False)["count"].sum()
    model = pd.DataFrame(model_rows, columns=[*KEY, "word", "prob"])
    model["prob"] = model["prob"] / model.groupby(KEY)["prob"].transform("sum")
    return human_tokens, model

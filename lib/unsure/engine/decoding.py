"""Decoding token by token over a KV cache: greedy digits (numeric answers), greedy replies,
and word samples drawn as a tree.

* **Samples as a tree.** Word samples that drew the same tokens so far share
  one row of the forward pass, and the samples of several requests decode in
  one batch, each with its own generator.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import torch
from transformers.generation.logits_process import (
    LogitsProcessorList,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from unsure.engine.forward import Counters, Runner, additive_mask, causal_pairs, shared_head
from unsure.engine.requests import WordSamples, WordSamplingRequest
from unsure.engine.tokens import Codec
from unsure.engine.words import first_word

SAMPLE_LOGITS = 1 << 28
"""Logits a decoding step of word sampling may hold (1 GiB in float32): the sample rows of a
batch are at most this over the vocabulary size, and at most the token budget."""

SAMPLE_CHUNK = 256
"""Samples of one request drawn with one generator. Fixed, so the words drawn
for a seed do not depend on memory settings."""


@dataclass
class SampleGroup:
    """A chunk of one request's samples: its own generator, its own rows of a decoding batch."""

    request_index: int
    request: WordSamplingRequest
    context: list[int]
    size: int
    seed: int


def _warpers(req: WordSamplingRequest) -> LogitsProcessorList:
    """The request's temperature, top-k and top-p, as transformers applies them."""
    warpers = LogitsProcessorList()
    if req.temperature != 1.0:
        warpers.append(TemperatureLogitsWarper(req.temperature))
    if req.top_k:
        warpers.append(TopKLogitsWarper(req.top_k))
    if req.top_p is not None and req.top_p < 1.0:
        warpers.append(TopPLogitsWarper(req.top_p))
    return warpers


def _runs(owner: list[int]) -> Iterator[tuple[int, slice]]:
    """(group, its rows) for each run of equal owners (a decoding batch keeps groups contiguous)."""
    start = 0
    for end in range(1, len(owner) + 1):
        if end == len(owner) or owner[end] != owner[start]:
            yield owner[start], slice(start, end)
            start = end


class Decoder:
    """Token-by-token decoding of a :class:`Runner`'s model, text through a :class:`Codec`."""

    def __init__(self, runner: Runner, codec: Codec) -> None:
        self.runner = runner
        self.codec = codec

    # ------------------------------------------------------------------ greedy

    def greedy_tokens(self, contexts: Sequence[list[int]], allowed: list[int], steps: int) -> list[list[int]]:
        """``steps`` greedy tokens after each context, each the likeliest of ``allowed``
        (ties: the lowest id), in token-budget batches."""
        lengths = [len(c) + steps for c in contexts]
        allowed_ids = torch.tensor(allowed, device=self.runner.head_device)
        launch = partial(self._greedy_batch, allowed=allowed_ids, steps=steps)
        return self.runner.pipelined(contexts, lengths, launch, _read_tokens)

    def _greedy_batch(
        self, contexts: list[list[int]], *, allowed: torch.Tensor, steps: int
    ) -> tuple[torch.Tensor, Any]:
        """One left-padded batch of :meth:`greedy_tokens`, queued: its tokens on their way to the host.

        The prompts run once; each later pass feeds only the token just chosen,
        attending to the KV cache. The output projection runs on the last position
        alone (in float32, soft-capped like every other read). Not ``model.generate``:
        transformers merges the checkpoint's ``generation_config`` into every call,
        and its logits processors (e.g. a repetition penalty) would move the argmax.
        """
        runner = self.runner
        start = time.perf_counter()
        head, work = greedy_work(contexts, steps)
        ids, mask = runner.left_padded([c[head:] for c in contexts])
        positions = head + (mask.cumsum(dim=1) - 1).clamp(min=0)
        cache = None
        chosen = []
        with torch.inference_mode():
            if head:  # the opening every prompt shares, encoded once; the padding sits after it, masked
                cache = runner.head_cache(contexts[0][:head], len(contexts))
                mask = torch.cat([torch.ones((len(contexts), head), dtype=mask.dtype, device=mask.device), mask], dim=1)
            attention = prompt_mask(mask, ids.shape[1], runner.dtype)
            for _ in range(steps):
                out = runner.model.base_model(
                    input_ids=ids,
                    attention_mask=attention,
                    position_ids=positions,
                    cache=cache,
                    use_cache=True,
                )
                ids = greedy_pick(runner.logits(out.last_hidden_state[:, -1]), allowed).to(runner.device)
                chosen.append(ids)
                cache = out.cache
                mask = torch.cat([mask, torch.ones_like(ids)], dim=1)
                attention = additive_mask(mask[:, None, :].bool(), runner.dtype)
                positions = positions[:, -1:] + 1
        runner.add(work, start)
        return runner.to_host(torch.cat(chosen, dim=1))

    def generate(self, contexts: Sequence[list[int]], max_new_tokens: int) -> list[str]:
        """Greedy replies by ``model.generate``, in token-budget batches of similar length."""
        lengths = [len(c) + max_new_tokens for c in contexts]
        return self.runner.in_batches(contexts, lengths, partial(self._generate_batch, max_new_tokens=max_new_tokens))

    def _generate_batch(self, contexts: list[list[int]], *, max_new_tokens: int) -> list[str]:
        """One left-padded ``model.generate`` call; new tokens up to each row's first stop token."""
        runner = self.runner
        start = time.perf_counter()
        ids, mask = runner.left_padded(contexts)
        width = ids.shape[1]
        with torch.inference_mode():
            out = runner.model.generate(
                ids,
                attention_mask=mask,
                max_new_tokens=max_new_tokens,
                do_sample=False,
                pad_token_id=self.codec.tokenizer.eos_token_id,
            )
        stops = self.stop_ids()
        new_tokens = []
        for row in out[:, width:].tolist():
            end = next((j + 1 for j, t in enumerate(row) if t in stops), len(row))
            new_tokens.append(row[:end])
        runner.add(reply_work(contexts, [len(t) for t in new_tokens], out.shape[1] - width), start)
        texts: list[str] = self.codec.tokenizer.batch_decode(new_tokens, skip_special_tokens=True)
        return texts

    def stop_ids(self) -> set[int]:
        """The ids on which ``generate`` ends a sequence (what follows them is padding)."""
        eos = self.runner.model.generation_config.eos_token_id
        if eos is None:
            return set()
        return {int(eos)} if isinstance(eos, int) else {int(e) for e in eos}

    # ------------------------------------------------------------------ sampling

    def sample_words(self, requests: Sequence[WordSamplingRequest]) -> list[WordSamples]:
        """First complete words of ancestral samples.

        A request's samples are drawn in chunks of :data:`SAMPLE_CHUNK`, each with its
        own generator (seeded from the request's seed), as a tree over the context's
        KV cache (:meth:`_sample_groups`). Chunks of several requests decode together,
        in token-budget batches of sample rows: the words drawn for a seed are those
        it draws alone, up to float noise in the logits of a differently shaped batch.
        """
        groups: list[SampleGroup] = []
        for req in requests:
            if req.n < 1:
                raise ValueError(f"word sampling needs n >= 1, got {req.n}")
        contexts = self.codec.encode_many([req.context for req in requests])
        for i, (req, context) in enumerate(zip(requests, contexts, strict=True)):
            for chunk, offset in enumerate(range(0, req.n, SAMPLE_CHUNK)):
                seed = int.from_bytes(hashlib.sha256(f"{req.seed}:{chunk}".encode()).digest()[:8], "little")
                groups.append(SampleGroup(i, req, context, min(SAMPLE_CHUNK, req.n - offset), seed))
        rows = max(SAMPLE_CHUNK, SAMPLE_LOGITS // self.runner.vocab_size)
        drawn = self.runner.in_batches(groups, [g.size for g in groups], self._sample_groups, cap=rows)
        words: list[list[str]] = [[] for _ in requests]
        rejected = [0] * len(requests)
        for group, (got, bad) in zip(groups, drawn, strict=True):
            words[group.request_index] += got
            rejected[group.request_index] += bad
        return [WordSamples(words=w, rejected=r) for w, r in zip(words, rejected, strict=True)]

    def _sample_groups(self, groups: list[SampleGroup]) -> list[tuple[list[str], int]]:
        """Each group's words and rejections, drawn as trees decoded in one batch.

        Samples of a group that drew the same tokens so far share one row of the
        forward pass, and a row holding ``c`` samples draws ``c`` next tokens from
        its distribution (inverse CDF), with the group's generator. The words are
        exactly those of independent samples; only their order is drawn at the end.
        The contexts run once, left-padded; rows stay in group order.
        """
        device = self.runner.device
        tokenizer = self.codec.tokenizer
        with torch.inference_mode():  # the logits are updated in place
            contexts = {g.request_index: g.context for g in groups}  # one per request, in order
            row_of = {r: i for i, r in enumerate(contexts)}
            cache, logits, mask = self._context_cache(list(contexts.values()))
            first = torch.tensor([row_of[g.request_index] for g in groups], device=device)
            cache.batch_select_indices(first)
            logits, mask = logits[first], None if mask is None else mask[first]
            warpers = [_warpers(g.request) for g in groups]
            gens = [torch.Generator(device=device).manual_seed(g.seed) for g in groups]
            words: list[list[str]] = [[] for _ in groups]
            rejected = [0] * len(groups)
            prefixes: list[tuple[int, ...]] = [() for _ in groups]
            memo: dict[tuple[int, ...], str] = {}  # groups often draw the same tokens
            owner, counts = list(range(len(groups))), [g.size for g in groups]
            eos = tokenizer.eos_token_id
            for step in range(max(g.request.max_new_tokens for g in groups)):
                for g, rows in _runs(owner):
                    if warpers[g]:
                        history = torch.tensor([[*groups[g].context, *p] for p in prefixes[rows]], device=device)
                        logits[rows] = warpers[g](history, logits[rows])
                draws = torch.repeat_interleave(torch.tensor(counts, device=device))
                uniform = torch.cat(
                    [
                        torch.rand(sum(counts[rows]), generator=gens[g], dtype=torch.float64, device=device)
                        for g, rows in _runs(owner)
                    ]
                )
                drawn = _inverse_cdf(logits, draws, uniform)
                pairs, n_pair = torch.unique(torch.stack([draws, drawn], dim=1), dim=0, return_counts=True)
                parents, kept = [], []
                drawn_pairs = pairs.tolist()
                seqs = [(*prefixes[row], token) for row, token in drawn_pairs]
                texts = self.codec.decode_many(seqs, memo)
                for (row, token), k, seq, text in zip(drawn_pairs, n_pair.tolist(), seqs, texts, strict=True):
                    g = owner[row]
                    # Only the end of the text settles a word at its end; running out of new
                    # tokens does not (the word may go on), so such samples are rejected.
                    word, done = first_word(text, finished=eos is not None and token == eos)
                    if done and word is not None:
                        words[g] += [word] * k
                    elif done or step == groups[g].request.max_new_tokens - 1:
                        rejected[g] += k
                    else:
                        parents.append(row)
                        kept.append((g, seq, k))
                if not kept:
                    break
                owner, prefixes, counts = [g for g, _, _ in kept], [s for _, s, _ in kept], [k for _, _, k in kept]
                positions = [len(groups[g].context) + step for g in owner]
                logits, mask = self._decode_step(cache, [s[-1] for s in prefixes], positions, parents, mask)
            result = []
            for g, gen in enumerate(gens):
                order = torch.randperm(len(words[g]), generator=gen, device=device).tolist()
                result.append(([words[g][i] for i in order], rejected[g]))
            return result

    def _context_cache(self, contexts: list[list[int]]) -> tuple[Any, torch.Tensor, torch.Tensor | None]:
        """KV cache and last-position logits of left-padded ``contexts``, and their attention
        mask (None where no row is padded)."""
        runner = self.runner
        start = time.perf_counter()
        ids, mask = runner.left_padded(contexts)
        padded = bool((mask == 0).any())
        out = runner.model.base_model(
            input_ids=ids,
            attention_mask=mask if padded else None,
            position_ids=(mask.cumsum(dim=1) - 1).clamp(min=0),
            use_cache=True,
        )
        logits = runner.logits(out.last_hidden_state[:, -1])
        runner.add(context_work(contexts), start)
        return out.cache, logits, mask if padded else None

    def _decode_step(
        self, cache: Any, tokens: list[int], positions: list[int], parents: list[int], mask: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Next-token logits of one new token per row, row ``i`` continuing cache row
        ``parents[i]`` (the cache is reordered in place); the mask, extended."""
        runner = self.runner
        start = time.perf_counter()
        selected = torch.tensor(parents, device=runner.device)
        cache.batch_select_indices(selected)
        if mask is not None:
            mask = torch.cat([mask[selected], torch.ones_like(mask[selected, :1])], dim=1)
        out = runner.model.base_model(
            input_ids=torch.tensor(tokens, device=runner.device)[:, None],
            attention_mask=mask,
            position_ids=torch.tensor(positions, device=runner.device)[:, None],
            cache=cache,
            use_cache=True,
        )
        runner.add(step_work(positions), start)
        return runner.logits(out.last_hidden_state[:, -1], reuse=True), mask  # the last step's are spent


def greedy_work(contexts: Sequence[list[int]], steps: int) -> tuple[int, Counters]:
    """The shared opening (:func:`shared_head`) of a greedy batch and its work: the prompts once
    (the opening once for all rows), then one token per row for each later step."""
    shortest = min(map(len, contexts))
    head = shared_head(np.array([c[:shortest] for c in contexts]), [len(c) for c in contexts])
    return head, Counters(
        tokens=head + sum(len(c) - head for c in contexts) + len(contexts) * (steps - 1),
        forward_passes=steps,
        logit_rows=len(contexts) * steps,
        attended=causal_pairs([len(c) + steps - 1 for c in contexts]) - (len(contexts) - 1) * causal_pairs([head]),
    )


def reply_work(contexts: Sequence[list[int]], replies: Sequence[int], steps: int) -> Counters:
    """The work of a ``generate`` batch whose rows replied ``replies`` tokens in ``steps`` passes."""
    return Counters(
        tokens=sum(map(len, contexts)) + sum(replies),
        forward_passes=steps,
        logit_rows=len(contexts) * steps,
        attended=causal_pairs([len(c) + n for c, n in zip(contexts, replies, strict=True)]),
    )


def context_work(contexts: Sequence[list[int]]) -> Counters:
    """The work of the sampling contexts' pass: every token, the last position read."""
    return Counters(
        tokens=sum(map(len, contexts)),
        forward_passes=1,
        logit_rows=len(contexts),
        attended=causal_pairs(map(len, contexts)),
    )


def step_work(positions: Sequence[int]) -> Counters:
    """The work of one decoding step: a new token per row, at these positions, on its cache."""
    return Counters(
        tokens=len(positions), forward_passes=1, logit_rows=len(positions), attended=sum(positions) + len(positions)
    )


def _read_tokens(launched: tuple[torch.Tensor, Any]) -> list[list[int]]:
    """A greedy batch's tokens, once their copy to the host is done (the one wait per batch)."""
    tokens, done = launched
    if done is not None:
        done.synchronize()
    best: list[list[int]] = tokens.tolist()
    return best


def greedy_pick(logits: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Per row the likeliest of the ``allowed`` ids (ties: the first listed), as a column."""
    return allowed[logits[:, allowed].argmax(dim=-1)][:, None]


def prompt_mask(mask: torch.Tensor, width: int, dtype: torch.dtype) -> torch.Tensor:
    """The 4-D additive mask of left-padded prompts, the last ``width`` columns of the 2-D ``mask``
    (those before them a cached opening): causal, padding hidden, a padded query seeing itself.
    Built here because from a 2-D mask transformers asks the device whether any row is padded."""
    keys = torch.arange(mask.shape[1], device=mask.device)
    queries = mask.shape[1] - width + torch.arange(width, device=mask.device)
    seen = (keys <= queries[:, None]) & mask[:, None, :].bool() | (keys == queries[:, None])
    return additive_mask(seen, dtype)


CDF_BLOCK = 256
"""Tokens per block of the two-level inverse-CDF sampler."""

EXP_CHUNK = 1 << 20
"""Logits exponentiated and summed per block together on a CPU (rows times vocabulary): a few MiB, in cache."""


def _inverse_cdf(logits: torch.Tensor, rows: torch.Tensor, uniform: torch.Tensor) -> torch.Tensor:
    """One token per uniform draw, sample ``j`` from row ``rows[j]`` of ``softmax(logits)``.

    Two levels, cumulated in double precision: a block of :data:`CDF_BLOCK`
    tokens by the blocks' summed mass, then a token within the block. A full
    cumulative sum over the vocabulary for every row would cost more than the
    forward pass that produced the logits. ``logits`` become unnormalised
    probabilities in place (the CDF is scaled by its total), a few rows at a
    time so that each pass over them stays in cache.
    """
    n_rows, vocab = logits.shape
    full, n_blocks = vocab // CDF_BLOCK, -(-vocab // CDF_BLOCK)
    block_mass = torch.empty((n_rows, n_blocks), dtype=torch.float64, device=logits.device)
    step = n_rows if logits.is_cuda else max(1, EXP_CHUNK // vocab)  # a GPU takes them at once
    for a in range(0, n_rows, step):
        part = logits[a : a + step]
        part.sub_(part.amax(dim=-1, keepdim=True)).exp_()
        block_mass[a : a + step, :full] = part[:, : full * CDF_BLOCK].unflatten(-1, (full, CDF_BLOCK)).sum(dim=-1)
        if full < n_blocks:
            block_mass[a : a + step, full] = part[:, full * CDF_BLOCK :].sum(dim=-1)
    block_cdf = block_mass.cumsum(dim=-1)[rows]
    u = uniform * block_cdf[:, -1]
    block = torch.searchsorted(block_cdf, u[:, None], right=True).clamp_(max=n_blocks - 1)
    before = torch.where(block > 0, block_cdf.gather(1, (block - 1).clamp(min=0)), 0.0)[:, 0]
    mass = block_cdf.gather(1, block)[:, 0] - before
    columns = block * CDF_BLOCK + torch.arange(CDF_BLOCK, device=logits.device)
    inside = columns < vocab
    within = torch.where(inside, logits[rows[:, None], columns.clamp(max=vocab - 1)], 0.0).double().cumsum(dim=-1)
    # where u falls inside its block, on the block's own cumulative sum
    share = ((u - before) / mass).clamp(0.0, 1.0) * within[:, -1]
    token = torch.searchsorted(within, share[:, None], right=True).clamp_(max=CDF_BLOCK - 1)[:, 0]
    return (block[:, 0] * CDF_BLOCK + token).clamp_(max=vocab - 1)

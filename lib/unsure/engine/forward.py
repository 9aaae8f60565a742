"""The packed forward: token-budget batches of packed sequences through a causal LM's body,
the output projection only where a prediction is read.

* **Shared prefixes, one pass.** A context and all its continuations are packed
  into one sequence; the attention layout lets each continuation see the
  context and itself but not its siblings, and position ids restart after the
  context for every continuation. The context is encoded once per request.
* **Logits only where read.** The base model returns hidden states; the output
  projection and the log-softmax run only on the positions whose predictions
  are read, never over the whole sequence.
* **A batch's shared opening, once.** Tokens every sequence of a batch starts
  with (an instruction, a chat header, a task's demonstrations) are encoded
  once, as a KV cache each row attends to.
* **Token-budget batches.** Requests are sorted by packed length and batched
  until ``token_budget`` padded tokens; padding is masked, so a request's
  numbers do not depend on what else is in its batch. Out of memory halves the
  batch and retries.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import torch
from transformers import PreTrainedModel

log = logging.getLogger(__name__)

_T = TypeVar("_T")
_R = TypeVar("_R")

CPU_TOKEN_BUDGET = 2_048
"""Padded tokens per forward pass on a CPU. Measured with ``bench/engine.py``'s
budget sweep: on ACS risk prompts 2,048 ran fastest at hidden sizes 256, 512
and 1,024 (about twice the rows/s of 16,384), the activations staying in cache."""

GPU_TOKEN_BUDGET = 16_384
"""Padded tokens per forward pass on a GPU, where larger batches fill the device."""


@dataclass
class Packed:
    """One packed sequence: a context, its continuations, ids read after the context.

    With ``read_tails`` the continuations are the differing tails of prompts that
    share the context as their common prefix: ``read_ids`` are read after each
    tail instead (one row per tail), and no token of a tail is scored.
    """

    context: list[int]
    continuations: list[list[int]] = field(default_factory=list)
    read_ids: list[int] = field(default_factory=list)
    read_tails: bool = False

    @property
    def length(self) -> int:
        return len(self.context) + sum(len(c) for c in self.continuations)


@dataclass
class PackedResult:
    """Per continuation its tokens' log-probs and greedy flags; log-probs of ``read_ids``
    (one row per tail under ``read_tails``)."""

    token_logprobs: list[npt.NDArray[np.float64]]
    token_greedy: list[npt.NDArray[np.bool_]]
    read_logprobs: npt.NDArray[np.float64]


@dataclass
class Counters:
    """What the engine processed, for throughput summaries."""

    tokens: int = 0
    forward_passes: int = 0
    seconds: float = 0.0
    logit_rows: int = 0
    """Positions the output projection ran on (model FLOPs count it there, not per token)."""
    attended: int = 0
    """Query-key pairs attention ran on, each token on its causal prefix (the model FLOPs of attention)."""


class Runner:
    """A loaded causal LM run in token-budget batches: the body, the output projection where
    read, the KV cache of a shared opening, and the counters of what ran."""

    def __init__(self, model: PreTrainedModel, *, token_budget: int | None, max_batch_size: int, pad_id: int) -> None:
        self.model = model
        self.device: torch.device = model.get_input_embeddings().weight.device
        self.token_budget = token_budget or (GPU_TOKEN_BUDGET if self.device.type == "cuda" else CPU_TOKEN_BUDGET)
        self.max_batch_size = max_batch_size
        self.pad_id = pad_id
        self.counters = Counters()

    @property
    def dtype(self) -> torch.dtype:
        return self.model.dtype

    @property
    def vocab_size(self) -> int:
        """Rows of the output projection."""
        return int(self.model.get_output_embeddings().out_features)

    # ------------------------------------------------------------------ batching

    def in_batches(
        self,
        items: Sequence[_T],
        lengths: Sequence[int],
        run: Callable[[list[_T]], list[_R]],
        *,
        cap: int | None = None,
    ) -> list[_R]:
        """``run`` on token-budget batches (at most ``cap``) of similar ``lengths``, longest first,
        halved on out of memory; results in input order."""
        results: dict[int, _R] = {}
        order = sorted(range(len(items)), key=lambda i: -lengths[i])
        for batch in self._batches(order, lengths, cap):
            results.update(zip(batch, self._with_backoff(run, [items[i] for i in batch]), strict=True))
        return [results[i] for i in range(len(items))]

    def _batches(self, order: list[int], lengths: Sequence[int], cap: int | None = None) -> Iterator[list[int]]:
        """Consecutive runs of ``order`` whose padded size (longest times count) fits the token
        budget (as halved on out of memory) and ``cap``."""
        batch: list[int] = []
        longest = 0
        for i in order:
            n = lengths[i]
            budget = self.token_budget if cap is None else min(cap, self.token_budget)
            if batch and (max(longest, n) * (len(batch) + 1) > budget or len(batch) >= self.max_batch_size):
                yield batch
                batch, longest = [], 0
            batch.append(i)
            longest = max(longest, n)
        if batch:
            yield batch

    def _with_backoff(self, run: Callable[[list[_T]], list[_R]], batch: list[_T]) -> list[_R]:
        """``run(batch)``; out of memory halves the batch (and the token budget) and retries."""
        try:
            return run(batch)
        except RuntimeError as err:  # torch.OutOfMemoryError is a RuntimeError
            if not _is_out_of_memory(err) or len(batch) == 1:
                raise
            torch.cuda.empty_cache()
            self.token_budget = max(1, self.token_budget // 2)
            log.warning("out of memory with %d sequences; halving (token budget now %d)", len(batch), self.token_budget)
            half = len(batch) // 2
            return self._with_backoff(run, batch[:half]) + self._with_backoff(run, batch[half:])

    # ------------------------------------------------------------------ packed forward

    def run_packed(self, items: Sequence[Packed]) -> list[PackedResult]:
        """Score packed sequences in token-budget batches of similar length."""
        return self.in_batches(items, [p.length for p in items], self.forward)

    def forward(self, batch: list[Packed]) -> list[PackedResult]:
        """One batch of packed sequences: log-probs of every continuation token and of every read id."""
        start = time.perf_counter()
        width = max(p.length for p in batch)
        ids = torch.zeros((len(batch), width), dtype=torch.long)
        positions = torch.zeros((len(batch), width), dtype=torch.long)
        segments = torch.full((len(batch), width), -1, dtype=torch.long)
        rows: list[int] = []
        cols: list[int] = []
        targets: list[int] = []
        read_rows: list[int] = []
        read_cols: list[int] = []
        spans: list[tuple[int, list[tuple[int, int]]]] = []
        for b, item in enumerate(batch):
            n_ctx = len(item.context)
            ids[b, :n_ctx] = torch.tensor(item.context)
            positions[b, :n_ctx] = torch.arange(n_ctx)
            segments[b, :n_ctx] = 0
            start_col = n_ctx
            cont_spans = []
            for s, cont in enumerate(item.continuations, start=1):
                end = start_col + len(cont)
                ids[b, start_col:end] = torch.tensor(cont)
                positions[b, start_col:end] = torch.arange(n_ctx, n_ctx + len(cont))
                segments[b, start_col:end] = s
                if item.read_tails:  # a tail is read after its last token (the context's, if empty)
                    read_rows.append(b)
                    read_cols.append(end - 1 if cont else n_ctx - 1)
                else:
                    predictors = [n_ctx - 1, *range(start_col, end - 1)]
                    cont_spans.append((len(targets), len(cont)))
                    rows += [b] * len(cont)
                    cols += predictors
                    targets += cont
                start_col = end
            spans.append((len(read_rows), cont_spans))
            if item.read_ids and not item.read_tails:
                read_rows.append(b)
                read_cols.append(n_ctx - 1)
        mask = self._packed_mask(segments)
        head = shared_head(ids, [len(p.context) for p in batch])
        attended = int(((positions + 1) * (segments >= 0)).sum()) - (len(batch) - 1) * causal_pairs([head])
        with torch.inference_mode():
            cache = None
            if head:  # the tokens every row starts with, encoded once; each row attends to their cache
                cache = self.head_cache(ids[0, :head].tolist(), len(batch))
                ids, positions, segments, mask = (
                    ids[:, head:],
                    positions[:, head:],
                    segments[:, head:],
                    mask[:, :, head:],
                )
                cols = [c - head for c in cols]
                read_cols = [c - head for c in read_cols]
            hidden = self.model.base_model(
                input_ids=ids.to(self.device),
                attention_mask=mask.to(self.device),
                position_ids=positions.to(self.device),
                cache=cache,
                use_cache=cache is not None,
            ).last_hidden_state
            token_lp, token_greedy = self._gather_logprobs(hidden, rows, cols, targets)
            read_lp = self._read_logprobs(hidden, read_rows, read_cols, batch)
        self.count(head + int((segments >= 0).sum()), start, logits=len(rows) + len(read_rows), attended=attended)
        results = []
        read_index = 0
        for item, (_, cont_spans) in zip(batch, spans, strict=True):
            lps = [token_lp[o : o + n] for o, n in cont_spans]
            greedy = [token_greedy[o : o + n] for o, n in cont_spans]
            if item.read_tails:
                n = len(item.continuations)
                read = np.stack(read_lp[read_index : read_index + n])
                read_index += n
            elif item.read_ids:
                read = read_lp[read_index]
                read_index += 1
            else:
                read = np.empty(0)
            results.append(PackedResult(lps, greedy, read))
        return results

    def _packed_mask(self, segments: torch.Tensor) -> torch.Tensor:
        """Additive 4-D mask: causal within the context and within each continuation,
        every continuation sees the context, padding sees only itself."""
        width = segments.shape[1]
        q_seg = segments[:, :, None]
        k_seg = segments[:, None, :]
        causal = torch.ones(width, width, dtype=torch.bool).tril()
        allowed = causal & (k_seg >= 0) & ((k_seg == 0) | (k_seg == q_seg))
        allowed |= torch.eye(width, dtype=torch.bool)  # a padded query attends to itself: no NaN rows
        zero = torch.zeros((), dtype=self.dtype)
        blocked = torch.tensor(torch.finfo(self.dtype).min, dtype=self.dtype)
        return torch.where(allowed, zero, blocked)[:, None, :, :]

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Float32 logits of ``hidden`` states, soft-capped where the model caps them (Gemma-2)."""
        logits = self.model.get_output_embeddings()(hidden).float()
        softcap = getattr(self.model.config, "final_logit_softcapping", None)
        if softcap:
            logits = torch.tanh(logits / softcap) * softcap
        return logits

    def _gather_logprobs(
        self, hidden: torch.Tensor, rows: list[int], cols: list[int], targets: list[int]
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
        if not rows:
            return np.empty(0), np.empty(0, dtype=bool)
        logits = self.logits(hidden[torch.tensor(rows), torch.tensor(cols)])
        logprobs = torch.log_softmax(logits, dim=-1)
        tgt = torch.tensor(targets, device=logits.device)
        picked = logprobs.gather(1, tgt[:, None])[:, 0]
        greedy = logits.argmax(dim=-1) == tgt
        return picked.double().cpu().numpy(), greedy.cpu().numpy()

    def _read_logprobs(
        self, hidden: torch.Tensor, rows: list[int], cols: list[int], batch: list[Packed]
    ) -> list[npt.NDArray[np.float64]]:
        if not rows:
            return []
        logprobs = torch.log_softmax(self.logits(hidden[torch.tensor(rows), torch.tensor(cols)]), dim=-1)
        out = []
        for j, b in enumerate(rows):
            ids = torch.tensor(batch[b].read_ids, device=logprobs.device)
            out.append(logprobs[j, ids].double().cpu().numpy())
        return out

    def head_cache(self, head: list[int], rows: int) -> Any:
        """The KV cache of ``head``, the opening a batch's rows share, run once and repeated for ``rows`` rows."""
        cache = self.model.base_model(
            input_ids=torch.tensor([head], device=self.device), use_cache=True
        ).cache
        cache.batch_repeat_interleave(rows)
        return cache

    def left_padded(self, contexts: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Ids and attention mask with every context ending in the last column, so the
        new tokens of all rows line up; on the model's input device."""
        width = max(len(c) for c in contexts)
        ids = torch.full((len(contexts), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(contexts), width), dtype=torch.long)
        for b, ctx in enumerate(contexts):
            ids[b, width - len(ctx) :] = torch.tensor(ctx)
            mask[b, width - len(ctx) :] = 1
        return ids.to(self.device), mask.to(self.device)

    def count(self, tokens: int, start: float, *, passes: int = 1, logits: int = 0, attended: int = 0) -> None:
        """Add one call's work to the counters (``start``: its ``perf_counter`` at the beginning)."""
        self.counters.tokens += tokens
        self.counters.attended += attended
        self.counters.logit_rows += logits
        self.counters.forward_passes += passes
        self.counters.seconds += time.perf_counter() - start


def causal_pairs(lengths: Iterable[int]) -> int:
    """Query-key pairs of causal attention over sequences of these lengths."""
    return sum(n * (n + 1) // 2 for n in lengths)


SHARED_HEAD_MIN = 16
"""A batch whose rows all open with at least this many equal tokens (an instruction, a chat
header, the demonstrations of a task) encodes them once, as a KV cache every row attends to."""


def shared_head(ids: torch.Tensor, context_lengths: list[int]) -> int:
    """How many leading tokens every row of a packed batch shares (0 if fewer than
    :data:`SHARED_HEAD_MIN`), short of each row's last context token, from which
    the first continuation token is read."""
    limit = min(context_lengths) - 1
    if len(context_lengths) < 2 or limit < SHARED_HEAD_MIN:
        return 0
    differs = (ids[:, :limit] != ids[:1, :limit]).any(dim=0)
    head = int(differs.int().argmax()) if bool(differs.any()) else limit
    return head if head >= SHARED_HEAD_MIN else 0


SHARED_PREFIX_MIN = 0.5
"""Prompts join one packed sequence when their common prefix is at least this share of each."""


def shared_prefix_groups(
    prompts: dict[int, tuple[tuple[int, ...], list[int]]],
) -> list[tuple[list[int], int]]:
    """Groups of prompt indices (with the same ids to read) and their common prefix length.

    Sorting the token lists puts prompts with a long common prefix side by side; a
    prompt joins the group before it while the group's common prefix stays at least
    :data:`SHARED_PREFIX_MIN` of every member. The prefix never takes a prompt's last
    token, so that every tail has one to read after.
    """
    order = sorted(prompts, key=lambda i: (prompts[i][0], prompts[i][1]))
    groups: list[tuple[list[int], int]] = []
    for i in order:
        read, tokens = prompts[i]
        if groups:
            group, cut = groups[-1]
            first_read, first = prompts[group[0]]
            same = next(
                (k for k, (a, b) in enumerate(zip(first, tokens, strict=False)) if a != b), min(len(first), len(tokens))
            )
            common = min(cut, same, len(tokens) - 1)
            shortest = min(len(tokens), *(len(prompts[j][1]) for j in group))
            if first_read == read and common >= SHARED_PREFIX_MIN * shortest and common > 0:
                groups[-1] = ([*group, i], common)
                continue
        groups.append(([i], max(0, len(tokens) - 1)))
    return groups


def _is_out_of_memory(err: RuntimeError) -> bool:
    """CUDA's typed error, or the plain ``RuntimeError`` older builds and other devices raise."""
    return isinstance(err, torch.OutOfMemoryError) or "out of memory" in str(err).lower()

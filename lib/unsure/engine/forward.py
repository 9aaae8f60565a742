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
from functools import partial
from itertools import chain
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import torch
from transformers import PreTrainedModel

log = logging.getLogger(__name__)

_T = TypeVar("_T")
_R = TypeVar("_R")
_P = TypeVar("_P")

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
    """The log-prob and greedy flag of every scored token, flat (continuation after continuation, as
    one slice of the batch's results: a request's summaries need no per-continuation arrays), each
    continuation's token count; log-probs of ``read_ids`` (one row per tail under ``read_tails``)."""

    logprobs: npt.NDArray[np.float64]
    greedy: npt.NDArray[np.bool_]
    lengths: npt.NDArray[np.int64]
    read_logprobs: npt.NDArray[np.float64]

    @property
    def token_logprobs(self) -> list[npt.NDArray[np.float64]]:
        """Per continuation its tokens' log-probs."""
        return np.split(self.logprobs, np.cumsum(self.lengths)[:-1]) if len(self.lengths) else []

    @property
    def token_greedy(self) -> list[npt.NDArray[np.bool_]]:
        """Per continuation its tokens' greedy flags."""
        return np.split(self.greedy, np.cumsum(self.lengths)[:-1]) if len(self.lengths) else []


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

    def add(self, work: Counters) -> None:
        """Add another call's work (its seconds too)."""
        self.tokens += work.tokens
        self.forward_passes += work.forward_passes
        self.seconds += work.seconds
        self.logit_rows += work.logit_rows
        self.attended += work.attended


class Runner:
    """A loaded causal LM run in token-budget batches: the body, the output projection where
    read, the KV cache of a shared opening, and the counters of what ran."""

    def __init__(self, model: PreTrainedModel, *, token_budget: int | None, max_batch_size: int, pad_id: int) -> None:
        self.model = model
        self.device: torch.device = model.get_input_embeddings().weight.device
        self.token_budget = token_budget or (GPU_TOKEN_BUDGET if self.device.type == "cuda" else CPU_TOKEN_BUDGET)
        self.max_batch_size = max_batch_size
        self.pad_id = pad_id
        self.wave_tokens = wave_tokens(self.device, self.token_budget)
        self.counters = Counters()
        self._buffer: torch.Tensor | None = None

    @property
    def dtype(self) -> torch.dtype:
        return self.model.dtype

    @property
    def vocab_size(self) -> int:
        """Rows of the output projection."""
        return int(self.model.get_output_embeddings().out_features)

    @property
    def head_device(self) -> torch.device:
        """Where the output projection runs (the last GPU of a device map)."""
        return self.model.get_output_embeddings().weight.device

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
        return self.pipelined(items, lengths, run, lambda done: done, cap=cap)

    def pipelined(
        self,
        items: Sequence[_T],
        lengths: Sequence[int],
        launch: Callable[[list[_T]], _P],
        read: Callable[[_P], list[_R]],
        *,
        cap: int | None = None,
    ) -> list[_R]:
        """:meth:`in_batches` with each batch in two halves: ``launch`` queues its work and returns
        it pending, ``read`` waits for it and gives its results. A batch is read only after the
        next one is launched, so on a GPU the host prepares batch ``k + 1`` while the device runs
        batch ``k``, and the read is the one wait per batch."""
        (out,) = self.pipelined_waves([(items, lengths, launch, read)], cap=cap)
        return out

    def pipelined_waves(
        self,
        waves: Iterable[tuple[Sequence[_T], Sequence[int], Callable[[list[_T]], _P], Callable[[_P], list[_R]]]],
        *,
        cap: int | None = None,
    ) -> list[list[_R]]:
        """:meth:`pipelined` of each wave (items, lengths, launch, read), as one stream of batches: the
        next wave is taken from ``waves`` after the last batch of this one is launched and before it is
        read, so a generator that prepares a wave when asked (tokenises its requests) does so while
        the device runs the wave before. Results per wave, in its items' order."""
        waves_out: list[tuple[dict[int, _R], int]] = []
        pending: list[tuple[dict[int, _R], list[int], Callable[[_P], list[_R]], _P]] = []
        for items, lengths, launch, read in waves:
            results: dict[int, _R] = {}
            waves_out.append((results, len(items)))
            order = sorted(range(len(items)), key=lambda i: -lengths[i])
            for batch in self._batches(order, lengths, cap):
                launched = self._launch_halving(launch, items, batch)
                for into, done, reader, out in pending:
                    into.update(zip(done, reader(out), strict=True))
                pending = [(results, done, read, out) for done, out in launched]
        for into, done, reader, out in pending:
            into.update(zip(done, reader(out), strict=True))
        return [[results[i] for i in range(n)] for results, n in waves_out]

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

    def _launch_halving(
        self, launch: Callable[[list[_T]], _P], items: Sequence[_T], batch: list[int]
    ) -> list[tuple[list[int], _P]]:
        """``launch`` of ``batch``; out of memory halves the batch (and the token budget) and retries."""
        try:
            return [(batch, launch([items[i] for i in batch]))]
        except RuntimeError as err:  # torch.OutOfMemoryError is a RuntimeError
            if not _is_out_of_memory(err) or len(batch) == 1:
                raise
            torch.cuda.empty_cache()
            self.token_budget = max(1, self.token_budget // 2)
            log.warning("out of memory with %d sequences; halving (token budget now %d)", len(batch), self.token_budget)
            half = len(batch) // 2
            return self._launch_halving(launch, items, batch[:half]) + self._launch_halving(launch, items, batch[half:])

    # ------------------------------------------------------------------ packed forward

    def run_packed(self, items: Sequence[Packed]) -> list[PackedResult]:
        """Score packed sequences in token-budget batches of similar length (one wave of
        :meth:`run_packed_waves`)."""
        (out,) = self.run_packed_waves([items])
        return out

    def run_packed_waves(self, waves: Iterable[Sequence[Packed]]) -> list[list[PackedResult]]:
        """Score each wave of packed sequences in token-budget batches of similar length, the waves
        as one stream of batches (:meth:`pipelined_waves`: a generator's next wave is made while the
        device runs this one's last batch).

        A wave's sequences are laid out once as flat host arrays (:class:`Plan`), longest first; a
        batch is a slice of them, launched and read as :meth:`pipelined` says.
        """
        start = time.perf_counter()
        orders: list[list[int]] = []

        def laid_out() -> Iterator[tuple[list[int], list[int], Callable[[list[int]], _Launched], Any]]:
            for items in waves:
                order = sorted(range(len(items)), key=lambda i: -items[i].length)
                orders.append(order)
                if not items:  # its results: none
                    continue
                plan = Plan([items[i] for i in order])
                spans = list(range(len(order)))  # the plan's items, already longest first: batches are slices
                yield spans, np.diff(plan.item_start).tolist(), partial(self._launch_span, plan), plan.results

        waves_out = iter(self.pipelined_waves(laid_out()))
        self.counters.seconds += time.perf_counter() - start
        out: list[list[PackedResult]] = []
        for order in orders:
            results = next(waves_out) if order else []
            wave = list(results)
            for k, i in enumerate(order):
                wave[i] = results[k]
            out.append(wave)
        return out

    def _launch_span(self, plan: Plan, batch: list[int]) -> _Launched:
        """Launch plan items ``batch`` (consecutive)."""
        return self._launch(plan, batch[0], batch[-1] + 1)

    def _launch(self, plan: Plan, a: int, b: int) -> _Launched:
        """Lay out plan items ``a:b`` on the host, send them, and queue the model's work on them;
        the results are read by :meth:`Plan.results`."""
        lay = plan.layout(a, b)
        dev = {name: self._to_device(arr) for name, arr in lay.arrays.items()}
        with torch.inference_mode():
            mask = packed_mask(dev["segments"], self.dtype)
            cache = None
            if lay.head:  # the tokens every row starts with, encoded once; each row attends to their cache
                cache = self.head_cache(lay.head_ids, b - a)
            hidden = self.model.base_model(
                input_ids=dev["ids"][:, lay.head :],
                attention_mask=mask[:, :, lay.head :],
                position_ids=dev["positions"][:, lay.head :],
                cache=cache,
                use_cache=cache is not None,
            ).last_hidden_state
            out = self._reads(hidden, dev, lay.head)
        self.add(lay.work)
        return _Launched(a, b, *self.to_host(out))

    def _reads(self, hidden: torch.Tensor, dev: dict[str, torch.Tensor], head: int) -> torch.Tensor:
        """Log-probs of the scored tokens, their greedy flags, and the log-probs of the read ids, as
        one float64 tensor (one transfer): the output projection only on the positions read."""

        def at(name: str) -> torch.Tensor:  # read indices follow the hidden states (the last GPU of a device map)
            return dev[name].to(hidden.device, non_blocking=True)

        parts = []
        if dev["score_rows"].numel():
            logits = self.logits(hidden[at("score_rows"), at("score_cols") - head])
            targets = at("targets")[:, None].to(logits.device)
            parts += [
                torch.log_softmax(logits, dim=-1).gather(1, targets)[:, 0].double(),
                (logits.argmax(dim=-1, keepdim=True) == targets)[:, 0].double(),
            ]
        if dev["read_rows"].numel():
            logprobs = torch.log_softmax(self.logits(hidden[at("read_rows"), at("read_cols") - head]), dim=-1)
            parts.append(logprobs.gather(1, at("read_ids").to(logprobs.device)).double().flatten())
        if not parts:
            return torch.empty(0, dtype=torch.float64, device=hidden.device)
        return torch.cat([p.to(hidden.device) for p in parts])

    def _to_device(self, arr: npt.NDArray[np.int64]) -> torch.Tensor:
        """A host array on the model's device: through pinned memory, not waiting for the copy."""
        host = torch.from_numpy(arr)
        if self.device.type != "cuda":
            return host
        return host.pin_memory().to(self.device, non_blocking=True)

    def to_host(self, out: torch.Tensor) -> tuple[torch.Tensor, Any]:
        """The results' copy to (pinned) host memory, queued behind the model's work, and the event
        that marks it done (None on a CPU)."""
        if out.device.type != "cuda":
            return out, None
        host = torch.empty(out.shape, dtype=out.dtype, pin_memory=True)
        host.copy_(out, non_blocking=True)
        done = torch.cuda.Event()
        done.record()
        return host, done

    def logits(self, hidden: torch.Tensor, *, reuse: bool = False) -> torch.Tensor:
        """Float32 logits of ``hidden`` states, soft-capped where the model caps them (Gemma-2).

        With ``reuse`` they are written into one buffer kept between calls (a float32 model on
        a CPU, whose allocator would hand a large result's pages back and fault them in anew),
        so they are valid until the next such call.
        """
        head = self.model.get_output_embeddings()
        if reuse and hidden.device.type == "cpu" and hidden.dtype == torch.float32 and head.bias is None:
            need = hidden.shape[0] * head.weight.shape[0]
            if self._buffer is None or self._buffer.numel() < need:
                self._buffer = torch.empty(need, dtype=torch.float32)
            logits = torch.matmul(hidden, head.weight.T, out=self._buffer[:need].view(hidden.shape[0], -1))
        else:
            logits = head(hidden).float()
        softcap = getattr(self.model.config, "final_logit_softcapping", None)
        if softcap:
            logits = torch.tanh(logits / softcap) * softcap
        return logits

    def head_cache(self, head: list[int], rows: int) -> Any:
        """The KV cache of ``head``, the opening a batch's rows share, run once and repeated for ``rows`` rows."""
        cache = self.model.base_model(input_ids=torch.tensor([head], device=self.device), use_cache=True).cache
        cache.batch_repeat_interleave(rows)
        return cache

    def left_padded(self, contexts: Sequence[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Ids and attention mask with every context ending in the last column, so the
        new tokens of all rows line up; on the model's input device."""
        lengths = np.fromiter(map(len, contexts), np.int64, len(contexts))
        flat = np.fromiter(chain.from_iterable(contexts), np.int64)
        rows = np.repeat(np.arange(len(contexts)), lengths)
        width = int(lengths.max())
        cols = np.arange(len(flat)) - _offsets(lengths)[rows] + (width - lengths)[rows]
        ids = np.full((len(contexts), width), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(contexts), width), dtype=np.int64)
        ids[rows, cols] = flat
        mask[rows, cols] = 1
        return self._to_device(ids), self._to_device(mask)

    def add(self, work: Counters, start: float | None = None) -> None:
        """Add one call's work to the counters (``start``: its ``perf_counter`` at the beginning, if timed).

        The work of a call is computed from its inputs alone (:meth:`Layout.work`, the decoding's
        ``*_work`` functions), so that :func:`unsure.engine.plan.plan_counters` counts the same
        without a model."""
        self.counters.add(work)
        if start is not None:
            self.counters.seconds += time.perf_counter() - start


def wave_tokens(device: torch.device, token_budget: int) -> int | None:
    """About how many tokens of a call's requests to tokenise at a time, while the device runs the
    ones before (:meth:`Runner.run_packed_waves`): on a GPU two token budgets, whose tokenising takes
    less host time than a batch takes the device. ``None`` (one wave) on a CPU, where the host is the
    device: the lines the call's requests repeat are then tokenised once."""
    return 2 * token_budget if device.type == "cuda" else None


def _offsets(lengths: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Start of each run of these lengths, and the total at the end."""
    return np.concatenate([np.zeros(1, dtype=np.int64), np.cumsum(lengths, dtype=np.int64)])


class Plan:
    """Packed sequences laid out once as flat host arrays, item by item in batch order.

    Every token's item, column, position and segment (0 the context, ``s`` the
    ``s``-th continuation), the tokens scored and the columns that predict them, and
    the read positions with their ids, are computed here with array operations; a
    batch (:meth:`layout`) is a slice of them scattered into its rows.
    """

    def __init__(self, items: Sequence[Packed]) -> None:
        n = len(items)
        n_seg = np.fromiter((1 + len(p.continuations) for p in items), np.int64, n)
        seg_len = np.fromiter(
            chain.from_iterable((len(p.context), *map(len, p.continuations)) for p in items), np.int64
        )
        self.tokens = np.fromiter(chain.from_iterable(chain(p.context, *p.continuations) for p in items), np.int64)
        self.cont_lengths = seg_len
        self.seg_first = _offsets(n_seg)
        seg_item = np.repeat(np.arange(n), n_seg)
        seg_no = np.arange(len(seg_len)) - self.seg_first[seg_item]
        seg_start = _offsets(seg_len)
        self.item_start = seg_start[self.seg_first]
        tok_seg = np.repeat(np.arange(len(seg_len)), seg_len)
        self.tok_item = seg_item[tok_seg]
        flat = np.arange(len(self.tokens))
        self.col = flat - self.item_start[self.tok_item]
        self.ctx_len = seg_len[self.seg_first[:-1]]
        offset = flat - seg_start[tok_seg]
        self.segment = seg_no[tok_seg]
        self.position = np.where(self.segment == 0, offset, self.ctx_len[self.tok_item] + offset)
        self.tails = np.fromiter((p.read_tails for p in items), bool, n)
        self.score_token = np.flatnonzero((self.segment > 0) & ~self.tails[self.tok_item])
        first = offset[self.score_token] == 0  # a continuation's first token is read after the context
        self.pred_col = np.where(
            first, self.ctx_len[self.tok_item[self.score_token]] - 1, self.col[self.score_token] - 1
        )
        self.score_start = np.searchsorted(self.score_token, self.item_start)
        # reads: after each tail of a read_tails item, else after the context of an item with read ids
        n_ids = np.fromiter((len(p.read_ids) for p in items), np.int64, n)
        read = np.where(self.tails[seg_item], seg_no > 0, (seg_no == 0) & (n_ids[seg_item] > 0))
        read_seg = np.flatnonzero(read)
        self.read_item = seg_item[read_seg]
        tail_end = seg_start[read_seg + 1] - 1 - self.item_start[self.read_item]
        after_context = (seg_no[read_seg] == 0) | (seg_len[read_seg] == 0)
        self.read_col = np.where(after_context, self.ctx_len[self.read_item] - 1, tail_end)
        self.read_start = np.searchsorted(self.read_item, np.arange(n + 1))
        width = max(1, int(n_ids.max(initial=0)))
        ids = np.zeros((n, width), dtype=np.int64)
        ids[np.arange(width) < n_ids[:, None]] = np.fromiter(chain.from_iterable(p.read_ids for p in items), np.int64)
        self.n_ids = n_ids
        self.read_ids = ids[self.read_item]

    def layout(self, a: int, b: int) -> Layout:
        """Items ``a:b`` as one padded batch: ids, positions and segments of each row, the
        scored tokens' rows, predicting columns and targets, the reads' rows, columns and ids."""
        t0, t1 = self.item_start[a], self.item_start[b]
        rows, cols = self.tok_item[t0:t1] - a, self.col[t0:t1]
        shape = (b - a, int((self.item_start[a + 1 : b + 1] - self.item_start[a:b]).max()))
        ids = np.zeros(shape, dtype=np.int64)
        positions = np.zeros(shape, dtype=np.int64)
        segments = np.full(shape, -1, dtype=np.int64)
        ids[rows, cols] = self.tokens[t0:t1]
        positions[rows, cols] = self.position[t0:t1]
        segments[rows, cols] = self.segment[t0:t1]
        scored = self.score_token[self.score_start[a] : self.score_start[b]]
        s = slice(self.score_start[a], self.score_start[b])
        r = slice(self.read_start[a], self.read_start[b])
        head = shared_head(ids, self.ctx_len[a:b])
        valid = segments >= 0
        return Layout(
            arrays={
                "ids": ids,
                "positions": positions,
                "segments": segments,
                "score_rows": self.tok_item[scored] - a,
                "score_cols": self.pred_col[s],
                "targets": self.tokens[scored],
                "read_rows": self.read_item[r] - a,
                "read_cols": self.read_col[r],
                "read_ids": self.read_ids[r],
            },
            head=head,
            head_ids=ids[0, :head].tolist(),
            work=Counters(
                tokens=head + int(valid[:, head:].sum()),
                forward_passes=1,
                logit_rows=len(scored) + r.stop - r.start,
                attended=int(((positions + 1) * valid).sum()) - (b - a - 1) * causal_pairs([head]),
            ),
        )

    def result_size(self, a: int, b: int) -> int:
        """Length of the flat result of items ``a:b`` (:meth:`Runner._reads`): per scored token its
        log-prob and greedy flag, per read its ids' log-probs."""
        scored = int(self.score_start[b] - self.score_start[a])
        return 2 * scored + int(self.read_start[b] - self.read_start[a]) * int(self.read_ids.shape[1])

    def results(self, launched: _Launched) -> list[PackedResult]:
        """One :class:`PackedResult` per item of a launched batch: its read (the one wait)."""
        if launched.done is not None:
            launched.done.synchronize()  # the copy queued behind the batch's work
        out = launched.out.numpy()
        a, b = launched.a, launched.b
        n = self.score_start[b] - self.score_start[a]
        token_lp, greedy_flags = out[:n], out[n : 2 * n] > 0
        reads = out[2 * n :].reshape(self.read_start[b] - self.read_start[a], self.read_ids.shape[1])
        none = np.empty(0, dtype=np.int64)
        score_start = (self.score_start[a : b + 1] - self.score_start[a]).tolist()
        read_start = (self.read_start[a : b + 1] - self.read_start[a]).tolist()
        seg_first, n_ids, tails = self.seg_first[a : b + 1].tolist(), self.n_ids[a:b].tolist(), self.tails[a:b].tolist()
        results = []
        for k in range(b - a):
            mine = reads[read_start[k] : read_start[k + 1], : n_ids[k]]
            s = slice(score_start[k], score_start[k + 1])
            if tails[k]:  # nothing scored: the reads after each tail
                results.append(PackedResult(token_lp[s], greedy_flags[s], none, mine))
                continue
            lengths = self.cont_lengths[seg_first[k] + 1 : seg_first[k + 1]]
            read = mine[0] if len(mine) else np.empty(0)
            results.append(PackedResult(token_lp[s], greedy_flags[s], lengths, read))
        return results


@dataclass
class Layout:
    """One batch on the host: its arrays (see :meth:`Plan.layout`), its shared opening, its work."""

    arrays: dict[str, npt.NDArray[np.int64]]
    head: int
    head_ids: list[int]
    work: Counters
    """What running it costs: tokens (the shared opening once), one forward pass, logit rows, attention pairs."""


@dataclass
class _Launched:
    """Plan items ``a:b``, their results on their way to the host (read once, by :meth:`Plan.results`)."""

    a: int
    b: int
    out: torch.Tensor
    done: Any = None
    """A CUDA event recorded after the copy to the host: the read waits for it."""


def packed_mask(segments: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Additive 4-D mask of packed rows, built where ``segments`` are (0 a row's context, ``s`` its
    ``s``-th continuation, -1 padding): causal within the context and within each continuation,
    every continuation sees the context, padding sees only itself."""
    width = segments.shape[1]
    q_seg = segments[:, :, None]
    k_seg = segments[:, None, :]
    causal = torch.ones(width, width, dtype=torch.bool, device=segments.device).tril()
    allowed = causal & (k_seg >= 0) & ((k_seg == 0) | (k_seg == q_seg))
    allowed |= torch.eye(width, dtype=torch.bool, device=segments.device)  # a padded query sees itself: no NaN
    return additive_mask(allowed, dtype)


def additive_mask(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The ``(batch, 1, queries, keys)`` additive attention mask of a boolean ``(batch, queries, keys)``
    one: 0 where a query sees a key, the dtype's lowest value where it does not."""
    zero = torch.zeros((), dtype=dtype, device=allowed.device)
    blocked = torch.tensor(torch.finfo(dtype).min, dtype=dtype, device=allowed.device)
    return torch.where(allowed, zero, blocked)[:, None]


def causal_pairs(lengths: Iterable[int]) -> int:
    """Query-key pairs of causal attention over sequences of these lengths."""
    return sum(n * (n + 1) // 2 for n in lengths)


SHARED_HEAD_MIN = 16
"""A batch whose rows all open with at least this many equal tokens (an instruction, a chat
header, the demonstrations of a task) encodes them once, as a KV cache every row attends to."""


def shared_head(ids: npt.NDArray[np.int64], context_lengths: Sequence[int] | npt.NDArray[np.int64]) -> int:
    """How many leading tokens every row of a packed batch shares (0 if fewer than
    :data:`SHARED_HEAD_MIN`), short of each row's last context token, from which
    the first continuation token is read."""
    limit = int(min(context_lengths)) - 1
    if len(context_lengths) < 2 or limit < SHARED_HEAD_MIN:
        return 0
    differs = (ids[:, :limit] != ids[:1, :limit]).any(axis=0)
    head = int(differs.argmax()) if differs.any() else limit
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
    shortest = 0  # the last group's shortest prompt
    for i in order:
        read, tokens = prompts[i]
        if groups:
            group, cut = groups[-1]
            first_read, first = prompts[group[0]]
            if first_read == read:
                common = min(common_prefix_length(first, tokens, cut), len(tokens) - 1)
                if common > 0 and common >= SHARED_PREFIX_MIN * min(shortest, len(tokens)):
                    group.append(i)
                    groups[-1] = (group, common)
                    shortest = min(shortest, len(tokens))
                    continue
        groups.append(([i], max(0, len(tokens) - 1)))
        shortest = len(tokens)
    return groups


def common_prefix_length(a: Sequence[int], b: Sequence[int], most: int | None = None) -> int:
    """How many leading tokens ``a`` and ``b`` share (at most ``most``), found by halving
    slices, which compare in C, instead of a Python step per token."""
    n = min(len(a), len(b)) if most is None else min(len(a), len(b), most)
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo], and the first difference lies before hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def _is_out_of_memory(err: RuntimeError) -> bool:
    """CUDA's typed error, or the plain ``RuntimeError`` older builds and other devices raise."""
    return isinstance(err, torch.OutOfMemoryError) or "out of memory" in str(err).lower()

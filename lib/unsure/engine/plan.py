"""What the engine would run for a list of requests, counted without a model.

:func:`plan_counters` sends the requests through :class:`~unsure.engine.hf.HFEngine`'s own
request methods, with its own tokenisation, packing, shared prefixes, token-budget batches
and shared openings; only the model's work on a batch is left out, and the batch's
:class:`~unsure.engine.forward.Counters` are added by the functions the engine adds them
with (:meth:`Plan.layout`, the decoding's ``*_work``). So a cost estimate (``bench/scale.py``)
counts what a run counts, and follows the engine when its packing changes.

Two kinds depend on what the model writes: a reply is counted at ``reply_tokens`` new tokens
(default its ``max_new_tokens``: an upper bound), a word sample at ``sample_tokens`` drawn
tokens each, none shared with another (default ``max_new_tokens``: an upper bound).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import torch

from unsure.engine.decoding import Decoder, SampleGroup, context_work, greedy_work, reply_work, step_work
from unsure.engine.forward import GPU_TOKEN_BUDGET, Counters, Plan, Runner, _Launched, wave_tokens
from unsure.engine.hf import HFEngine
from unsure.engine.requests import (
    ChoiceRequest,
    ContinuationRequest,
    NumericReplyRequest,
    NumericRequest,
    ReplyRequest,
    TokenLogprobsRequest,
    WordSamplingRequest,
)
from unsure.engine.tokens import Codec
from unsure.logs import Tally

log = logging.getLogger(__name__)

Request = (
    ChoiceRequest
    | ContinuationRequest
    | NumericRequest
    | NumericReplyRequest
    | ReplyRequest
    | TokenLogprobsRequest
    | WordSamplingRequest
)

METHODS: dict[type, str] = {
    ChoiceRequest: "choice_probs",
    ContinuationRequest: "continuation_scores",
    NumericRequest: "numeric",
    NumericReplyRequest: "numeric_chat",
    ReplyRequest: "generate",
    TokenLogprobsRequest: "token_logprobs",
    WordSamplingRequest: "sample_words",
}
"""The :class:`HFEngine` method that answers each request kind."""


def plan_counters(
    requests: Sequence[Request],
    tokenizer: Any,
    *,
    config: Any = None,
    token_budget: int = GPU_TOKEN_BUDGET,
    max_batch_size: int = 64,
    add_special_tokens: bool = True,
    vocab_size: int | None = None,
    reply_tokens: int | None = None,
    sample_tokens: int | None = None,
    device: str = "cuda",
) -> Counters:
    """The :class:`Counters` (all but ``seconds``) a Hugging Face engine with this tokenizer
    records answering ``requests``: each kind in one call, in the order of its first request,
    as a study sends them.

    ``config`` is the model's (its BOS rule; default: the tokenizer's BOS and EOS);
    ``token_budget`` and ``max_batch_size`` the engine's (default: a GPU run's);
    ``vocab_size`` the model's output rows (default the tokenizer's length), which caps a
    sampling batch; ``device`` the run's (a GPU's by default: it tokenises a call's label requests
    in waves, :func:`~unsure.engine.forward.wave_tokens`).
    """
    kinds: dict[type, list[Request]] = {}
    for req in requests:
        if type(req) not in METHODS:
            raise TypeError(f"{type(req).__name__} is no engine request kind")
        kinds.setdefault(type(req), []).append(req)
    if config is None:
        config = SimpleNamespace(bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    engine = HFEngine.__new__(HFEngine)
    engine.model_id = str(getattr(tokenizer, "name_or_path", "") or "planned")
    engine.tally = Tally(log)
    engine.codec = Codec(tokenizer, config, model_id=engine.model_id, add_special_tokens=add_special_tokens)
    runner = CountingRunner(
        token_budget, max_batch_size, engine.codec.pad_id, vocab_size or len(tokenizer), torch.device(device)
    )
    engine.runner = runner
    engine.decoder = CountingDecoder(runner, engine.codec, reply_tokens=reply_tokens, sample_tokens=sample_tokens)
    for kind, mine in kinds.items():
        getattr(engine, METHODS[kind])(mine)
    return runner.counters


class CountingRunner(Runner):
    """A :class:`Runner` without a model: batches, lays out and counts each packed batch as the
    engine does, and returns zeros for its log-probs."""

    def __init__(
        self, token_budget: int, max_batch_size: int, pad_id: int, vocab_size: int, planned_for: torch.device
    ) -> None:
        self.device = torch.device("cpu")
        self.token_budget = token_budget
        self.max_batch_size = max_batch_size
        self.pad_id = pad_id
        self.wave_tokens = wave_tokens(planned_for, token_budget)  # the planned run's waves, not this CPU's
        self.counters = Counters()
        self._vocab_size = vocab_size

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    @property
    def head_device(self) -> torch.device:
        return self.device

    def _launch(self, plan: Plan, a: int, b: int) -> _Launched:
        lay = plan.layout(a, b)
        self.add(lay.work)
        return _Launched(a, b, torch.zeros(plan.result_size(a, b), dtype=torch.float64))


class CountingDecoder(Decoder):
    """A :class:`Decoder` that counts each batch's work as the engine does, without a model:
    greedy digits exactly; replies at ``reply_tokens`` new tokens and word samples at
    ``sample_tokens`` drawn tokens each (default: the request's ``max_new_tokens``)."""

    def __init__(self, runner: Runner, codec: Codec, *, reply_tokens: int | None, sample_tokens: int | None) -> None:
        super().__init__(runner, codec)
        self.reply_tokens = reply_tokens
        self.sample_tokens = sample_tokens

    def _greedy_batch(
        self, contexts: list[list[int]], *, allowed: torch.Tensor, steps: int
    ) -> tuple[torch.Tensor, Any]:
        self.runner.add(greedy_work(contexts, steps)[1])
        return allowed[:1].repeat(len(contexts), steps), None

    def _generate_batch(self, contexts: list[list[int]], *, max_new_tokens: int) -> list[str]:
        n = min(max_new_tokens, self.reply_tokens or max_new_tokens)
        self.runner.add(reply_work(contexts, [n] * len(contexts), n))
        return [""] * len(contexts)

    def _sample_groups(self, groups: list[SampleGroup]) -> list[tuple[list[str], int]]:
        contexts = {g.request_index: g.context for g in groups}
        self.runner.add(context_work(list(contexts.values())))
        drawn = [min(g.request.max_new_tokens, self.sample_tokens or g.request.max_new_tokens) for g in groups]
        for step in range(max(drawn) - 1):  # a token drawn from the context's logits, then one per step
            positions = [
                len(g.context) + step for g, t in zip(groups, drawn, strict=True) if step < t - 1 for _ in range(g.size)
            ]
            self.runner.add(step_work(positions))
        return [([], 0) for _ in groups]

"""The Hugging Face ``transformers`` backend: the request façade over four parts.

* :mod:`unsure.engine.tokens`: text to ids as the model reads it (BOS rules, chat
  templates, answer letters);
* :mod:`unsure.engine.forward`: the packed forward in token-budget batches (shared
  prefixes once, logits only where read);
* :mod:`unsure.engine.decoding`: token-by-token decoding (greedy digits and replies,
  word samples as a tree);
* :class:`HFEngine` (here): loading a model as its ``models:`` entry says, and the
  request kinds, each turned into packed sequences or decoding calls.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
import warnings
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any, TypeVar

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from unsure.config import Model
from unsure.engine.decoding import SAMPLE_CHUNK, Decoder
from unsure.engine.forward import Counters, Packed, PackedResult, Runner, shared_prefix_groups
from unsure.engine.identity import local_device, require_local_folder
from unsure.engine.pretrained import explained_loading, hub_source
from unsure.engine.requests import (
    ChoiceProbs,
    ChoiceRequest,
    ContinuationRequest,
    ContinuationScores,
    NumericReplyRequest,
    NumericRequest,
    ReplyRequest,
    TokenLogprobs,
    TokenLogprobsRequest,
    WordSamples,
    WordSamplingRequest,
)
from unsure.engine.tokens import PLAIN_CHAT_TEMPLATE, Codec, family_bos
from unsure.engine.words import probabilities_from_replies
from unsure.logs import Tally

log = logging.getLogger(__name__)

__all__ = ["Counters", "HFEngine", "family_bos", "resolve_dtype"]

NUMERIC_REPLY_TOKENS = 24
"""Reply length of :meth:`HFEngine.numeric_chat` where a request leaves it to the backend."""

_Q = TypeVar("_Q")
_K = TypeVar("_K", bound=Hashable)
_R = TypeVar("_R")


@contextlib.contextmanager
def peft_quietly() -> Iterator[None]:
    """peft reads a model attribute transformers renamed (``is_gradient_checkpointing``) and so
    warns on every adapter it wraps; nothing of ours to change, so that one warning is silenced."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "`is_gradient_checkpointing` is deprecated", FutureWarning)
        yield


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """``auto`` is bfloat16 on a GPU and float32 on a CPU."""
    if dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]


class HFEngine:
    """A causal LM loaded by hub id or local path, answering the engine's requests."""

    def __init__(
        self,
        model_id: str,
        *,
        revision: str | None = None,
        dtype: str = "auto",
        device: str | None = None,
        gpus: int = 1,
        trust_remote_code: bool = False,
        chat_template: str | None = None,
        token_budget: int | None = None,
        max_batch_size: int = 64,
        add_special_tokens: bool = True,
        adapter: str | None = None,
        instruct: bool = False,
        warm_up: bool | None = None,
    ) -> None:
        require_local_folder(str(model_id))
        source = hub_source(str(model_id), revision)
        want = torch.device(device or (local_device()))
        self.dtype = resolve_dtype(dtype, want)
        with explained_loading(str(model_id), revision, trust_remote_code=trust_remote_code):
            tokenizer: PreTrainedTokenizerBase = AutoTokenizer.from_pretrained(
                model_id, revision=revision, trust_remote_code=trust_remote_code, **source
            )
        if chat_template is not None:
            tokenizer.chat_template = chat_template
        elif instruct and tokenizer.chat_template is None:
            log.warning(
                "%s is an instruct model whose tokenizer has no chat template: using the plain-text default "
                "(User:/Assistant: turns); set chat_template in its models: entry, or instruct: false",
                model_id,
            )
            tokenizer.chat_template = PLAIN_CHAT_TEMPLATE
        kwargs: dict[str, Any] = {
            "revision": revision,
            "dtype": self.dtype,
            "trust_remote_code": trust_remote_code,
            "attn_implementation": "sdpa",  # packed sequences need arbitrary masks
            **source,
        }
        if want.type == "cuda" and gpus > 1:
            kwargs["device_map"] = "auto"  # accelerate spreads the layers over the GPUs
        with explained_loading(str(model_id), revision, trust_remote_code=trust_remote_code):
            model: PreTrainedModel = AutoModelForCausalLM.from_pretrained(model_id, **kwargs)
        if adapter is not None:  # a peft (LoRA) adapter, merged so scoring runs at base-model speed
            from peft import PeftModel

            with peft_quietly():
                model = PeftModel.from_pretrained(model, adapter).merge_and_unload()
        if "device_map" not in kwargs:
            model.to(want)
        model.eval()
        self.model_id = model_id
        self.tally = Tally(log)
        """This engine's repeated warnings (replies stating no probability), each logged once with a count."""
        self.codec = Codec(tokenizer, model.config, model_id=model_id, add_special_tokens=add_special_tokens)
        self.runner = Runner(model, token_budget=token_budget, max_batch_size=max_batch_size, pad_id=self.codec.pad_id)
        self.decoder = Decoder(self.runner, self.codec)
        if self.device.type == "cuda" if warm_up is None else warm_up:
            self.warm_up()

    @classmethod
    def from_config(cls, entry: Model, **kwargs: Any) -> HFEngine:
        """Load a model exactly as its ``models:`` entry in the config says."""
        if entry.backend != "hf":
            raise ValueError(f"model {entry.id!r} has backend {entry.backend!r}, not 'hf'")
        return cls(
            entry.id,
            revision=entry.revision,
            dtype=entry.dtype,
            gpus=entry.gpus,
            trust_remote_code=entry.trust_remote_code,
            chat_template=entry.chat_template,
            instruct=entry.instruct,
            **kwargs,
        )

    def warm_up(self) -> None:
        """Run each kind of device work once on stand-in tokens, so that a job's first requests
        run at the steady rate: on a GPU the first calls pay for the kernels' and the attention
        back-ends' first use and the caching allocator's growth to a full batch. Counters and
        results are left as they were (the default on a GPU, at load)."""
        start = time.perf_counter()
        saved = dataclasses.replace(self.counters)
        pad = self.codec.pad_id
        length = max(2, min(512, self.token_budget // 4))
        shared = [pad] * length  # a full token budget of packed rows, with an opening every row shares
        rows = max(2, self.token_budget // (length + 8))
        self.runner.run_packed([Packed([*shared, i % 7], [[pad] * 4, [pad] * 4], read_ids=[pad]) for i in range(rows)])
        self.runner.run_packed([Packed([pad] * length, read_ids=[pad], read_tails=True, continuations=[[pad], [pad]])])
        self.decoder.greedy_tokens([[pad] * (length // 2 + i) for i in range(min(rows, 8))], [pad], 2)
        self.decoder.sample_words([WordSamplingRequest("The", n=SAMPLE_CHUNK, seed=0, max_new_tokens=2)])
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.runner.counters = saved
        log.info("%s: warmed up in %.1f s", self.model_id, time.perf_counter() - start)

    # ------------------------------------------------------------------ the parts, as attributes

    @property
    def model(self) -> PreTrainedModel:
        return self.runner.model

    @model.setter
    def model(self, model: PreTrainedModel) -> None:  # LoRA training swaps in the peft-wrapped model
        self.runner.model = model

    @property
    def tokenizer(self) -> PreTrainedTokenizerBase:
        return self.codec.tokenizer

    @property
    def device(self) -> torch.device:
        return self.runner.device

    @property
    def counters(self) -> Counters:
        return self.runner.counters

    @property
    def token_budget(self) -> int:
        return self.runner.token_budget

    @token_budget.setter
    def token_budget(self, budget: int) -> None:
        self.runner.token_budget = budget

    def encode(self, text: str, *, special: bool | None = None) -> list[int]:
        """Token ids of a context (see :meth:`Codec.encode`)."""
        return self.codec.encode(text, special=special)

    def split_pair(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        """Context and continuation ids, split as lm-evaluation-harness splits them."""
        return self.codec.split_pair(context, continuation)

    def chat_prompt(self, user: str, *, system: str | None = None, prefill: str = "") -> str:
        """A prompt through the model's chat template, ending where the reply begins."""
        return self.codec.chat_prompt(user, system=system, prefill=prefill)

    def vocab(self) -> dict[str, int]:
        """The tokenizer's vocabulary."""
        return self.codec.vocab()

    def option_token_ids(self, options: Sequence[str]) -> dict[str, list[int | None]]:
        """Per space-marker prefix, each option's token id (see :meth:`Codec.option_token_ids`)."""
        return self.codec.option_token_ids(options)

    def tokens_processed(self) -> int:
        """Tokens run through the model so far (for throughput summaries)."""
        return self.counters.tokens

    # ------------------------------------------------------------------ requests

    def continuation_scores(self, requests: Sequence[ContinuationRequest]) -> list[ContinuationScores]:
        """Summed log-probability, token count and greedy flag of every continuation.

        A request with ``eos`` scores the tokenizer's EOS token after each
        continuation in the same packed sequence; the continuation's numbers
        are those of the request without it (causal attention), and
        ``eos_logprob`` holds the EOS token's.
        """
        for req in requests:
            if not req.continuations:
                raise ValueError(f"continuation request with no continuations (context {req.context[:60]!r})")
        waves = self.runner.run_packed_waves(self._packed_waves(requests))
        results = [r for wave in waves for r in wave]
        return [_continuation_scores(r, eos=req.eos) for req, r in zip(requests, results, strict=True)]

    def _packed_waves(self, requests: Sequence[ContinuationRequest]) -> Iterator[list[Packed]]:
        """The requests' packed sequences in waves (:attr:`Runner.wave_tokens`), each tokenised when the
        runner asks for it: on a GPU, while the device runs the wave before (:meth:`Runner.run_packed_waves`)."""
        chars = [len(r.context) + sum(map(len, r.continuations)) for r in requests]
        for wave in text_waves(chars, self.runner.wave_tokens):
            part = [requests[i] for i in wave]
            split = iter(self.codec.split_pairs([(req.context, c) for req in part for c in req.continuations]))
            packed: list[Packed] = []
            for req in part:
                pairs = [next(split) for _ in req.continuations]
                context = pairs[0][0]
                if any(ctx != context for ctx, _ in pairs):  # cannot happen for well-behaved tokenizers; stay exact
                    raise ValueError(
                        f"{self.model_id}: context {req.context[:60]!r} tokenises differently per continuation"
                    )
                tail = [self.codec.eos_id()] if req.eos else []
                packed.append(Packed(context, [cont + tail for _, cont in pairs]))
            yield packed

    def choice_probs(self, requests: Sequence[ChoiceRequest]) -> list[ChoiceProbs]:
        """Option probabilities after each prompt (see :class:`ChoiceRequest`).

        Prompts that share most of their tokens (the option orders of one row: the
        same features, the options swapped) go in one packed sequence: the common
        prefix encoded once, each prompt's tail attending to it, the options read
        after each tail. The numbers equal those of separate sequences.
        """
        out: list[ChoiceProbs | None] = [None] * len(requests)
        single: dict[int, tuple[dict[str, list[int | None]], list[int], list[int]]] = {}
        multi: list[int] = []
        for i, req in enumerate(requests):
            variants = self.codec.option_token_ids(req.options)
            if variants:
                ids = sorted({t for v in variants.values() for t in v if t is not None})
                single[i] = (variants, ids, [])
            else:
                multi.append(i)
        for i, tokens in zip(single, self.codec.encode_many([requests[i].prompt for i in single]), strict=True):
            single[i][2].extend(tokens)
        groups = shared_prefix_groups({i: (tuple(ids), tokens) for i, (_, ids, tokens) in single.items()})
        packed = [
            Packed(
                single[group[0]][2][:cut],
                [single[i][2][cut:] for i in group],
                read_ids=single[group[0]][1],
                read_tails=True,
            )
            for group, cut in groups
        ]
        for (group, _), item, res in zip(groups, packed, self.runner.run_packed(packed), strict=True):
            for i, row in zip(group, res.read_logprobs, strict=True):
                out[i] = _pick_prefix(single[i][0], dict(zip(item.read_ids, np.exp(row), strict=True)))
        if multi:
            scores = self.continuation_scores(
                [ContinuationRequest(requests[i].prompt, tuple(" " + o for o in requests[i].options)) for i in multi]
            )
            for i, s in zip(multi, scores, strict=True):
                out[i] = ChoiceProbs.from_continuations(s)
        return [o for o in out if o is not None]

    def numeric(self, requests: Sequence[NumericRequest]) -> list[float]:
        """folktexts' verbalised probability: the prompt ends in ``0.``; greedily
        append the likeliest digit token ``steps`` times; read ``0.<digits>``.

        Each prompt is encoded once: the later steps feed the chosen digit through
        the KV cache (see :meth:`Decoder.greedy_tokens`). Requests of each ``steps``
        decode together.
        """
        digits = self.codec.digit_ids()
        for req in requests:
            if req.steps < 1:
                raise ValueError(f"{self.model_id}: numeric answers need steps >= 1, got {req.steps}")

        def run(steps: int, group: list[NumericRequest]) -> list[float]:
            chosen = self.decoder.greedy_tokens(self.codec.encode_many([r.prompt for r in group]), digits, steps)
            return [float("0." + "".join(self.tokenizer.convert_ids_to_tokens(ids))) for ids in chosen]

        return _grouped(requests, lambda r: r.steps, run)

    def numeric_chat(self, requests: Sequence[NumericReplyRequest]) -> list[float]:
        """The free-form variant: a greedy reply (e.g. to a chat prompt), parsed for a
        probability; NaN where the reply states none. A request without ``max_new_tokens``
        gets :data:`NUMERIC_REPLY_TOKENS`."""
        replies = self.generate(
            [
                ReplyRequest(r.prompt, NUMERIC_REPLY_TOKENS if r.max_new_tokens is None else r.max_new_tokens)
                for r in requests
            ]
        )
        return probabilities_from_replies(replies, self.model_id, self.tally)

    def generate(self, requests: Sequence[ReplyRequest]) -> list[str]:
        """Greedy free-form replies (chat variants of the numeric question).

        Prompts run in token-budget batches of similar length (prompt plus
        ``max_new_tokens`` per row), left-padded; ``transformers`` derives the
        position ids from the attention mask, so a reply does not depend on
        what else is in its batch. Each reply is decoded up to its own EOS.
        Requests of each ``max_new_tokens`` decode together.
        """
        for req in requests:
            if req.max_new_tokens < 1:
                raise ValueError(f"{self.model_id}: max_new_tokens must be at least 1, got {req.max_new_tokens}")
        return _grouped(
            requests,
            lambda r: r.max_new_tokens,
            lambda n, group: self.decoder.generate(self.codec.encode_many([r.prompt for r in group]), n),
        )

    def token_logprobs(self, requests: Sequence[TokenLogprobsRequest]) -> list[TokenLogprobs]:
        """Full-softmax log-probabilities of the ids each request reads after its context, and the
        modal next token over the whole vocabulary.

        Two passes: a greedy step over every id of the vocabulary (:meth:`Decoder.greedy_tokens`:
        float32 logits, ties to the lowest id) finds the modal token; one packed forward then reads
        the request's ids and the modal token together (float32 log-softmax, as every other read).
        """
        if not requests:
            return []
        vocab = sorted(set(self.codec.vocab().values()))
        contexts = [list(r.context) for r in requests]
        modal = [int(c[0]) for c in self.decoder.greedy_tokens(contexts, vocab, 1)]
        items = [
            Packed(ctx, read_ids=sorted({*r.read_ids, m})) for ctx, r, m in zip(contexts, requests, modal, strict=True)
        ]
        out = []
        for req, item, m, res in zip(requests, items, modal, self.runner.run_packed(items), strict=True):
            read = {i: float(lp) for i, lp in zip(item.read_ids, res.read_logprobs, strict=True)}
            out.append(
                TokenLogprobs(
                    logprobs=np.array([read[i] for i in req.read_ids], dtype=np.float64),
                    modal_token=m,
                    modal_logprob=read[m],
                )
            )
        return out

    def sample_words(self, requests: Sequence[WordSamplingRequest]) -> list[WordSamples]:
        """First complete words of ancestral samples (see :meth:`Decoder.sample_words`)."""
        return self.decoder.sample_words(requests)


def _pick_prefix(variants: dict[str, list[int | None]], prob: dict[int, float]) -> ChoiceProbs:
    """folktexts' rule: use the space-marker prefix whose option tokens hold the most mass."""
    mass = {p: sum(prob[i] for i in ids if i is not None) for p, ids in variants.items()}
    best = max(variants, key=lambda p: mass[p])
    probs = np.array([prob[i] if i is not None else 0.0 for i in variants[best]])
    total = probs.sum()
    if total <= 0:
        return ChoiceProbs(probs=np.full(len(probs), 1 / len(probs)), mass=0.0, prefix=best)
    return ChoiceProbs(probs=probs / total, mass=float(total), prefix=best)


def _continuation_scores(result: PackedResult, *, eos: bool) -> ContinuationScores:
    """One request's :class:`ContinuationScores` from its continuations' token log-probs and greedy flags,
    summed over all its continuations at once (at each one's start), the EOS token read apart where scored."""
    lengths, logprobs, greedy = result.lengths, result.logprobs, result.greedy
    ends = np.cumsum(lengths)
    eos_logprob = None
    if eos:  # the EOS token is each continuation's last; its numbers are those without it
        eos_logprob = logprobs[ends - 1]
        kept = np.ones(len(logprobs), dtype=bool)
        kept[ends - 1] = False
        logprobs, greedy, lengths, ends = logprobs[kept], greedy[kept], lengths - 1, ends - np.arange(1, len(ends) + 1)
    starts = ends - lengths
    return ContinuationScores(
        logprob=np.add.reduceat(logprobs, starts),
        n_tokens=lengths,
        greedy=np.logical_and.reduceat(greedy, starts),
        eos_logprob=eos_logprob,
    )


CHARS_PER_TOKEN = 4
"""About how many characters of text make a token (4.2 on the SNI-style label prompts with Llama-3's
tokenizer): enough to cut requests into waves of about the tokens asked for."""


def text_waves(chars: Sequence[int], tokens: int | None) -> Iterator[range]:
    """Consecutive runs of requests of about ``tokens`` tokens each, by their texts' ``chars``
    (``None``: one run)."""
    if tokens is None:
        yield range(len(chars))
        return
    most = tokens * CHARS_PER_TOKEN
    start, total = 0, 0
    for i, n in enumerate(chars):
        if total and total + n > most:
            yield range(start, i)
            start, total = i, 0
        total += n
    if start < len(chars):
        yield range(start, len(chars))


def _grouped(requests: Sequence[_Q], key: Callable[[_Q], _K], run: Callable[[_K, list[_Q]], list[_R]]) -> list[_R]:
    """``run`` once per distinct ``key`` of the requests (a decoding setting), on that key's requests
    in their order; the results in the requests' order."""
    groups: dict[_K, list[int]] = {}
    for i, req in enumerate(requests):
        groups.setdefault(key(req), []).append(i)
    out: dict[int, _R] = {}
    for k, indices in groups.items():
        out.update(zip(indices, run(k, [requests[i] for i in indices]), strict=True))
    return [out[i] for i in range(len(requests))]

"""The Hugging Face ``transformers`` backend.

How it is fast without changing any number:

* **Shared prefixes, one pass.** A context and all its continuations are packed
  into one sequence; a 4-D attention mask lets each continuation see the
  context and itself but not its siblings, and position ids restart after the
  context for every continuation. The context is encoded once per request.
* **Logits only where read.** The base model returns hidden states; the output
  projection and the log-softmax run only on the positions whose predictions
  are read, never over the whole sequence.
* **A batch's shared opening, once.** Tokens every sequence of a batch starts
  with (an instruction, a chat header, a task's demonstrations) are encoded
  once, as a KV cache each row attends to.
* **Token-budget batches.** Requests are sorted by packed length and batched
  until ``token_budget`` padded tokens (a small budget on a CPU, where the
  activations then stay in cache); padding is masked, so a request's numbers
  do not depend on what else is in its batch. Out of memory halves the batch
  and retries.
* **Samples as a tree.** Word samples that drew the same tokens so far share
  one row of the forward pass, and the samples of several requests decode in
  one batch, each with its own generator.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase
from transformers.generation.logits_process import (
    LogitsProcessorList,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from unsure.config import Model
from unsure.engine.identity import require_local_folder
from unsure.engine.requests import (
    ChoiceProbs,
    ChoiceRequest,
    ContinuationRequest,
    ContinuationScores,
    WordSamples,
    WordSamplingRequest,
)
from unsure.engine.words import first_word, probabilities_from_replies

log = logging.getLogger(__name__)

SPACE_MARKERS = ("", " ", "_", "\u2581", "\u0120", "\u010a")
"""Prefixes under which tokenizers store an answer letter: none, a space,
SentencePiece's ``▁``, byte-level BPE's ``Ġ`` (space) and ``Ċ`` (newline)."""

PLAIN_CHAT_TEMPLATE = (
    "{% for m in messages %}"
    "{% if m['role'] == 'system' %}{{ m['content'] + '\n\n' }}"
    "{% elif m['role'] == 'user' %}{{ 'User: ' + m['content'] + '\n' }}"
    "{% else %}{{ 'Assistant: ' + m['content'] + '\n' }}{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"
)
"""The chat template of an instruct model whose tokenizer ships none (Falcon-instruct):
plain ``User:``/``Assistant:`` turns, a system prompt as the opening paragraph."""


def family_bos(config: Any) -> int | None:
    """The BOS id a model was trained with first on every text: its config's
    ``bos_token_id`` where that is a token of its own. Where BOS is the EOS (GPT-2,
    Falcon: a document separator, not a start token) or absent, ``None``."""
    bos = getattr(config, "bos_token_id", None)
    eos = getattr(config, "eos_token_id", None)
    eos_ids = set(eos) if isinstance(eos, list) else {eos}
    return None if bos is None or bos in eos_ids else int(bos)


_T = TypeVar("_T")
_R = TypeVar("_R")

CPU_TOKEN_BUDGET = 2_048
"""Padded tokens per forward pass on a CPU. Measured with ``bench/engine.py``'s
budget sweep: on ACS risk prompts 2,048 ran fastest at hidden sizes 256, 512
and 1,024 (about twice the rows/s of 16,384), the activations staying in cache."""

GPU_TOKEN_BUDGET = 16_384
"""Padded tokens per forward pass on a GPU, where larger batches fill the device."""

SAMPLE_LOGITS = 1 << 28
"""Logits a decoding step of word sampling may hold (1 GiB in float32): the sample rows of a
batch are at most this over the vocabulary size, and at most the token budget."""

SAMPLE_CHUNK = 256
"""Samples of one request drawn with one generator. Fixed, so the words drawn
for a seed do not depend on memory settings."""


@dataclass
class _SampleGroup:
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
    ) -> None:
        require_local_folder(str(model_id))
        want = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.dtype = resolve_dtype(dtype, want)
        self.tokenizer: PreTrainedTokenizerBase = AutoTokenizer.from_pretrained(
            model_id, revision=revision, trust_remote_code=trust_remote_code
        )
        if chat_template is not None:
            self.tokenizer.chat_template = chat_template
        elif instruct and self.tokenizer.chat_template is None:
            log.warning(
                "%s is an instruct model whose tokenizer has no chat template: using the plain-text default "
                "(User:/Assistant: turns); set chat_template in its models: entry, or instruct: false",
                model_id,
            )
            self.tokenizer.chat_template = PLAIN_CHAT_TEMPLATE
        kwargs: dict[str, Any] = {
            "revision": revision,
            "dtype": self.dtype,
            "trust_remote_code": trust_remote_code,
            "attn_implementation": "sdpa",  # packed sequences need arbitrary masks
        }
        if want.type == "cuda" and gpus > 1:
            kwargs["device_map"] = "auto"  # accelerate spreads the layers over the GPUs
        self.model: PreTrainedModel = AutoModelForCausalLM.from_pretrained(model_id, **kwargs)
        if adapter is not None:  # a peft (LoRA) adapter, merged so scoring runs at base-model speed
            from peft import PeftModel

            self.model = PeftModel.from_pretrained(self.model, adapter).merge_and_unload()
        if "device_map" not in kwargs:
            self.model.to(want)
        self.model.eval()
        self.device = self.model.get_input_embeddings().weight.device
        self.model_id = model_id
        self.token_budget = token_budget or (GPU_TOKEN_BUDGET if self.device.type == "cuda" else CPU_TOKEN_BUDGET)
        self.max_batch_size = max_batch_size
        self.add_special_tokens = add_special_tokens
        self.counters = Counters()
        self._lm_head = self.model.get_output_embeddings()
        self._softcap = getattr(self.model.config, "final_logit_softcapping", None)
        self._head: str | None = None
        self._system_turn: bool | None = None
        self._vocab: dict[str, int] | None = None
        self._bos = family_bos(self.model.config)
        self._prefix_id = self.tokenizer.bos_token_id
        if self._prefix_id is None:
            self._prefix_id = self.tokenizer.eos_token_id

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

    # ------------------------------------------------------------------ tokenising

    def encode(self, text: str, *, special: bool | None = None) -> list[int]:
        """Token ids of a context (with the tokenizer's BOS unless told otherwise).

        An empty context becomes the BOS (or EOS) token alone, as in
        lm-evaluation-harness, so that the first token has something to follow.
        """
        ids = self._tokens(text, special)
        if ids:
            return ids
        if self._prefix_id is None:
            raise ValueError(f"{self.model_id}: empty context and the tokenizer has no BOS or EOS token")
        return [self._prefix_id]

    def _tokens(self, text: str, special: bool | None = None) -> list[int]:
        if special is None:  # chat-templated text carries its own special tokens
            special = self.add_special_tokens and not self._is_templated(text)
        ids: list[int] = self.tokenizer(text, add_special_tokens=special)["input_ids"]
        if special and self._bos is not None and ids[:1] != [self._bos]:
            ids.insert(0, self._bos)  # e.g. Llama-3's April-2024 files add none to plain text
        return ids

    def split_pair(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        """Context and continuation ids, split as lm-evaluation-harness splits them.

        The pair is encoded whole and the context's ids are cut off its front,
        so a continuation starting with a space is tokenised as it would be in
        running text; trailing spaces of the context move to the continuation.
        """
        n_spaces = len(context) - len(context.rstrip())
        if n_spaces:
            context, continuation = context[:-n_spaces], context[-n_spaces:] + continuation
        ctx = self._tokens(context)
        if ctx:
            cont = self._tokens(context + continuation)[len(ctx) :]
        else:
            ctx, cont = self.encode(context), self._tokens(continuation, special=False)
        if not cont:
            raise ValueError(f"{self.model_id}: continuation {continuation!r} encodes to no tokens")
        tok = self.tokenizer
        unk = tok.unk_token_id  # GPT-2's is its EOS, which text never encodes to
        if unk is not None and unk not in (tok.eos_token_id, tok.bos_token_id) and unk in cont:
            raise ValueError(  # else every unknown word would get the same probability
                f"{self.model_id}: continuation {continuation!r} holds text the tokenizer does not know "
                f"(it encodes to the unknown token {tok.unk_token!r}); choose options the vocabulary can spell"
            )
        return ctx, cont

    def chat_prompt(self, user: str, *, system: str | None = None, prefill: str = "") -> str:
        """A prompt through the model's chat template, ending where the reply begins."""
        if self.tokenizer.chat_template is None:
            raise ValueError(
                f"{self.model_id} has no chat template: set chat_template in its models: entry or instruct: false"
            )
        if system and not self._takes_system_turn():
            user, system = f"{system}\n\n{user}", None
        messages = [{"role": "system", "content": system}] if system else []
        messages.append({"role": "user", "content": user})
        return self._render(messages) + prefill

    def _render(self, messages: list[dict[str, str]]) -> str:
        return str(self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))

    def _takes_system_turn(self) -> bool:
        """Whether the chat template accepts a system message; Gemma's and Mistral's raise,
        and a system prompt then opens the user turn instead (logged once)."""
        if self._system_turn is None:
            try:
                self._render([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}])
                self._system_turn = True
            except Exception as err:  # jinja2's TemplateError, raised by the template's raise_exception
                log.warning(
                    "%s: the chat template refuses a system turn (%s); it opens the user turn", self.model_id, err
                )
                self._system_turn = False
        return self._system_turn

    def vocab(self) -> dict[str, int]:
        """The tokenizer's vocabulary, built once (``get_vocab`` copies it on every call)."""
        if self._vocab is None:
            self._vocab = self.tokenizer.get_vocab()
        return self._vocab

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
        packed: list[Packed] = []
        for req in requests:
            if not req.continuations:
                raise ValueError(f"continuation request with no continuations (context {req.context[:60]!r})")
            pairs = [self.split_pair(req.context, c) for c in req.continuations]
            contexts = {tuple(ctx) for ctx, _ in pairs}
            if len(contexts) != 1:  # cannot happen for well-behaved tokenizers; stay exact if it does
                raise ValueError(
                    f"{self.model_id}: context {req.context[:60]!r} tokenises differently per continuation"
                )
            tail = [self._eos_id()] if req.eos else []
            packed.append(Packed(pairs[0][0], [cont + tail for _, cont in pairs]))
        results = self.run_packed(packed)
        out = []
        for req, r in zip(requests, results, strict=True):
            cut = -1 if req.eos else None
            out.append(
                ContinuationScores(
                    logprob=np.array([lp[:cut].sum() for lp in r.token_logprobs]),
                    n_tokens=np.array([len(lp[:cut]) for lp in r.token_logprobs], dtype=np.int64),
                    greedy=np.array([bool(g[:cut].all()) for g in r.token_greedy]),
                    eos_logprob=np.array([float(lp[-1]) for lp in r.token_logprobs]) if req.eos else None,
                )
            )
        return out

    def _eos_id(self) -> int:
        eos = self.tokenizer.eos_token_id
        if eos is None:
            raise ValueError(f"{self.model_id}: the tokenizer has no EOS token to score after a continuation")
        return int(eos)

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
            variants = self.option_token_ids(req.options)
            if variants:
                ids = sorted({t for v in variants.values() for t in v if t is not None})
                single[i] = (variants, ids, self.encode(req.prompt))
            else:
                multi.append(i)
        groups = _shared_prefix_groups({i: (tuple(ids), tokens) for i, (_, ids, tokens) in single.items()})
        packed = [
            Packed(
                single[group[0]][2][:cut],
                [single[i][2][cut:] for i in group],
                read_ids=single[group[0]][1],
                read_tails=True,
            )
            for group, cut in groups
        ]
        for (group, _), item, res in zip(groups, packed, self.run_packed(packed), strict=True):
            for i, row in zip(group, res.read_logprobs, strict=True):
                out[i] = _pick_prefix(single[i][0], dict(zip(item.read_ids, np.exp(row), strict=True)))
        if multi:
            scores = self.continuation_scores(
                [ContinuationRequest(requests[i].prompt, tuple(" " + o for o in requests[i].options)) for i in multi]
            )
            for i, s in zip(multi, scores, strict=True):
                out[i] = ChoiceProbs.from_continuations(s)
        return [o for o in out if o is not None]

    def option_token_ids(self, options: Sequence[str]) -> dict[str, list[int | None]]:
        """Per space-marker prefix, each option's token id (``None`` if not one token).

        Empty when no prefix makes every option a single vocabulary token; such
        options are scored as continuations instead.
        """
        vocab = self.vocab()
        found = {prefix: [vocab.get(prefix + o) for o in options] for prefix in SPACE_MARKERS}
        usable = {p: ids for p, ids in found.items() if any(i is not None for i in ids)}
        if not any(all(i is not None for i in ids) for ids in usable.values()):
            return {}
        return usable

    def numeric(self, prompts: Sequence[str], *, steps: int = 2) -> list[float]:
        """folktexts' verbalised probability: the prompt ends in ``0.``; greedily
        append the likeliest digit token ``steps`` times; read ``0.<digits>``.

        Each prompt is encoded once: the later steps feed the chosen digit through
        the KV cache (see :meth:`_greedy_digits`), in the token-budget batches of
        :meth:`generate`.
        """
        digits = sorted(i for tok, i in self.vocab().items() if tok.isdecimal())
        if not digits:
            raise ValueError(f"{self.model_id}: the vocabulary has no digit tokens for numeric answers")
        if steps < 1:
            raise ValueError(f"{self.model_id}: numeric answers need steps >= 1, got {steps}")
        contexts = [self.encode(p) for p in prompts]
        lengths = [len(c) + steps for c in contexts]
        chosen = self._in_batches(contexts, lengths, partial(self._greedy_digits, digits=digits, steps=steps))
        return [float("0." + "".join(self.tokenizer.convert_ids_to_tokens(ids))) for ids in chosen]

    def numeric_chat(self, prompts: Sequence[str], *, max_new_tokens: int = 24) -> list[float]:
        """The free-form variant: a greedy reply (e.g. to a chat prompt), parsed for a
        probability; NaN where the reply states none."""
        return probabilities_from_replies(self.generate(prompts, max_new_tokens=max_new_tokens), self.model_id)

    def generate(self, prompts: Sequence[str], *, max_new_tokens: int = 32) -> list[str]:
        """Greedy free-form replies (chat variants of the numeric question).

        Prompts run in token-budget batches of similar length (prompt plus
        ``max_new_tokens`` per row), left-padded; ``transformers`` derives the
        position ids from the attention mask, so a reply does not depend on
        what else is in its batch. Each reply is decoded up to its own EOS.
        """
        if max_new_tokens < 1:
            raise ValueError(f"{self.model_id}: max_new_tokens must be at least 1, got {max_new_tokens}")
        contexts = [self.encode(p) for p in prompts]
        lengths = [len(c) + max_new_tokens for c in contexts]
        return self._in_batches(contexts, lengths, partial(self._generate_batch, max_new_tokens=max_new_tokens))

    def _in_batches(
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

    def _left_padded(self, contexts: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Ids and attention mask with every context ending in the last column, so the
        new tokens of all rows line up; on the model's input device."""
        width = max(len(c) for c in contexts)
        pad = self.tokenizer.pad_token_id or self._prefix_id or 0  # any id: the mask hides it
        ids = torch.full((len(contexts), width), pad, dtype=torch.long)
        mask = torch.zeros((len(contexts), width), dtype=torch.long)
        for b, ctx in enumerate(contexts):
            ids[b, width - len(ctx) :] = torch.tensor(ctx)
            mask[b, width - len(ctx) :] = 1
        return ids.to(self.device), mask.to(self.device)

    def _generate_batch(self, contexts: list[list[int]], *, max_new_tokens: int) -> list[str]:
        """One left-padded ``model.generate`` call; new tokens up to each row's first stop token."""
        start = time.perf_counter()
        ids, mask = self._left_padded(contexts)
        width = ids.shape[1]
        with torch.inference_mode():
            out = self.model.generate(
                ids,
                attention_mask=mask,
                max_new_tokens=max_new_tokens,
                do_sample=False,
                pad_token_id=self.tokenizer.eos_token_id,
            )
        stops = self._stop_ids()
        new_tokens = []
        for row in out[:, width:].tolist():
            end = next((j + 1 for j, t in enumerate(row) if t in stops), len(row))
            new_tokens.append(row[:end])
        steps = out.shape[1] - width
        self._count(
            sum(len(c) for c in contexts) + sum(len(t) for t in new_tokens),
            start,
            passes=steps,
            logits=len(contexts) * steps,
            attended=_causal_pairs([len(c) + len(t) for c, t in zip(contexts, new_tokens, strict=True)]),
        )
        texts: list[str] = self.tokenizer.batch_decode(new_tokens, skip_special_tokens=True)
        return texts

    def _greedy_digits(self, contexts: list[list[int]], *, digits: list[int], steps: int) -> list[list[int]]:
        """One left-padded batch of :meth:`numeric`: ``steps`` digit ids per row.

        The prompts run once; each later pass feeds only the digit just chosen,
        attending to the KV cache. The output projection runs on the last position
        alone (in float32, soft-capped like every other read). Not ``model.generate``:
        transformers merges the checkpoint's ``generation_config`` into every call,
        and its logits processors (e.g. a repetition penalty) would move the argmax.
        """
        start = time.perf_counter()
        head = _shared_head(torch.tensor([c[: min(map(len, contexts))] for c in contexts]), list(map(len, contexts)))
        ids, mask = self._left_padded([c[head:] for c in contexts])
        positions = head + (mask.cumsum(dim=1) - 1).clamp(min=0)
        allowed = torch.tensor(digits, device=self._lm_head.weight.device)
        cache = None
        chosen = []
        with torch.inference_mode():
            if head:  # the opening every prompt shares, encoded once; the padding sits after it, masked
                cache = self._head_cache(contexts[0][:head], len(contexts))
                mask = torch.cat([torch.ones((len(contexts), head), dtype=mask.dtype, device=mask.device), mask], dim=1)
            for _ in range(steps):
                out = self.model.base_model(
                    input_ids=ids, attention_mask=mask, position_ids=positions, past_key_values=cache, use_cache=True
                )
                logits = self._logits(out.last_hidden_state[:, -1])
                ids = allowed[logits[:, allowed].argmax(dim=-1)][:, None].to(self.device)  # ties: lowest id
                chosen.append(ids)
                cache = out.past_key_values
                mask = torch.cat([mask, torch.ones_like(ids)], dim=1)
                positions = positions[:, -1:] + 1
        self._count(
            head + sum(len(c) - head for c in contexts) + len(contexts) * (steps - 1),
            start,
            passes=steps,
            logits=len(contexts) * steps,
            attended=_causal_pairs([len(c) + steps - 1 for c in contexts])
            - (len(contexts) - 1) * _causal_pairs([head]),
        )
        best: list[list[int]] = torch.cat(chosen, dim=1).tolist()
        return best

    def _stop_ids(self) -> set[int]:
        """The ids on which ``generate`` ends a sequence (what follows them is padding)."""
        eos = self.model.generation_config.eos_token_id
        if eos is None:
            return set()
        return {int(eos)} if isinstance(eos, int) else {int(e) for e in eos}

    def _is_templated(self, prompt: str) -> bool:
        """Whether ``prompt`` came out of the chat template, which already holds every
        special token it needs (adding the BOS again would change the numbers)."""
        head = self._template_head()
        return bool(head) and prompt.startswith(head)

    def _template_head(self) -> str:
        """The text every rendering of the chat template starts with ("" without a template)."""
        if self._head is None:
            self._head = ""
            if self.tokenizer.chat_template is not None:
                probes = [[{"role": "user", "content": "\x00"}]]
                if self._takes_system_turn():
                    probes.append([{"role": "system", "content": "\x01"}, {"role": "user", "content": "\x00"}])
                renders = [self._render(m) for m in probes]
                self._head = os.path.commonprefix([r.split("\x00")[0].split("\x01")[0] for r in renders])  # noqa: RUF071
            bos = self.tokenizer.bos_token
            if not self._head and bos and self.tokenizer.chat_template is not None:
                self._head = str(bos)
        return self._head

    # ------------------------------------------------------------------ sampling

    def sample_words(self, requests: Sequence[WordSamplingRequest]) -> list[WordSamples]:
        """First complete words of ancestral samples.

        A request's samples are drawn in chunks of :data:`SAMPLE_CHUNK`, each with its
        own generator (seeded from the request's seed), as a tree over the context's
        KV cache (:meth:`_sample_groups`). Chunks of several requests decode together,
        in token-budget batches of sample rows: the words drawn for a seed are those
        it draws alone, up to float noise in the logits of a differently shaped batch.
        """
        groups: list[_SampleGroup] = []
        for i, req in enumerate(requests):
            if req.n < 1:
                raise ValueError(f"word sampling needs n >= 1, got {req.n}")
            context = self.encode(req.context)
            for chunk, offset in enumerate(range(0, req.n, SAMPLE_CHUNK)):
                seed = int.from_bytes(hashlib.sha256(f"{req.seed}:{chunk}".encode()).digest()[:8], "little")
                groups.append(_SampleGroup(i, req, context, min(SAMPLE_CHUNK, req.n - offset), seed))
        rows = max(SAMPLE_CHUNK, SAMPLE_LOGITS // self._lm_head.out_features)
        drawn = self._in_batches(groups, [g.size for g in groups], self._sample_groups, cap=rows)
        words: list[list[str]] = [[] for _ in requests]
        rejected = [0] * len(requests)
        for group, (got, bad) in zip(groups, drawn, strict=True):
            words[group.request_index] += got
            rejected[group.request_index] += bad
        return [WordSamples(words=w, rejected=r) for w, r in zip(words, rejected, strict=True)]

    def _sample_groups(self, groups: list[_SampleGroup]) -> list[tuple[list[str], int]]:
        """Each group's words and rejections, drawn as trees decoded in one batch.

        Samples of a group that drew the same tokens so far share one row of the
        forward pass, and a row holding ``c`` samples draws ``c`` next tokens from
        its distribution (inverse CDF), with the group's generator. The words are
        exactly those of independent samples; only their order is drawn at the end.
        The contexts run once, left-padded; rows stay in group order.
        """
        with torch.inference_mode():  # the logits are updated in place
            contexts = {g.request_index: g.context for g in groups}  # one per request, in order
            row_of = {r: i for i, r in enumerate(contexts)}
            cache, logits, mask = self._context_cache(list(contexts.values()))
            first = torch.tensor([row_of[g.request_index] for g in groups], device=self.device)
            cache.batch_select_indices(first)
            logits, mask = logits[first], None if mask is None else mask[first]
            warpers = [_warpers(g.request) for g in groups]
            gens = [torch.Generator(device=self.device).manual_seed(g.seed) for g in groups]
            words: list[list[str]] = [[] for _ in groups]
            rejected = [0] * len(groups)
            prefixes: list[list[int]] = [[] for _ in groups]
            owner, counts = list(range(len(groups))), [g.size for g in groups]
            eos = self.tokenizer.eos_token_id
            for step in range(max(g.request.max_new_tokens for g in groups)):
                for g, rows in _runs(owner):
                    if warpers[g]:
                        history = torch.tensor([groups[g].context + p for p in prefixes[rows]], device=self.device)
                        logits[rows] = warpers[g](history, logits[rows])
                draws = torch.repeat_interleave(torch.tensor(counts, device=self.device))
                uniform = torch.cat(
                    [
                        torch.rand(sum(counts[rows]), generator=gens[g], dtype=torch.float64, device=self.device)
                        for g, rows in _runs(owner)
                    ]
                )
                drawn = _inverse_cdf(logits, draws, uniform)
                pairs, n_pair = torch.unique(torch.stack([draws, drawn], dim=1), dim=0, return_counts=True)
                parents, kept = [], []
                for (row, token), k in zip(pairs.tolist(), n_pair.tolist(), strict=True):
                    g, seq = owner[row], [*prefixes[row], token]
                    # Only the end of the text settles a word at its end; running out of new
                    # tokens does not (the word may go on), so such samples are rejected.
                    word, done = first_word(
                        self.tokenizer.decode(seq, skip_special_tokens=True), finished=eos is not None and token == eos
                    )
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
                order = torch.randperm(len(words[g]), generator=gen, device=self.device).tolist()
                result.append(([words[g][i] for i in order], rejected[g]))
            return result

    def _context_cache(self, contexts: list[list[int]]) -> tuple[Any, torch.Tensor, torch.Tensor | None]:
        """KV cache and last-position logits of left-padded ``contexts``, and their attention
        mask (None where no row is padded)."""
        start = time.perf_counter()
        ids, mask = self._left_padded(contexts)
        padded = bool((mask == 0).any())
        out = self.model.base_model(
            input_ids=ids,
            attention_mask=mask if padded else None,
            position_ids=(mask.cumsum(dim=1) - 1).clamp(min=0),
            use_cache=True,
        )
        logits = self._logits(out.last_hidden_state[:, -1])
        self._count(sum(map(len, contexts)), start, logits=len(contexts), attended=_causal_pairs(map(len, contexts)))
        return out.past_key_values, logits, mask if padded else None

    def _decode_step(
        self, cache: Any, tokens: list[int], positions: list[int], parents: list[int], mask: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Next-token logits of one new token per row, row ``i`` continuing cache row
        ``parents[i]`` (the cache is reordered in place); the mask, extended."""
        start = time.perf_counter()
        selected = torch.tensor(parents, device=self.device)
        cache.batch_select_indices(selected)
        if mask is not None:
            mask = torch.cat([mask[selected], torch.ones_like(mask[selected, :1])], dim=1)
        out = self.model.base_model(
            input_ids=torch.tensor(tokens, device=self.device)[:, None],
            attention_mask=mask,
            position_ids=torch.tensor(positions, device=self.device)[:, None],
            past_key_values=cache,
            use_cache=True,
        )
        self._count(len(tokens), start, logits=len(tokens), attended=sum(positions) + len(tokens))
        return self._logits(out.last_hidden_state[:, -1]), mask

    # ------------------------------------------------------------------ packed forward

    def run_packed(self, items: Sequence[Packed]) -> list[PackedResult]:
        """Score packed sequences in token-budget batches of similar length."""
        return self._in_batches(items, [p.length for p in items], self._forward)

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

    def _forward(self, batch: list[Packed]) -> list[PackedResult]:
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
        head = _shared_head(ids, [len(p.context) for p in batch])
        attended = int(((positions + 1) * (segments >= 0)).sum()) - (len(batch) - 1) * _causal_pairs([head])
        with torch.inference_mode():
            cache = None
            if head:  # the tokens every row starts with, encoded once; each row attends to their cache
                cache = self._head_cache(ids[0, :head].tolist(), len(batch))
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
                past_key_values=cache,
                use_cache=cache is not None,
            ).last_hidden_state
            token_lp, token_greedy = self._gather_logprobs(hidden, rows, cols, targets)
            read_lp = self._read_logprobs(hidden, read_rows, read_cols, batch)
        self._count(head + int((segments >= 0).sum()), start, logits=len(rows) + len(read_rows), attended=attended)
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

    def _logits(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = self._lm_head(hidden).float()
        if self._softcap:
            logits = torch.tanh(logits / self._softcap) * self._softcap
        return logits

    def _gather_logprobs(
        self, hidden: torch.Tensor, rows: list[int], cols: list[int], targets: list[int]
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
        if not rows:
            return np.empty(0), np.empty(0, dtype=bool)
        logits = self._logits(hidden[torch.tensor(rows), torch.tensor(cols)])
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
        logprobs = torch.log_softmax(self._logits(hidden[torch.tensor(rows), torch.tensor(cols)]), dim=-1)
        out = []
        for j, b in enumerate(rows):
            ids = torch.tensor(batch[b].read_ids, device=logprobs.device)
            out.append(logprobs[j, ids].double().cpu().numpy())
        return out

    def _head_cache(self, head: list[int], rows: int) -> Any:
        """The KV cache of ``head``, the opening a batch's rows share, run once and repeated for ``rows`` rows."""
        cache = self.model.base_model(
            input_ids=torch.tensor([head], device=self.device), use_cache=True
        ).past_key_values
        cache.batch_repeat_interleave(rows)
        return cache

    def _count(self, tokens: int, start: float, *, passes: int = 1, logits: int = 0, attended: int = 0) -> None:
        self.counters.tokens += tokens
        self.counters.attended += attended
        self.counters.logit_rows += logits
        self.counters.forward_passes += passes
        self.counters.seconds += time.perf_counter() - start


def _causal_pairs(lengths: Iterable[int]) -> int:
    """Query-key pairs of causal attention over sequences of these lengths."""
    return sum(n * (n + 1) // 2 for n in lengths)


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


SHARED_HEAD_MIN = 16
"""A batch whose rows all open with at least this many equal tokens (an instruction, a chat
header, the demonstrations of a task) encodes them once, as a KV cache every row attends to."""


def _shared_head(ids: torch.Tensor, context_lengths: list[int]) -> int:
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


def _shared_prefix_groups(
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


def _pick_prefix(variants: dict[str, list[int | None]], prob: dict[int, float]) -> ChoiceProbs:
    """folktexts' rule: use the space-marker prefix whose option tokens hold the most mass."""
    mass = {p: sum(prob[i] for i in ids if i is not None) for p, ids in variants.items()}
    best = max(variants, key=lambda p: mass[p])
    probs = np.array([prob[i] if i is not None else 0.0 for i in variants[best]])
    total = probs.sum()
    if total <= 0:
        return ChoiceProbs(probs=np.full(len(probs), 1 / len(probs)), mass=0.0, prefix=best)
    return ChoiceProbs(probs=probs / total, mass=float(total), prefix=best)

"""The OpenAI-compatible web API backend (OpenAI, vLLM, TGI, llama.cpp servers...).

Chat models (``instruct: true``) go through ``/chat/completions`` with
``logprobs``/``top_logprobs``; base models through ``/completions`` with
``logprobs`` (and ``echo`` for log-likelihoods of given text). The official
``openai`` client does the HTTP work: timeouts, and retries with exponential
backoff on 408/409/429/5xx (honouring ``Retry-After``).

The API key is read from the environment variable the model entry names and
handed to the client only; it never appears in this module's logs, errors or
outputs (an error body that echoes it is redacted). Every reply is checked
before it is read: the number of choices asked for, and the fields a request
kind needs; anything else is an :class:`APIResponseError` naming the model,
the endpoint and what was wrong, never a bare ``TypeError``.

No chat endpoint lets a reply be pre-filled, so a chat prompt's prefill
(``Answer:``) ends the user turn instead, as folktexts asks web-API models:
the answer is then the first reply token (letters read from its
``top_logprobs``) or a free-form reply parsed for a probability.

What an API cannot answer is an :class:`~unsure.engine.backend.Unsupported`
error naming the model: chat endpoints return no log-likelihoods of given text.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np

from unsure.config import Model
from unsure.engine.backend import Unsupported
from unsure.engine.requests import (
    ChoiceProbs,
    ChoiceRequest,
    ContinuationRequest,
    ContinuationScores,
    Floats,
    NumericReplyRequest,
    NumericRequest,
    ReplyRequest,
    WordSamples,
    WordSamplingRequest,
)
from unsure.engine.words import first_word, probabilities_from_replies
from unsure.logs import COUNT, Tally

log = logging.getLogger(__name__)

CHAT_MARK = "\x1eunsure-chat\x1e"
"""Prefix of a prompt made by :meth:`APIEngine.chat_prompt`: the messages follow as JSON."""

MAX_TOP_LOGPROBS = 20
"""The most alternatives OpenAI returns per position; an option outside them gets probability 0."""

MAX_N = 128
"""The most completions OpenAI returns per request; larger ``n`` is split over requests."""

NUMERIC_REPLY_TOKENS = 128
"""Reply length of a chat model asked for a probability: room for a sentence around
the number; a reply that states none by then is NaN (and counted)."""

SPACE_CHARS = {" ": " ", "\t": "\t", "\r": "\r", "\n": "\n", "\u2581": " ", "\u0120": " ", "\u010a": "\n"}
"""Characters a reply token may carry before an answer letter, and the space marker
each stands for: decoded whitespace, or the raw markers some servers return
undecoded (SentencePiece's ``▁``, byte-level BPE's ``Ġ`` and ``Ċ``; ``tokens.SPACE_MARKERS``)."""

_ZERO_POINT = re.compile(r"(?<![\d.])0\.$")

RETRY_COUNT_HEADER = "x-stainless-retry-count"
"""The header in which the ``openai`` client tells the server how many retries came before a request."""

T = TypeVar("T")
R = TypeVar("R")


class APIResponseError(RuntimeError):
    """The API answered, but not with what the request needs (e.g. no log-probabilities)."""


class APIEngine:
    """A model behind an OpenAI-compatible endpoint, answering the engine's requests."""

    def __init__(
        self,
        model_id: str,
        *,
        base_url: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        chat: bool = True,
        max_retries: int = 4,
        timeout: float = 60.0,
        concurrency: int = 8,
        top_logprobs: int = MAX_TOP_LOGPROBS,
    ) -> None:
        from openai import OpenAI  # imported here: only API runs need it

        key = os.environ.get(api_key_env)
        if not key:
            raise ValueError(
                f"model {model_id!r}: the API key is read from the environment variable {api_key_env}, "
                "which is not set (set it in the shell that runs Snakemake; never put keys in the config)"
            )
        self.model_id = model_id
        self.base_url = base_url
        self.chat = chat
        self.top_logprobs = min(top_logprobs, MAX_TOP_LOGPROBS)
        self.concurrency = concurrency
        self.timeout = timeout
        self.client = OpenAI(api_key=key, base_url=base_url, max_retries=max_retries, timeout=timeout)
        self._secret = key
        self._tokens = 0
        self._lock = threading.Lock()
        self.tally = Tally(log)
        """This engine's repeated warnings (NaN answers), each logged once with a count."""

    @classmethod
    def from_config(cls, entry: Model, **kwargs: Any) -> APIEngine:
        """Connect exactly as a ``models:`` entry with ``backend: openai`` says."""
        if entry.backend != "openai":
            raise ValueError(f"model {entry.id!r} has backend {entry.backend!r}, not 'openai'")
        settings: dict[str, Any] = {"timeout": entry.timeout_s, "max_retries": entry.max_retries, **kwargs}
        return cls(entry.id, base_url=entry.base_url, api_key_env=entry.api_key_env, chat=entry.instruct, **settings)

    def tokens_processed(self) -> int:
        """Prompt plus completion tokens the API reported so far."""
        return self._tokens

    # ------------------------------------------------------------------ prompts

    def chat_prompt(self, user: str, *, system: str | None = None, prefill: str = "") -> str:
        """The messages of a chat request, carried in a prompt string.

        A ``prefill`` ends the user turn (``user + "\\n" + prefill``): no chat
        API pre-fills a reply, and this is the text folktexts sends web-API models.
        """
        if not self.chat:
            raise Unsupported(f"model {self.model_id!r} is a completions model (instruct: false): no chat prompts")
        messages = [{"role": "system", "content": system}] if system else []
        messages.append({"role": "user", "content": f"{user}\n{prefill}" if prefill else user})
        return CHAT_MARK + json.dumps({"messages": messages})

    @staticmethod
    def _messages(prompt: str) -> list[dict[str, str]]:
        if not prompt.startswith(CHAT_MARK):
            return [{"role": "user", "content": prompt}]
        messages: list[dict[str, str]] = json.loads(prompt[len(CHAT_MARK) :])["messages"]
        return messages

    # ------------------------------------------------------------------ requests

    def choice_probs(self, requests: Sequence[ChoiceRequest]) -> list[ChoiceProbs]:
        """Option probabilities from the first reply token's ``top_logprobs`` (see
        :func:`letter_probs`); ``mass`` is the raw probability on the options.

        Options longer than one token are scored as continuations (completions
        models only). When no option is among the returned alternatives the
        probabilities are NaN (counted in one warning per engine): the API hides where the mass went.
        """
        if any(len(o.split()) != 1 or o != o.strip() for r in requests for o in r.options):
            if self.chat:
                raise Unsupported(f"model {self.model_id!r}: a chat API scores single-token options only")
            return self._choices_as_continuations(requests)
        out = self._map(self._choice_probs_one, requests)
        for options in dict.fromkeys(r.options for r in requests):  # one line per engine, not per call or prompt
            asked = [
                bool(np.isnan(got.probs).all()) for r, got in zip(requests, out, strict=True) if r.options == options
            ]
            self.tally.add(
                f"{self.model_id}: NaN for {COUNT}: none of the options {options} among the top "
                f"{self.top_logprobs} reply tokens",
                sum(asked),
                len(asked),
            )
        return out

    def _choice_probs_one(self, req: ChoiceRequest) -> ChoiceProbs:
        found = letter_probs(self._next_token_top(req.prompt, "choice"), req.options)
        if found is None:
            return ChoiceProbs(probs=np.full(len(req.options), np.nan), mass=0.0, prefix=None)
        return found

    def _choices_as_continuations(self, requests: Sequence[ChoiceRequest]) -> list[ChoiceProbs]:
        scores = self.continuation_scores(
            [ContinuationRequest(r.prompt, tuple(" " + o for o in r.options)) for r in requests]
        )
        return [ChoiceProbs.from_continuations(s) for s in scores]

    def _next_token_top(self, prompt: str, kind: str) -> list[tuple[str, float]]:
        """The most likely next tokens (decoded text; two tokens may share one) and their probabilities."""
        if self.chat:
            res = self._call(
                self.client.chat.completions.create,
                kind,
                1,
                model=self.model_id,
                messages=self._messages(prompt),
                max_tokens=1,
                temperature=0,
                logprobs=True,
                top_logprobs=self.top_logprobs,
            )
            with self._reading(kind):
                content = res.choices[0].logprobs.content if res.choices[0].logprobs else None
                if not content:
                    raise self._no_logprobs(kind)
                return [(str(t.token), math.exp(float(t.logprob))) for t in content[0].top_logprobs]
        res = self._call(
            self.client.completions.create,
            kind,
            1,
            model=self.model_id,
            prompt=prompt,
            max_tokens=1,
            temperature=0,
            logprobs=self.top_logprobs,
        )
        with self._reading(kind):
            lp = res.choices[0].logprobs
            if lp is None or not lp.top_logprobs or lp.top_logprobs[0] is None:
                raise self._no_logprobs(kind)
            return [(str(tok), math.exp(float(v))) for tok, v in lp.top_logprobs[0].items()]

    def continuation_scores(self, requests: Sequence[ContinuationRequest]) -> list[ContinuationScores]:
        """Log-likelihoods of given continuations from ``/completions`` with ``echo``.

        All continuations of a request go in one API call; the tokens from the
        end of the context on are summed, and a token is greedy when it is the
        top alternative at its position.
        """
        if self.chat:
            raise Unsupported(
                f"model {self.model_id!r}: chat APIs return no log-likelihoods of given text; "
                "use a completions endpoint (instruct: false) for continuation scores"
            )
        if any(req.eos for req in requests):
            raise Unsupported(
                f"model {self.model_id!r}: completions APIs score text, not the end-of-sequence token; "
                "continuation requests with eos need a local (hf) model"
            )
        return self._map(self._continuations_one, requests)

    def _continuations_one(self, req: ContinuationRequest) -> ContinuationScores:
        if not req.context:
            raise ValueError(f"model {self.model_id!r}: continuation scores need a non-empty context")
        res = self._call(
            self.client.completions.create,
            "continuation",
            len(req.continuations),
            model=self.model_id,
            prompt=[req.context + c for c in req.continuations],
            max_tokens=1,
            temperature=0,
            logprobs=1,
            echo=True,
        )
        with self._reading("continuation"):
            return self._continuation_scores(req, sorted(res.choices, key=lambda c: c.index))

    def _continuation_scores(self, req: ContinuationRequest, choices: list[Any]) -> ContinuationScores:
        logprob, n_tokens, greedy = [], [], []
        for cont, choice in zip(req.continuations, choices, strict=True):
            lp = choice.logprobs
            if lp is None or lp.token_logprobs is None or lp.text_offset is None:
                raise self._no_logprobs("continuation")
            end = len(req.context) + len(cont)
            picked = [i for i, off in enumerate(lp.text_offset) if len(req.context) <= off < end]
            if not picked or (
                picked[0] > 0 and lp.text_offset[picked[0] - 1] + len(lp.tokens[picked[0] - 1]) > len(req.context)
            ):
                raise APIResponseError(
                    f"model {self.model_id!r}: the continuation {cont!r} does not start on a token boundary "
                    f"after the context {req.context[-40:]!r}"
                )
            values = [lp.token_logprobs[i] for i in picked]
            if any(v is None for v in values):
                raise self._no_logprobs("continuation")
            tops = [lp.top_logprobs[i] if lp.top_logprobs else None for i in picked]
            logprob.append(float(sum(values)))
            n_tokens.append(len(picked))
            greedy.append(all(t is not None and v >= max(t.values()) - 1e-9 for v, t in zip(values, tops, strict=True)))
        return ContinuationScores(
            logprob=np.array(logprob), n_tokens=np.array(n_tokens, dtype=np.int64), greedy=np.array(greedy)
        )

    def numeric(self, requests: Sequence[NumericRequest]) -> list[float]:
        """folktexts' verbalised probability on completions models (greedy over digit
        tokens after ``0.``); on chat models, which cannot be pre-filled, the
        free-form variant (:meth:`numeric_chat`) on the prompt with its prefill."""
        if self.chat:
            return self.numeric_chat([NumericReplyRequest(r.prompt) for r in requests])
        values = self._map(lambda r: self._numeric_one(r.prompt, r.steps), requests)
        self.tally.add(
            f"{self.model_id}: NaN for {COUNT}: no digit among the top {self.top_logprobs} next tokens",
            sum(math.isnan(v) for v in values),
            len(values),
        )
        return values

    def _numeric_one(self, prompt: str, steps: int) -> float:
        """``0.<digits>``, or NaN when a step's top tokens hold no digit (counted by :meth:`numeric`)."""
        digits = ""
        for _ in range(steps):
            top = self._next_token_top(prompt + digits, "numeric")
            found = [(p, t.strip()) for t, p in top if t.strip().isdecimal()]
            if not found:
                return math.nan
            digits += max(found)[1]
        return float(f"0.{digits}")

    def numeric_chat(self, requests: Sequence[NumericReplyRequest]) -> list[float]:
        """The free-form chat variant: a greedy reply, parsed for a probability (NaN,
        counted in one warning per engine, when none). After a prompt ending in ``0.`` a reply
        opening with bare digits reads as the decimals that follow it. A request without
        ``max_new_tokens`` gets :data:`NUMERIC_REPLY_TOKENS`."""
        leads = ["0." if _ZERO_POINT.search(self._messages(r.prompt)[-1]["content"]) else "" for r in requests]
        replies = self.generate(
            [
                ReplyRequest(r.prompt, NUMERIC_REPLY_TOKENS if r.max_new_tokens is None else r.max_new_tokens)
                for r in requests
            ]
        )
        return probabilities_from_replies(replies, self.model_id, self.tally, leads=leads)

    def generate(self, requests: Sequence[ReplyRequest]) -> list[str]:
        """Greedy (temperature 0) replies."""
        return self._map(
            lambda r: self._complete(r.prompt, n=1, max_tokens=r.max_new_tokens, temperature=0.0)[0][0], requests
        )

    def sample_words(self, requests: Sequence[WordSamplingRequest]) -> list[WordSamples]:
        """First complete words of ``n`` sampled replies (the API's ``n``, its ``seed``).

        ``top_k`` is not an OpenAI parameter; it is passed as ``top_k`` in the
        request body, which vLLM and TGI honour.
        """
        return [self._sample_one(r) for r in requests]

    def _sample_one(self, req: WordSamplingRequest) -> WordSamples:
        if req.n < 1:
            raise ValueError(f"word sampling needs n >= 1, got {req.n}")
        sizes = [min(MAX_N, req.n - start) for start in range(0, req.n, MAX_N)]
        extra: dict[str, Any] = {"top_p": req.top_p} if req.top_p is not None else {}
        if req.top_k is not None:
            extra["extra_body"] = {"top_k": req.top_k}
        chunks = self._map(
            lambda ij: self._complete(
                req.context,
                n=ij[1],
                max_tokens=req.max_new_tokens,
                temperature=req.temperature,
                seed=req.seed + ij[0],
                **extra,
            ),
            list(enumerate(sizes)),
        )
        words, rejected = [], 0
        for chunk in chunks:
            for text, finished in chunk:
                word, _ = first_word(text, finished=True) if finished else first_word(text + " ", finished=False)
                if word is None:
                    rejected += 1
                else:
                    words.append(word)
        return WordSamples(words=words, rejected=rejected)

    def _complete(
        self, prompt: str, *, n: int, max_tokens: int, temperature: float, **extra: Any
    ) -> list[tuple[str, bool]]:
        """``n`` replies as (text, whether the model stopped by itself)."""
        if self.chat:
            res = self._call(
                self.client.chat.completions.create,
                "reply",
                n,
                model=self.model_id,
                messages=self._messages(prompt),
                n=n,
                max_tokens=max_tokens,
                temperature=temperature,
                **extra,
            )
            with self._reading("reply"):
                choices = sorted(res.choices, key=lambda c: c.index)
                return [(_text(c.message.content), c.finish_reason == "stop") for c in choices]
        res = self._call(
            self.client.completions.create,
            "reply",
            n,
            model=self.model_id,
            prompt=prompt,
            n=n,
            max_tokens=max_tokens,
            temperature=temperature,
            **extra,
        )
        with self._reading("reply"):
            return [(_text(c.text), c.finish_reason == "stop") for c in sorted(res.choices, key=lambda c: c.index)]

    # ------------------------------------------------------------------ plumbing

    @property
    def _where(self) -> str:
        return f"model {self.model_id!r} at {self.base_url or 'api.openai.com'}"

    def _redact(self, text: str) -> str:
        """``text`` without the API key (an error body may echo the request's header)."""
        return text.replace(self._secret, "[API key redacted]")

    def _call(self, create: Callable[..., Any], kind: str, expect: int, **kwargs: Any) -> Any:
        """One request; its reply, checked to carry ``expect`` choices."""
        import openai

        try:
            res = create(**kwargs)
        except openai.AuthenticationError as err:
            raise PermissionError(
                f"{self._where}: the API rejected the key "
                f"(HTTP {err.status_code}); check the environment variable that holds it"
            ) from None
        except openai.APIStatusError as err:
            retries = self._retries(err)
            raise APIResponseError(
                self._redact(
                    f"{self._where}: HTTP {err.status_code} {_after(retries, 'sent once, not retried')}: {err.message}"
                )
            ) from None
        except openai.APITimeoutError as err:
            tries = self._retries(err) + 1
            raise APIResponseError(
                f"{self._where}: no reply within {self.timeout:g} s, {'once' if tries == 1 else f'{tries} times'} "
                "(raise timeout_s or max_retries of this model entry if the endpoint is slow, not dead)"
            ) from None
        except openai.APIConnectionError as err:
            raise APIResponseError(
                f"{self._where}: cannot connect {_after(self._retries(err), 'tried once')} ({type(err).__name__})"
            ) from None
        except (openai.OpenAIError, ValueError, TypeError) as err:  # a body that is not the JSON it should be
            if isinstance(err, json.JSONDecodeError) and not err.doc.lstrip().startswith(("{", "[")):
                raise self._not_json(kind, err.doc) from None  # served as JSON, but an HTML page or text
            raise APIResponseError(
                self._redact(f"{self._where}: malformed reply to a {kind} request ({type(err).__name__}: {err})")
            ) from None
        if isinstance(res, str | bytes):  # the client hands back a body that is not JSON as text
            raise self._not_json(kind, res if isinstance(res, str) else res.decode("utf-8", "replace"))
        choices = getattr(res, "choices", None)
        if not isinstance(choices, list) or len(choices) != expect:
            got = f"{len(choices)}" if isinstance(choices, list) else f"no list but {type(choices).__name__}"
            raise APIResponseError(f"{self._where}: a {kind} request asked for {expect} choices and got {got}")
        usage = getattr(res, "usage", None)
        if usage is not None:
            with self._lock, self._reading(kind):
                self._tokens += int(usage.total_tokens or 0)
        return res

    def _retries(self, err: Any) -> int:
        """The retries the client made before ``err``: the count it sent with the last request
        (a 403 is not retried, so 0), or, from an older client that sends none, its retry policy."""
        request = getattr(err, "request", None)
        sent = request.headers.get(RETRY_COUNT_HEADER) if request is not None else None
        if isinstance(sent, str) and sent.isdecimal():
            return int(sent)
        status = getattr(err, "status_code", None)
        retried = status is None or status in (408, 409, 429) or status >= 500  # timeouts and connections: no status
        return self.client.max_retries if retried else 0

    def _not_json(self, kind: str, body: str) -> APIResponseError:
        """A reply whose body is no JSON at all, not one that lacks a field: most often an HTML page of a
        web server or proxy at a base_url that is not the API's."""
        text = body.strip()
        title = re.search(r"<title[^>]*>(.*?)</title>", text, re.IGNORECASE | re.DOTALL)
        if text.startswith("<") or title:
            what = f"an HTML page titled {title.group(1).strip()[:80]!r}" if title else "an HTML page"
            hint = "is base_url the API's address (an OpenAI-compatible one most often ends in /v1)?"
        else:
            what, hint = f"text starting {text[:80]!r}", "is base_url an OpenAI-compatible API?"
        return APIResponseError(
            self._redact(
                f"{self._where}: malformed reply to a {kind} request: the reply is not JSON but {what}: {hint}"
            )
        )

    @contextmanager
    def _reading(self, kind: str) -> Iterator[None]:
        """Reading a reply: a field missing or of the wrong type is a clear error, not a traceback."""
        try:
            yield
        except (AttributeError, TypeError, KeyError, IndexError, ValueError) as err:
            raise APIResponseError(
                self._redact(f"{self._where}: malformed reply to a {kind} request ({type(err).__name__}: {err})")
            ) from None

    def _map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """``fn`` over ``items`` with up to ``concurrency`` requests in flight, in order."""
        if len(items) <= 1 or self.concurrency <= 1:
            return [fn(x) for x in items]
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            return list(pool.map(fn, items))

    def _no_logprobs(self, kind: str) -> APIResponseError:
        return APIResponseError(
            f"{self._where} returned no log-probabilities "
            f"for a {kind} request: this endpoint or model does not support logprobs/top_logprobs"
        )


def _after(retries: int, none: str) -> str:
    """``after 1 retry``, ``after 4 retries``, or ``(none)`` when the request was sent once."""
    if retries == 0:
        return f"({none})"
    return f"after {retries} retr{'y' if retries == 1 else 'ies'}"


def _text(value: Any) -> str:
    """A reply's text (``None`` is an empty reply); anything but text is a malformed reply."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TypeError(f"reply text is a {type(value).__name__}, not a string")
    return value


def letter_probs(top: Sequence[tuple[str, float]], options: Sequence[str]) -> ChoiceProbs | None:
    """The options' probabilities among a reply token's alternatives, or ``None`` if none is there.

    A token is an option once stripped of whitespace; what precedes it is its
    space marker (:data:`SPACE_CHARS`), and as in the HF backend the marker
    whose options hold the most mass is used (tokens of one text and marker add up).
    """
    variants: dict[str, Floats] = {}
    for token, p in top:
        text = token.lstrip("".join(SPACE_CHARS))
        if text.rstrip() in options:
            marker = "".join(SPACE_CHARS[c] for c in token[: len(token) - len(text)])
            variants.setdefault(marker, np.zeros(len(options)))[list(options).index(text.rstrip())] += p
    if not variants:
        return None
    best = max(variants, key=lambda m: float(variants[m].sum()))
    mass = float(variants[best].sum())
    if mass <= 0:
        return None
    return ChoiceProbs(probs=variants[best] / mass, mass=mass, prefix=best)

"""Scoring instances: generative confidences through the engine, prompt-choice similarities."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import pandas as pd

from unsure.decisionrisk.confidences import parse_verbal, uniform
from unsure.decisionrisk.requests import likelihood_requests, verbal_requests
from unsure.engine import ContinuationRequest, Engine, ReplyRequest, Unsupported
from unsure.engine.embeddings import cosine, embed

log = logging.getLogger(__name__)


@dataclass
class GenerativeScorer:
    """A ``run_shard`` scorer: per row ``loglik`` (softmax over the choices' log-likelihoods,
    ``None`` when the backend has none), and for chat models the ``reply`` to
    :func:`~unsure.decisionrisk.requests.verbal_prompt`, its parsed distribution ``verbal``
    (uniform when unparseable) and ``parsed``. :meth:`requests` says what each row sends the
    engine (the request cache's key)."""

    engine: Engine
    instruct: bool
    normalize: bool
    max_new_tokens: int
    loglik: bool = True
    """False once the backend said it has no log-likelihoods (asked once per job)."""

    def _verbal(self, prompts: list[str], choices: list[list[str]]) -> list[ReplyRequest]:
        return verbal_requests(prompts, choices, chat=self.engine.chat_prompt, max_new_tokens=self.max_new_tokens)

    def requests(self, chunk: pd.DataFrame) -> list[tuple[ContinuationRequest | ReplyRequest, ...]]:
        """Per row, its choices' log-likelihood request and, for a chat model, its verbal question."""
        prompts, choices = chunk["prompt"].tolist(), [list(c) for c in chunk["choices"]]
        likelihoods = likelihood_requests(prompts, choices)
        if not self.instruct:
            return [(r,) for r in likelihoods]
        return list(zip(likelihoods, self._verbal(prompts, choices), strict=True))

    def __call__(self, chunk: pd.DataFrame) -> pd.DataFrame:
        prompts, choices = chunk["prompt"].tolist(), [list(c) for c in chunk["choices"]]
        out = pd.DataFrame({"row_id": chunk["row_id"].to_numpy()})
        loglik: list[list[float] | None] = [None] * len(chunk)
        if self.loglik:
            try:
                scores = self.engine.continuation_scores(likelihood_requests(prompts, choices))
                loglik = [s.softmax(normalize=self.normalize).tolist() for s in scores]
            except Unsupported as err:
                log.warning("no log-likelihood confidences: %s", err)
                self.loglik = False
        out["loglik"] = loglik
        if self.instruct:
            replies = self.engine.generate(self._verbal(prompts, choices))
            parsed = [parse_verbal(r, len(c)) for r, c in zip(replies, choices, strict=True)]
            out["reply"] = replies
            out["verbal"] = [
                (uniform(len(c)) if d is None else d).tolist() for d, c in zip(parsed, choices, strict=True)
            ]
            out["parsed"] = [d is not None for d in parsed]
        else:
            out["reply"] = None
            out["verbal"] = None
            out["parsed"] = True
        return out


def generative_scorer(engine: Engine, *, instruct: bool, normalize: bool, max_new_tokens: int) -> GenerativeScorer:
    """The scorer of a generative model's confidences (see :class:`GenerativeScorer`)."""
    return GenerativeScorer(engine, instruct, normalize, max_new_tokens)


def similarities(
    instances: pd.DataFrame, model_id: str, *, batch_size: int = 64, revision: str | None = None
) -> pd.DataFrame:
    """Cosine similarity between each row's prompt and each of its choices (``row_id, similarities``).

    Every distinct text is embedded once, so the injected copies (which reuse
    prompts and choices) cost nothing extra.
    """
    prompts = instances["prompt"].tolist()
    choices = [list(c) for c in instances["choices"]]
    texts = sorted({*prompts, *(c for cs in choices for c in cs)})
    vectors = embed(model_id, texts, batch_size=batch_size, revision=revision)
    index = {t: i for i, t in enumerate(texts)}
    sims = []
    for prompt, cs in zip(prompts, choices, strict=True):
        a = vectors[[index[prompt]] * len(cs)]
        b = vectors[[index[c] for c in cs]]
        sims.append(np.round(cosine(a, b), 12).tolist())
    return pd.DataFrame({"row_id": instances["row_id"].to_numpy(), "similarities": sims})

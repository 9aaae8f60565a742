"""Scoring instances: generative confidences through the engine, prompt-choice similarities."""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np
import pandas as pd

from unsure.decisionrisk.confidences import parse_verbal, uniform
from unsure.decisionrisk.requests import likelihood_requests, verbal_requests
from unsure.engine import Engine, Unsupported
from unsure.engine.embeddings import cosine, embed

log = logging.getLogger(__name__)

PROMPT_VERSION = 1
"""Bump when the verbal prompt or the continuation format changes (invalidates checkpoints)."""


def generative_scorer(
    engine: Engine, *, instruct: bool, normalize: bool, max_new_tokens: int
) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """A ``run_shard`` scorer: per row ``loglik`` (softmax over the choices' log-likelihoods,
    ``None`` when the backend has none), and for chat models the ``reply`` to
    :func:`~unsure.decisionrisk.requests.verbal_prompt`, its parsed
    distribution ``verbal`` (uniform when unparseable) and ``parsed``."""
    state = {"loglik": True}

    def score(chunk: pd.DataFrame) -> pd.DataFrame:
        prompts, choices = chunk["prompt"].tolist(), [list(c) for c in chunk["choices"]]
        out = pd.DataFrame({"row_id": chunk["row_id"].to_numpy()})
        loglik: list[list[float] | None] = [None] * len(chunk)
        if state["loglik"]:
            try:
                scores = engine.continuation_scores(likelihood_requests(prompts, choices))
                loglik = [s.softmax(normalize=normalize).tolist() for s in scores]
            except Unsupported as err:
                log.warning("no log-likelihood confidences: %s", err)
                state["loglik"] = False
        out["loglik"] = loglik
        if instruct:
            replies = engine.generate(
                verbal_requests(prompts, choices, chat=engine.chat_prompt, max_new_tokens=max_new_tokens)
            )
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

    return score


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

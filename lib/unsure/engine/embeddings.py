"""Sentence embeddings through ``sentence-transformers``.

A hub id (``sentence-transformers/nq-distilbert-base-v1``) or a local path;
a plain ``transformers`` encoder without a sentence-transformers config (the
zoo's BERT) gets mean pooling, as ``SentenceTransformer`` does by default.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

log = logging.getLogger(__name__)


def embed(
    model_id: str,
    texts: Sequence[str],
    *,
    batch_size: int = 64,
    device: str | None = None,
    normalize: bool = False,
    revision: str | None = None,
    trust_remote_code: bool = False,
) -> npt.NDArray[np.float32]:
    """Embed ``texts`` (one row per text, float32, in input order).

    ``normalize`` returns unit vectors, so dot products are cosine similarities.
    """
    from sentence_transformers import SentenceTransformer  # heavy import, only where used

    model = SentenceTransformer(model_id, device=device, revision=revision, trust_remote_code=trust_remote_code)
    if not texts:
        dimension = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return np.zeros((0, dimension() or 0), dtype=np.float32)
    vectors = model.encode(
        list(texts),
        batch_size=batch_size,
        convert_to_numpy=True,
        normalize_embeddings=normalize,
        show_progress_bar=False,
    )
    out: npt.NDArray[np.float32] = np.asarray(vectors, dtype=np.float32)
    log.info("embedded %d texts with %s into %d dimensions", len(texts), model_id, out.shape[1])
    return out


def cosine(a: npt.NDArray[np.float32], b: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
    """Row-wise cosine similarity of two equally shaped embedding matrices."""
    num = np.einsum("ij,ij->i", a.astype(np.float64), b.astype(np.float64))
    den = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    out: npt.NDArray[np.float64] = np.divide(num, den, out=np.zeros_like(num), where=den > 0)
    return out

"""Sentence embeddings through sentence-transformers, on the zoo's BERT loaded by path."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from unsure.config import ZooModel
from unsure.engine.embeddings import cosine, embed
from unsure.zoo.build import build, training_texts

TEXTS = ["The cat sat on the mat.", "A dog ran.", "The cat sat on the mat.", "Rain is likely tomorrow in the north."]


@pytest.fixture(scope="module")
def bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bert") / "bert"
    spec = ZooModel(architecture="bert", vocab_size=800, hidden_size=32, layers=1, heads=2)
    build("bert", spec, training_texts(seed=0, n_sentences=2000), out, zoo_seed=0)
    return out


def test_embeddings_are_per_text_and_do_not_depend_on_the_batch(bert: Path) -> None:
    together = embed(str(bert), TEXTS, batch_size=4)
    alone = np.vstack([embed(str(bert), [t]) for t in TEXTS])
    assert together.shape == (4, 32) and together.dtype == np.float32
    np.testing.assert_allclose(together, alone, atol=1e-5)
    np.testing.assert_allclose(cosine(together[[0]], together[[2]]), [1.0], atol=1e-6)
    assert cosine(together[[0]], together[[1]])[0] < 1 - 1e-4


def test_normalised_embeddings_have_unit_length(bert: Path) -> None:
    unit = embed(str(bert), TEXTS, normalize=True)
    np.testing.assert_allclose(np.linalg.norm(unit, axis=1), 1.0, atol=1e-5)
    assert embed(str(bert), []).shape == (0, 32)


def test_cosine_of_a_zero_vector_is_zero() -> None:
    a = np.array([[0.0, 0.0], [1.0, 0.0]], dtype=np.float32)
    b = np.array([[1.0, 0.0], [-1.0, 0.0]], dtype=np.float32)
    np.testing.assert_allclose(cosine(a, b), [0.0, -1.0])

"""The identity of a model's weights: local folders by content, hub ids by resolved commit."""

from __future__ import annotations

from pathlib import Path

import pytest

from unsure.config import Model
from unsure.engine import identity
from unsure.engine.identity import folder_digest, hub_commit, model_identity


def test_a_local_folder_is_identified_by_its_files(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "model.safetensors").write_bytes(b"weights-1")
    (tmp_path / "m" / "tokenizer.json").write_text("{}")
    entry = Model(id=str(tmp_path / "m"), gpus=0)
    first = model_identity(entry)
    assert first == model_identity(entry), "the same files give the same identity"
    (tmp_path / "m" / "model.safetensors").write_bytes(b"weights-2")
    assert model_identity(entry) != first, "other weights at the same path"


def test_large_files_are_hashed_by_their_edges(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(identity, "FULL_HASH_BYTES", 10)
    monkeypatch.setattr(identity, "EDGE_BYTES", 4)
    (tmp_path / "w.bin").write_bytes(b"0123456789abcdef")
    before = folder_digest(tmp_path)
    (tmp_path / "w.bin").write_bytes(b"0123456789abcdeX")
    assert folder_digest(tmp_path) != before


def test_a_hub_id_is_identified_by_the_commit_its_revision_resolves_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hub cache layout: refs/<revision> holds the commit, snapshots/<commit> the files."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path))
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "models--org--name"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    (repo / "snapshots" / commit).mkdir(parents=True)
    (repo / "snapshots" / commit / "config.json").write_text("{}")
    assert hub_commit("org/name", "main") == commit
    assert hub_commit("org/other", "main") == "unresolved"
    assert hub_commit("org/other", commit) == commit, "a pinned commit is its own identity"
    assert model_identity(Model(id="org/name")) == {"id": "org/name", "revision": "main", "commit": commit}


def test_an_api_model_is_its_name_and_endpoint() -> None:
    entry = Model(id="gpt-4o-mini", backend="openai", gpus=0, base_url="http://localhost:8000/v1")
    assert model_identity(entry) == {"id": "gpt-4o-mini", "endpoint": "http://localhost:8000/v1"}

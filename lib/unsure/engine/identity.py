"""What identifies the weights a ``models:`` entry loads, beyond its config text.

The same entry can name different weights over time: a local folder rebuilt in
place (the zoo with another seed, a fine-tune written again), or a hub branch
that moved. Checkpointed chunks and provenance files carry this identity, so
that a resumed shard never mixes two models' scores and every result says which
weights produced it.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from unsure.config import Model

FULL_HASH_BYTES = 1 << 30
"""Files up to this size are hashed whole; larger ones (multi-GB shards of a local
checkpoint) by size, modification time and their first and last ``EDGE_BYTES``."""

EDGE_BYTES = 16 << 20

_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def local_device() -> str:
    """The torch device type this process runs local models on: a GPU when there is one."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def run_device(entry: Model) -> str:
    """Where ``entry`` computes in this process ('api' for a web API): a GPU's bfloat16 and a
    CPU's float32 give other digits, so results of one are never served as the other's."""
    return "api" if entry.backend == "openai" else local_device()


def require_local_folder(model_id: str) -> None:
    """A model id written as a path (``/``, ``.``, ``~`` in front, or more than one ``/``) must be
    an existing folder: otherwise ``transformers`` reports it as a malformed hub repo id."""
    looks_local = model_id.startswith(("/", ".", "~")) or model_id.count("/") > 1
    if looks_local and not Path(model_id).expanduser().is_dir():
        raise FileNotFoundError(
            f"model {model_id!r}: no such local folder (a local model is a folder with config.json and "
            "the weights; a hub id has the form 'org/name')"
        )


def model_identity(entry: Model) -> dict[str, str]:
    """The identity of ``entry``'s weights: for a local folder, a hash of its files;
    for a hub id, the commit its revision resolves to in the local cache (call it
    after loading, so that the snapshot is there); for an API model, model name
    and endpoint (what the provider serves under a name is not ours to see)."""
    if entry.backend == "openai":
        return {"id": entry.id, "endpoint": entry.base_url or "api.openai.com"}
    path = Path(entry.id)
    if path.is_dir():
        return {"id": entry.id, "files_sha256": folder_digest(path)}
    return {"id": entry.id, "revision": entry.revision, "commit": hub_commit(entry.id, entry.revision)}


def folder_digest(folder: Path) -> str:
    """SHA-256 over every file's relative path and content digest (see :data:`FULL_HASH_BYTES`)."""
    total = hashlib.sha256()
    for file in sorted(p for p in folder.rglob("*") if p.is_file()):
        total.update(f"{file.relative_to(folder).as_posix()}\0{file_digest(file)}\n".encode())
    return total.hexdigest()


def file_digest(file: Path) -> str:
    """SHA-256 of a file's content, or of its size, mtime and edges when it is very large."""
    size = file.stat().st_size
    h = hashlib.sha256()
    with open(file, "rb") as f:
        if size <= FULL_HASH_BYTES:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
            return h.hexdigest()
        h.update(f"{size}:{file.stat().st_mtime_ns}".encode())
        h.update(f.read(EDGE_BYTES))
        f.seek(size - EDGE_BYTES)
        h.update(f.read(EDGE_BYTES))
    return "edges:" + h.hexdigest()


def hub_commit(repo_id: str, revision: str) -> str:
    """The commit ``revision`` of ``repo_id`` resolves to in the local hub cache,
    or ``"unresolved"`` when it is not cached (the weights were never loaded here)."""
    if _COMMIT.match(revision):
        return revision
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        snapshot = snapshot_download(repo_id, revision=revision, local_files_only=True)
    except (LocalEntryNotFoundError, OSError, ValueError):
        return "unresolved"
    name = Path(snapshot).name
    return name if _COMMIT.match(name) else "unresolved"

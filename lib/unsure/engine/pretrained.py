"""Loading a model's files with ``from_pretrained``, and what went wrong said in a user's terms.

``transformers`` reports a broken model folder from deep inside itself (an
``OSError`` about JSON, a ``SafetensorError`` that names no file, a
``ValueError`` about an architecture), and a hub id it cannot reach after
about a minute of retries. Every loader of the project goes through
:func:`hub_source` (before loading: fail at once, or read the hub's cache, when
the hub cannot be reached) and :func:`explained_loading` (around each
``from_pretrained``: a failure becomes a :class:`ModelLoadError` naming the
model, the file and what to do).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 5.0
"""Seconds the hub has to answer one request before it counts as unreachable."""

WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
"""The weight files (or shard indexes) ``from_pretrained`` looks for in a model folder."""

TOKENIZER_FILES = frozenset(
    {
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "tokenizer.model",
        "vocab.json",
        "merges.txt",
        "added_tokens.json",
        "generation_config.json",
    }
)
"""What a model folder holds besides the weights and ``config.json``."""


class ModelLoadError(RuntimeError):
    """A model's files cannot be loaded; the message names the model, the file and what to do."""


def _is_local(model_id: str) -> bool:
    return Path(model_id).expanduser().is_dir()


def _offline() -> bool:
    """Offline mode as the environment says now (``huggingface_hub`` reads it once, at import)."""
    from huggingface_hub import constants

    flags = (os.environ.get("HF_HUB_OFFLINE"), os.environ.get("TRANSFORMERS_OFFLINE"))
    return constants.is_offline_mode() or any(f and f.upper() in {"1", "ON", "YES", "TRUE"} for f in flags)


def _cached(model_id: str, revision: str | None) -> bool:
    """Whether the hub cache holds ``model_id``'s ``config.json`` at ``revision``."""
    from huggingface_hub import try_to_load_from_cache

    try:
        return isinstance(try_to_load_from_cache(model_id, "config.json", revision=revision or "main"), str)
    except ValueError:  # not a valid repo id: transformers says so
        return False


def hub_unreachable(timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """Why the hub's endpoint cannot be reached, or ``None`` when it answers (any HTTP status).

    One request with a short timeout, in a thread bounded by it too (a name lookup
    ignores socket timeouts), instead of ``huggingface_hub``'s retries of every file.
    """
    import requests
    from huggingface_hub import constants

    from unsure.download import _connection_reason as connection_reason

    endpoint = constants.ENDPOINT
    answer: list[str | None] = []

    def probe() -> None:
        try:
            requests.head(endpoint, timeout=timeout, allow_redirects=False)
            answer.append(None)
        except requests.ConnectionError as err:
            answer.append(connection_reason(err, timeout))
        except requests.RequestException as err:
            answer.append(f"{type(err).__name__}: {str(err).splitlines()[0][:200]}")

    thread = threading.Thread(target=probe, name="hub-probe", daemon=True)
    thread.start()
    thread.join(timeout + 1.0)
    return answer[0] if answer else f"no answer within {timeout:g} s"


def hub_source(model_id: str, revision: str | None) -> dict[str, Any]:
    """Extra ``from_pretrained`` arguments for ``model_id``: none for a local folder or a reachable hub,
    ``local_files_only`` when the hub is offline or unreachable and its cache holds the model.

    Raises:
        ModelLoadError: the hub is offline or unreachable and the model is not in its cache.
    """
    if _is_local(model_id):
        return {}
    from huggingface_hub import constants

    endpoint = constants.ENDPOINT
    at = "" if revision in (None, "main") else f" at revision {revision!r}"
    cached = _cached(model_id, revision)
    remedy = (
        f"download it where the hub is reachable (hf download {model_id}) and set HF_HUB_OFFLINE=1, "
        "or set the id of its models: entry to a local folder holding the model"
    )
    if _offline():
        if cached:
            return {"local_files_only": True}
        raise ModelLoadError(
            f"model {model_id!r}{at}: HF_HUB_OFFLINE is set and the hub cache ({constants.HF_HUB_CACHE}) "
            f"does not hold it; {remedy}"
        )
    reason = hub_unreachable()
    if reason is None:
        return {}
    if cached:
        log.warning("model %r: the hub (%s) is unreachable (%s): loading its cached copy", model_id, endpoint, reason)
        return {"local_files_only": True}
    raise ModelLoadError(
        f"model {model_id!r}{at}: the Hugging Face hub ({endpoint}) is unreachable ({reason}) and "
        f"the hub cache ({constants.HF_HUB_CACHE}) does not hold it; {remedy}"
    )


def _folder(model_id: str, revision: str | None) -> tuple[Path, str] | None:
    """The folder ``model_id``'s files are read from and what to do with a broken one,
    or ``None`` for a hub id not in the cache."""
    if _is_local(model_id):
        return Path(model_id).expanduser(), "fix or replace the file (save_pretrained writes a model folder)"
    from huggingface_hub import snapshot_download

    try:
        snapshot = Path(snapshot_download(model_id, revision=revision or "main", local_files_only=True))
    except Exception:  # anything (not cached, a malformed id): nothing more to say
        return None
    return snapshot, f"delete the hub cache's copy of {model_id} (hf cache delete) and load it again"


def _config_problem(folder: Path, trust_remote_code: bool) -> str | None:
    """What is wrong with ``folder/config.json``, if anything."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    path = folder / "config.json"
    if not path.is_file():
        return f"{folder} has no config.json (a model folder holds config.json and the weights)"
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as err:
        return f"{path} is not UTF-8 text ({err.reason} at byte {err.start})"
    except json.JSONDecodeError as err:
        return f"{path} is not valid JSON ({err.msg}: line {err.lineno}, column {err.colno})"
    if not isinstance(raw, dict):
        return f"{path} holds a JSON {type(raw).__name__}, not an object"
    kind = raw.get("model_type")
    if kind is not None and kind not in CONFIG_MAPPING and not (trust_remote_code and "auto_map" in raw):
        import transformers

        return (
            f"{path} has model_type {kind!r}, which transformers {transformers.__version__} does not know: "
            "fix model_type, upgrade transformers, or set trust_remote_code: true in the models: entry "
            "of a model that ships its own code"
        )
    return None


def _weights_problem(folder: Path) -> str | None:
    """What is wrong with the weight files in ``folder``, if anything."""
    from safetensors import safe_open

    present = [name for name in WEIGHT_FILES if (folder / name).is_file()]
    if not present:
        return f"{folder} holds no weights ({' or '.join(WEIGHT_FILES[::2])})"
    for index in (folder / n for n in present if n.endswith(".index.json")):
        try:
            shards = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            return f"{index} is not a weight index ({type(err).__name__}: {err})"
        missing = [s for s in shards if not (folder / s).is_file()]
        if missing:
            return f"{index} lists weight file(s) missing from {folder}: {', '.join(missing)}"
    for file in sorted(folder.glob("model*.safetensors")):
        try:
            with safe_open(str(file), framework="pt"):
                pass
        except Exception as err:  # SafetensorError, OSError: the file is what is wrong
            size = file.stat().st_size
            return f"{file} is not a readable safetensors file ({err}; {size} bytes): truncated or corrupt"
    for file in sorted(folder.glob("pytorch_model*.bin")):
        if not zipfile.is_zipfile(file):
            return f"{file} is not a readable PyTorch weight file (no zip archive): truncated or corrupt"
    return None


@contextlib.contextmanager
def explained_loading(model_id: str, revision: str | None = None, *, trust_remote_code: bool = False) -> Iterator[None]:
    """Run a ``from_pretrained`` of ``model_id``; its failure on the model's files is a :class:`ModelLoadError`.

    The folder (a local one, or the hub cache's snapshot) is examined only after a
    failure: an error that no file explains (a GPU out of memory) is left as it is.
    """
    try:
        yield
    except ModelLoadError:
        raise
    except Exception as err:
        found = _folder(model_id, revision)
        if found is None:
            if isinstance(err, OSError | ValueError):
                first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
                raise ModelLoadError(f"model {model_id!r}: transformers cannot load it: {first}") from err
            raise
        folder, remedy = found
        problem = _config_problem(folder, trust_remote_code) or _weights_problem(folder)
        if problem is not None:
            raise ModelLoadError(f"model {model_id!r}: {problem}; {remedy}") from None
        if isinstance(err, OSError | ValueError):
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise ModelLoadError(f"model {model_id!r} ({folder}): transformers cannot load it: {first}") from err
        raise

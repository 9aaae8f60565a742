"""Sharded, resumable scoring of a table of rows.

Shard ``k`` of ``K`` holds the rows whose stable id hashes to ``k`` modulo
``K``: a pure function of the id, so a row's shard does not depend on the
other rows. Within a shard the rows are sorted by id and scored in fixed-size
chunks; every finished chunk is written (atomically) beside the output, so a
job killed at any point loses at most the chunk it was working on. When all
chunks are done they are merged into the output, atomically, and removed.

The request cache (:class:`RequestCache`, config key ``request_cache``) outlives
the merge: every scored row is kept under the identity of what scored it (the
fingerprint, the weights, the scorer's code, the files it reads) and of the row
itself, so a job run again (a grown ``n_eval``, another shard count, a job that
Ctrl-C left marked incomplete) scores only the rows never scored before.
"""

from __future__ import annotations

import ast
import contextlib
import fcntl
import hashlib
import importlib
import importlib.util
import io
import json
import logging
import os
import shutil
import socket
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm import tqdm

from unsure.config import Config, Model
from unsure.engine.identity import file_digest, model_identity, run_device
from unsure.io import WriteError, explained_writes, write_json, write_parquet

log = logging.getLogger(__name__)

ID = "row_id"
REQUEST = "_request"
"""Column of a cache file: the digest of the input row a result row answers."""


def shard_of(row_ids: pd.Series, n_shards: int) -> np.ndarray:
    """The shard of each row id: a stable hash of the id, modulo ``n_shards``."""
    if n_shards < 1:
        raise ValueError(f"the number of shards must be at least 1, got {n_shards}")
    digests = [hashlib.sha256(str(r).encode()).digest()[:8] for r in row_ids]
    return np.array([int.from_bytes(d, "little") % n_shards for d in digests], dtype=np.int64)


def select_shard(rows: pd.DataFrame, shard: int, n_shards: int) -> pd.DataFrame:
    """The rows of shard ``shard`` (0-based) of ``n_shards``, sorted by id."""
    if ID not in rows.columns:
        raise ValueError(f"the rows to score have no {ID!r} column (columns: {', '.join(rows.columns)})")
    if rows[ID].duplicated().any():
        dup = rows.loc[rows[ID].duplicated(), ID].iloc[0]
        raise ValueError(f"row ids must be unique; {dup!r} appears more than once")
    if n_shards < 1 or not 0 <= shard < n_shards:
        raise ValueError(f"shard {shard} of {n_shards}: need n_shards at least 1 and shard in 0..n_shards-1")
    mine = rows[shard_of(rows[ID], n_shards) == shard]
    return mine.sort_values(ID, kind="stable").reset_index(drop=True)


class _LogWriter(io.TextIOBase):
    """A file-like object that sends tqdm's lines to the job's log."""

    def write(self, text: str) -> int:
        line = text.strip("\r\n ")
        if line:
            log.info(line)
        return len(text)


def run_shard(
    rows: pd.DataFrame,
    score: Callable[[pd.DataFrame], pd.DataFrame],
    out: str | Path,
    *,
    shard: int,
    n_shards: int,
    chunk_rows: int,
    fingerprint: dict[str, Any],
    model: Model | None = None,
    tokens: Callable[[], int] | None = None,
    cache: str | Path | None = None,
    reads: Iterable[str | Path] = (),
    requests: Callable[[pd.DataFrame], Sequence[Any]] | None = None,
) -> pd.DataFrame:
    """Score shard ``shard`` of ``rows`` with ``score`` into the parquet file ``out``.

    ``score`` maps a chunk of rows to a frame with one result row per input
    row, carrying the ``row_id`` column. ``fingerprint`` describes everything
    the scores depend on besides the model (prompts, settings): chunks written
    under another fingerprint are discarded rather than reused. ``model`` is the
    entry whose weights score the rows (``None``: no model): its settings that
    change numbers (:meth:`~unsure.config.Model.numbers_settings`; not ``gpus``),
    the device it runs on here and the identity of its weights
    (:func:`~unsure.engine.identity.model_identity`) join the fingerprint, so
    that weights rebuilt at the same path or a moved hub branch never share a
    shard with the old ones, and another GPU count shares all of it.
    ``tokens`` reports the engine's token count, for the summary line.

    ``cache`` is the request cache's folder (``None``: no cache; scripts pass
    :func:`request_cache` of the config). Rows found there under the same
    fingerprint, weights and scorer code, with the same input values, are not
    scored again. Pass it only where a row's result depends on that row alone,
    given the fingerprint; ``reads`` names the other files the scorer reads
    (their contents join the cache key).

    ``requests`` maps rows to what each one sends the engine (its study room's
    request function: one object per row, e.g. a tuple of requests). Given it, a row
    is keyed on its id and its requests instead of its input values, and the
    checkpointed chunks on every row's requests: a changed prompt misses the cache
    and discards the chunks even where ``fingerprint`` does not say it changed, and
    ``fingerprint`` need only hold what turns the engine's answers into the scores.

    While it runs, the shard is locked (``chunks/lock``): a second process on
    the same shard (the job of a killed controller still running when the
    command is rerun) fails at once, naming the holder, instead of scoring it
    twice and racing it for the same chunk files.
    """
    out = Path(out)
    mine = select_shard(rows, shard, n_shards)
    chunk_dir = out.with_name(out.name + ".chunks")
    if model is not None:
        settings = {"model": model.numbers_settings(), "device": run_device(model)}
        fingerprint = {**fingerprint, **settings, "weights": model_identity(model)}
    store = None if cache is None else RequestCache(cache, fingerprint, score, reads)
    if requests is not None:  # rows keyed on what they send the engine, and so are the chunks
        keys = sent_digests(mine, requests)
        checkpoint = {**fingerprint, "requests": _digest_of(keys)}
    else:
        keys = request_digests(mine) if store is not None else pd.Series("", index=mine.index, dtype=object)
        checkpoint = fingerprint
    try:
        with _shard_lock(chunk_dir):
            _reset_if_stale(chunk_dir, checkpoint)
            result = _score_chunks(mine, score, out, chunk_dir, shard, n_shards, chunk_rows, tokens, store, keys)
    except WriteError as err:  # a full or read-only disk: say that the finished chunks wait for the rerun
        kept = len(list(chunk_dir.glob("chunk-*.parquet"))) if chunk_dir.is_dir() else 0
        error = WriteError(f"{err}; {kept} finished chunk(s) of this shard kept in {chunk_dir}: a rerun resumes there")
        error.errno = err.errno
        raise error from None
    shutil.rmtree(chunk_dir, ignore_errors=True)
    return result


def _score_chunks(
    mine: pd.DataFrame,
    score: Callable[[pd.DataFrame], pd.DataFrame],
    out: Path,
    chunk_dir: Path,
    shard: int,
    n_shards: int,
    chunk_rows: int,
    tokens: Callable[[], int] | None,
    store: RequestCache | None,
    requests: pd.Series,
) -> pd.DataFrame:
    """``requests``: each row's cache key (:func:`sent_digests` or :func:`request_digests`)."""
    start, tokens0 = time.perf_counter(), tokens() if tokens else 0
    hits = store.lookup(requests).set_index(REQUEST) if store is not None else pd.DataFrame(index=pd.Index([]))
    n_chunks = max(1, -(-len(mine) // chunk_rows))
    resumed = from_cache = 0
    bar = tqdm(total=len(mine), unit="rows", file=_LogWriter(), mininterval=10, desc=f"shard {shard + 1}/{n_shards}")
    parts = []
    for i in range(n_chunks):
        chunk = mine.iloc[i * chunk_rows : (i + 1) * chunk_rows]
        path = chunk_dir / f"chunk-{i:06d}.parquet"
        asked = requests[chunk.index]
        known = asked.isin(hits.index).to_numpy()
        done = _read_chunk(path, chunk[ID])
        if done is not None:
            resumed += 1
        elif len(chunk) and known.all():
            done = hits.loc[asked].reset_index(drop=True)
            from_cache += len(chunk)
        else:
            todo = chunk[~known]
            done = score(todo)
            _check_result(done, todo, path)
            if store is not None and len(todo):
                store.add(asked[~known], done)
            if known.any():  # with the chunk's cached rows, in the chunk's order
                done = pd.concat([hits.loc[asked[known]].reset_index(drop=True), done], ignore_index=True)
                done = done.iloc[pd.Index(done[ID]).get_indexer(chunk[ID])].reset_index(drop=True)
                from_cache += int(known.sum())
            write_parquet(path, done)
        parts.append(done)
        bar.update(len(chunk))
    bar.close()
    if store is not None:
        store.compact()
        log.info("request cache %s: %d of %d rows from the cache (%s)", store.folder, from_cache, len(mine), out)
    result = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame({ID: []})
    write_parquet(out, result)
    seconds = time.perf_counter() - start
    n_tokens = (tokens() if tokens else 0) - tokens0
    log.info(
        "done: %s: %d rows (%d of %d chunks resumed), %d tokens, %.1f s, %.0f tokens/s",
        out,
        len(mine),
        resumed,
        n_chunks,
        n_tokens,
        seconds,
        n_tokens / seconds if seconds else 0.0,
    )
    return result


@contextlib.contextmanager
def _shard_lock(chunk_dir: Path) -> Iterator[None]:
    """An exclusive lock on the shard's chunk folder for as long as this process scores it."""
    with explained_writes(chunk_dir / "lock"):  # the first file a shard writes: a read-only results/ fails here
        chunk_dir.mkdir(parents=True, exist_ok=True)
        f = open(chunk_dir / "lock", "a+", encoding="utf-8")  # noqa: SIM115 (closed by the with below)
    with f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "another process"
            raise RuntimeError(
                f"{chunk_dir.parent / chunk_dir.name.removesuffix('.chunks')}: this shard is being scored by "
                f"{holder}; wait for it to end (a job of an earlier, killed run?) or stop it, then rerun"
            ) from None
        f.truncate(0)
        f.write(f"process {os.getpid()} on {socket.gethostname()} since {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
        f.flush()
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _reset_if_stale(chunk_dir: Path, fingerprint: dict[str, Any]) -> None:
    """Discard the chunks of another fingerprint, saying what changed (rebuilt weights, another prompting...)."""
    meta = chunk_dir / "fingerprint.json"
    want = json.loads(json.dumps(fingerprint, sort_keys=True, default=str))
    if meta.exists() and (had := json.loads(meta.read_text())) != want:
        log.warning(
            "discarding checkpointed chunks in %s: changed since they were made: %s",
            chunk_dir,
            fingerprint_change(had, want),
        )
        for path in [*chunk_dir.glob("chunk-*.parquet"), meta]:  # not the lock we hold
            path.unlink(missing_ok=True)
    if not meta.exists():
        write_json(meta, want)


_ABSENT = object()
"""A key one fingerprint has and the other lacks."""


def fingerprint_change(old: Any, new: Any, *, shown: int = 4) -> str:
    """The top-level keys whose values differ between two fingerprints, each with the part that
    changed: ``weights (files_sha256: "3f2a…" -> "9c1b…"), prompting ("numeric" -> "multiple_choice")``."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return f"fingerprint ({_short(old)} -> {_short(new)})"
    keys = [k for k in sorted({*old, *new}) if old.get(k, _ABSENT) != new.get(k, _ABSENT)]
    parts = [f"{k} ({_value_change(old.get(k, _ABSENT), new.get(k, _ABSENT))})" for k in keys[:shown]]
    more = f" and {len(keys) - shown} more" if len(keys) > shown else ""
    return ", ".join(parts) + more


def _value_change(old: Any, new: Any, shown: int = 2) -> str:
    """``"a" -> "b"``; for two dicts (a model entry, a weights identity), only the entries that differ."""
    if isinstance(old, dict) and isinstance(new, dict):
        keys = [k for k in sorted({*old, *new}) if old.get(k, _ABSENT) != new.get(k, _ABSENT)]
        parts = [f"{k}: {_short(old.get(k, _ABSENT))} -> {_short(new.get(k, _ABSENT))}" for k in keys[:shown]]
        return "; ".join(parts) + (f"; and {len(keys) - shown} more" if len(keys) > shown else "")
    return f"{_short(old)} -> {_short(new)}"


def _short(value: Any, width: int = 20) -> str:
    """A value as JSON, a text cut to ``width`` characters (digests are told apart by their start)."""
    if value is _ABSENT:
        return "none"
    if isinstance(value, str):
        return json.dumps(value if len(value) <= width else value[: width - 1] + "…", ensure_ascii=False)
    text = json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 1] + "…"


def _read_chunk(path: Path, ids: pd.Series) -> pd.DataFrame | None:
    """A finished chunk, if it exists and holds exactly these rows."""
    if not path.exists():
        return None
    try:
        done = pd.read_parquet(path)
    except (OSError, ValueError):
        return None
    if ID not in done.columns or list(done[ID]) != list(ids):
        return None
    return done


def _check_result(done: pd.DataFrame, chunk: pd.DataFrame, path: Path) -> None:
    if ID not in done.columns or list(done[ID]) != list(chunk[ID]):
        raise ValueError(f"the scorer must return one row per input row, in order, with {ID!r} ({path})")


def request_cache(config: Mapping[str, Any]) -> Path | None:
    """The request cache's folder of a raw config mapping (a script's ``snakemake.config``), or ``None`` when off."""
    folder = config.get("request_cache", Config.model_fields["request_cache"].default)
    return None if folder is None else Path(folder)


def request_digests(rows: pd.DataFrame) -> pd.Series:
    """Per row, a SHA-256 of its id and every input value (columns in name order): a cached
    result answers a row only if the row is the same, not only its id."""
    columns = sorted(rows.columns)
    values = rows[columns].to_numpy(dtype=object)
    digests = [
        hashlib.sha256(json.dumps(list(v), default=_jsonable, ensure_ascii=False).encode()).hexdigest() for v in values
    ]
    return pd.Series(digests, index=rows.index, dtype=object)


def sent_digests(rows: pd.DataFrame, requests: Callable[[pd.DataFrame], Sequence[Any]]) -> pd.Series:
    """Per row, a SHA-256 of its id and of what it sends the engine (``requests(rows)``, one object
    per row, by its ``repr``: a frozen request's fields, in order)."""
    sent = requests(rows)
    if len(sent) != len(rows):
        raise ValueError(f"the request function gave {len(sent)} entries for {len(rows)} rows")
    digests = [
        hashlib.sha256(json.dumps([str(i), repr(r)], ensure_ascii=False).encode()).hexdigest()
        for i, r in zip(rows[ID], sent, strict=True)
    ]
    return pd.Series(digests, index=rows.index, dtype=object)


def _digest_of(digests: pd.Series) -> str:
    """One SHA-256 over a shard's row digests (in order): any row's change changes it."""
    return hashlib.sha256("\n".join(digests.tolist()).encode()).hexdigest()


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return repr(value)


def code_digest(score: Callable[..., Any]) -> str:
    """SHA-256 of the source a scorer's results depend on: the engine, and the modules of the
    ``unsure`` room that defines the scorer which its module imports, directly or through each
    other (its prompts, its parsing). Any edit there starts a new cache, never a stale hit; an edit
    to the room's tables or figures, which no scorer imports, keeps it. A scorer defined outside
    the library contributes its module's file."""
    module = getattr(score, "__module__", None) or type(score).__module__
    files = _package_files("unsure.engine")
    if module.startswith("unsure."):
        room = ".".join(module.split(".")[:2])
        files += [_module_file(name) for name in sorted(_imported_within(module, room))]
    else:
        files.append(_module_file(module))
    total = hashlib.sha256()
    for file in files:
        total.update(f"{file.name}\0{file_digest(file)}\n".encode())
    return total.hexdigest()


def _module_file(name: str) -> Path:
    mod = sys.modules.get(name) or importlib.import_module(name)
    return Path(str(mod.__file__))


def _package_files(name: str) -> list[Path]:
    mod = sys.modules.get(name) or importlib.import_module(name)
    return sorted(p for folder in getattr(mod, "__path__", []) for p in Path(folder).rglob("*.py"))


def _imported_within(module: str, room: str) -> set[str]:
    """``module``, the room's package, and every module of ``room`` they import, transitively
    (every import statement, those inside functions too)."""
    seen: set[str] = set()
    todo = [module, room]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        spec = importlib.util.find_spec(name) if _is_module(name) else None
        if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
            continue
        package = name if spec.submodule_search_locations is not None else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(Path(spec.origin).read_text(encoding="utf-8"))):
            found: list[str] = []
            if isinstance(node, ast.Import):
                found = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    base = f"{parent}.{base}" if base else parent
                found = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            for candidate in found:
                if (candidate == room or candidate.startswith(room + ".")) and _is_module(candidate):
                    todo.append(candidate)
    return seen


def _is_module(name: str) -> bool:
    """Whether ``name`` names a module (not a function or class imported from one)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # its parent is a module, not a package
        return False


class RequestCache:
    """Finished rows of one request fingerprint, kept across runs in ``<root>/<key>/``.

    The key is a SHA-256 of the fingerprint (with the weights' identity), the
    scorer's code (:func:`code_digest`) and the files the scorer reads; each
    stored row carries the digest of its input row (:func:`request_digests`).
    Writers never share a file: each run appends one file per scored chunk
    (atomically, under a name of its own) and merges its own files into one at
    the end, so concurrent shards need no lock; readers skip files that vanish
    under them and drop duplicates.
    """

    def __init__(
        self,
        root: str | Path,
        fingerprint: dict[str, Any],
        score: Callable[..., Any],
        reads: Iterable[str | Path] = (),
    ) -> None:
        key = {
            "fingerprint": fingerprint,
            "code": code_digest(score),
            "reads": {str(p): file_digest(Path(p)) for p in reads},
        }
        self.key = json.loads(json.dumps(key, sort_keys=True, default=str))
        digest = hashlib.sha256(json.dumps(self.key, sort_keys=True).encode()).hexdigest()
        self.folder = Path(root) / digest[:32]
        self.run = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.pieces: list[Path] = []

    def lookup(self, requests: pd.Series) -> pd.DataFrame:
        """The stored result rows answering ``requests`` (with a ``_request`` column), or an empty frame."""
        frames = []
        for path in sorted(self.folder.glob("*.parquet")) if self.folder.is_dir() else []:
            if path.name.startswith("."):  # a file being written
                continue
            try:
                frames.append(pd.read_parquet(path))
            except (OSError, ValueError):  # merged away meanwhile, or unreadable: score those rows again
                continue
        frames = [f for f in frames if REQUEST in f.columns]
        if not frames or len({tuple(f.columns) for f in frames}) > 1:
            if frames:
                log.warning("request cache %s: files disagree on columns; ignoring it", self.folder)
            return pd.DataFrame({REQUEST: pd.Series(dtype=object)})
        stored = pd.concat(frames, ignore_index=True).drop_duplicates(REQUEST)
        return stored[stored[REQUEST].isin(requests)].reset_index(drop=True)

    def add(self, requests: pd.Series, done: pd.DataFrame) -> None:
        """Store one scored chunk (``done``, the rows of ``requests`` in order)."""
        if not (self.folder / "key.json").exists():
            write_json(self.folder / "key.json", self.key)
        piece = self.folder / f"{self.run}-{len(self.pieces):06d}.parquet"
        write_parquet(piece, done.assign(**{REQUEST: requests.to_numpy()}))
        self.pieces.append(piece)

    def compact(self) -> None:
        """Merge this run's chunk files into one (the merged file first, then the pieces go)."""
        if len(self.pieces) < 2:
            return
        frames = [pd.read_parquet(p) for p in self.pieces]
        write_parquet(self.folder / f"{self.run}.parquet", pd.concat(frames, ignore_index=True))
        for piece in self.pieces:
            piece.unlink(missing_ok=True)
        self.pieces = []

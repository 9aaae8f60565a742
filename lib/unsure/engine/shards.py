"""Sharded, resumable scoring of a table of rows.

Shard ``k`` of ``K`` holds the rows whose stable id hashes to ``k`` modulo
``K``: a pure function of the id, so a row's shard does not depend on the
other rows. Within a shard the rows are sorted by id and scored in fixed-size
chunks; every finished chunk is written (atomically) beside the output, so a
job killed at any point loses at most the chunk it was working on. When all
chunks are done they are merged into the output, atomically, and removed.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import json
import logging
import os
import shutil
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm import tqdm

from unsure.config import Model
from unsure.engine.identity import model_identity
from unsure.io import write_json, write_parquet

log = logging.getLogger(__name__)

ID = "row_id"


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
) -> pd.DataFrame:
    """Score shard ``shard`` of ``rows`` with ``score`` into the parquet file ``out``.

    ``score`` maps a chunk of rows to a frame with one result row per input
    row, carrying the ``row_id`` column. ``fingerprint`` describes everything
    the scores depend on (model, prompts, settings): chunks written under
    another fingerprint are discarded rather than reused. ``model`` is the
    entry whose weights score the rows (``None``: no model): the identity of
    those weights (:func:`~unsure.engine.identity.model_identity`) joins the
    fingerprint, so that weights rebuilt at the same path or a moved hub branch
    never share a shard with the old ones. ``tokens`` reports the engine's
    token count, for the summary line.

    While it runs, the shard is locked (``chunks/lock``): a second process on
    the same shard (the job of a killed controller still running when the
    command is rerun) fails at once, naming the holder, instead of scoring it
    twice and racing it for the same chunk files.
    """
    out = Path(out)
    mine = select_shard(rows, shard, n_shards)
    chunk_dir = out.with_name(out.name + ".chunks")
    if model is not None:
        fingerprint = {**fingerprint, "weights": model_identity(model)}
    with _shard_lock(chunk_dir):
        _reset_if_stale(chunk_dir, fingerprint)
        result = _score_chunks(mine, score, out, chunk_dir, shard, n_shards, chunk_rows, tokens)
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
) -> pd.DataFrame:
    n_chunks = max(1, -(-len(mine) // chunk_rows))
    start, tokens0 = time.perf_counter(), tokens() if tokens else 0
    resumed = 0
    bar = tqdm(total=len(mine), unit="rows", file=_LogWriter(), mininterval=10, desc=f"shard {shard + 1}/{n_shards}")
    parts = []
    for i in range(n_chunks):
        chunk = mine.iloc[i * chunk_rows : (i + 1) * chunk_rows]
        path = chunk_dir / f"chunk-{i:06d}.parquet"
        done = _read_chunk(path, chunk[ID])
        if done is None:
            done = score(chunk)
            _check_result(done, chunk, path)
            write_parquet(path, done)
        else:
            resumed += 1
        parts.append(done)
        bar.update(len(chunk))
    bar.close()
    result = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame({ID: []})
    write_parquet(out, result)
    seconds = time.perf_counter() - start
    n_tokens = (tokens() if tokens else 0) - tokens0
    log.info(
        "done: %d rows (%d of %d chunks resumed), %d tokens, %.1f s, %.0f tokens/s",
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
    chunk_dir.mkdir(parents=True, exist_ok=True)
    with open(chunk_dir / "lock", "a+", encoding="utf-8") as f:
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
    meta = chunk_dir / "fingerprint.json"
    want = json.loads(json.dumps(fingerprint, sort_keys=True, default=str))
    if meta.exists() and json.loads(meta.read_text()) != want:
        log.warning("discarding checkpointed chunks in %s: they were made with other settings", chunk_dir)
        for path in [*chunk_dir.glob("chunk-*.parquet"), meta]:  # not the lock we hold
            path.unlink(missing_ok=True)
    if not meta.exists():
        write_json(meta, want)


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

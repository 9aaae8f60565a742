"""Stale-lock recovery for a Snakemake controller that was killed.

Snakemake locks the working directory while a controller runs and removes the
lock when it stops, but a controller killed with SIGKILL (or by a dying login
node) leaves the lock behind, and the next run of the same command refuses to
start until someone runs ``--unlock``. The workflow records which process holds
the lock (host, PID, process start time) right after taking it; a later
controller on the same host removes the lock only when that process is
provably gone. A live controller, one on another host, or a lock written after
the record (a controller starting right now) is never touched.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import psutil

RECORD = "unsure-controller.json"


def _identity(pid: int) -> dict[str, object]:
    return {"host": socket.gethostname(), "pid": pid, "started": psutil.Process(pid).create_time()}


def record_controller(state_dir: str | os.PathLike[str], pid: int | None = None) -> Path:
    """Write who holds the lock in ``state_dir`` (Snakemake's ``.snakemake``)."""
    path = Path(state_dir) / RECORD
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(_identity(pid or os.getpid())))
    tmp.replace(path)
    return path


def forget_controller(state_dir: str | os.PathLike[str]) -> None:
    """Remove the record; the controller stopped and released its lock itself."""
    (Path(state_dir) / RECORD).unlink(missing_ok=True)


def _alive(holder: dict[str, object]) -> bool:
    pid = holder.get("pid")
    if not isinstance(pid, int):
        return True  # unreadable record: assume the holder may be alive
    try:
        started = float(str(holder.get("started")))
        return bool(abs(psutil.Process(pid).create_time() - started) < 1e-3)
    except psutil.NoSuchProcess:
        return False
    except (psutil.Error, ValueError):
        return True


def clear_stale_locks(state_dir: str | os.PathLike[str]) -> list[Path]:
    """Remove the locks a dead controller on this host left; returns the files removed.

    Only lock files no newer than the record are removed: they were taken by
    the recorded controller, not by one that started after it.
    """
    state = Path(state_dir)
    record = state / RECORD
    try:
        holder = json.loads(record.read_text())
        recorded_at = record.stat().st_mtime
    except (OSError, ValueError):
        return []
    if not isinstance(holder, dict) or holder.get("host") != socket.gethostname() or _alive(holder):
        return []
    removed = []
    for lock in sorted((state / "locks").glob("*.lock")):
        if lock.stat().st_mtime <= recorded_at:
            lock.unlink(missing_ok=True)
            removed.append(lock)
    record.unlink(missing_ok=True)
    return removed

"""Stale-lock recovery for Snakemake controllers that were killed.

Snakemake locks what a controller will read and write with files in
``.snakemake/locks`` (``N.input.lock``, ``N.output.lock``: one path a line) and
removes them when it stops, but a controller killed with SIGKILL (or by a dying
login node) leaves them behind, and the next run that needs those files refuses
to start until someone runs ``--unlock``. Several controllers may run in one
directory at once, on different targets, so each one records, right after
taking its locks, exactly which lock files are its own:
``.snakemake/unsure-controllers/<host>-<pid>-<start>.json`` names the process
(host, PID, start) and each of its lock files with the file's identity (inode,
modification time, size, SHA-256). A later controller on the same host removes
a lock file only when the record that names it belongs to a process that is
provably gone and the file is still the very file that process wrote. Locks of
a live controller, of one on another host, of one that has not written its
record yet, of a plain ``snakemake`` run outside this workflow, or rewritten
since, are never touched.

Which lock files are a controller's own comes from Snakemake itself
(:func:`own_lock_files`): its file persistence keeps the paths it wrote, to
delete them on unlock. Neither the files' contents (two controllers can lock the
same inputs) nor their times (two controllers can lock within the same second)
say that reliably.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

import psutil

RECORDS = "unsure-controllers"
_LOCK_NAME = re.compile(r"locks/[0-9]+\.(input|output)\.lock")


class Removed(NamedTuple):
    """A stale lock file removed, and the PID of the dead controller that held it."""

    lock: Path
    pid: int


def own_lock_files(persistence: object) -> list[Path]:
    """The lock files this process's Snakemake wrote, from its persistence (``workflow.persistence``).

    Snakemake's file persistence keeps, per lock type, the path of the file it
    created in ``lock()`` (``_lockfile``), and removes exactly those in
    ``unlock()``: the one exact account of which files are this controller's.
    Other backends (a database, ``--nolock``) have none: nothing to recover.
    """
    held = getattr(persistence, "_lockfile", None)
    if not isinstance(held, dict):
        return []
    return sorted(Path(p) for p in held.values())


def _process_start(pid: int) -> str | None:
    """When process ``pid`` started, in a form fixed for its whole life; ``None`` when it is gone.

    On Linux: the boot and the start in clock ticks since boot (``/proc/<pid>/stat``),
    which no clock adjustment moves (psutil's ``create_time`` adds the boot time,
    which NTP steps move, so two processes may read different times for one
    live process). A zombie (killed, not yet reaped) is gone. Elsewhere: psutil.
    """
    if Path("/proc/self/stat").exists():
        try:
            state, *fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except (FileNotFoundError, ProcessLookupError):
            return None
        if state in ("Z", "X"):
            return None
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        return f"{boot}:{fields[18]}"  # field 22 of stat(5); ``fields`` starts at field 4
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return f"{proc.create_time():.3f}"
    except psutil.NoSuchProcess:
        return None


def _identity(path: Path) -> dict[str, Any]:
    """What tells this very file from a later one at the same path."""
    st = path.stat()
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return {"inode": st.st_ino, "mtime_ns": st.st_mtime_ns, "size": st.st_size, "sha256": digest}


def record_controller(
    state_dir: str | os.PathLike[str], locks: Iterable[str | os.PathLike[str]], pid: int | None = None
) -> Path:
    """Record that process ``pid`` (this one) holds ``locks`` in ``state_dir`` (``.snakemake``);
    returns the record. Call it once the locks are taken (``onstart``).

    Only files in ``state_dir/locks`` named as Snakemake names its locks are recorded:
    recovery never removes anything else.
    """
    pid = os.getpid() if pid is None else pid
    state = Path(state_dir)
    start = _process_start(pid)
    if start is None:
        raise ValueError(f"process {pid} is not running")
    entries = []
    for lock in locks:
        try:
            name = Path(lock).resolve().relative_to(state.resolve()).as_posix()
        except ValueError:
            continue
        if _LOCK_NAME.fullmatch(name):
            entries.append({"name": name, **_identity(state / name)})
    host = socket.gethostname()
    started = psutil.Process(pid).create_time()
    record = {"host": host, "pid": pid, "start": start, "started": started, "locks": entries}
    path = state / RECORDS / f"{host.replace('/', '_')}-{pid}-{int(started)}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(record, indent=1))
    tmp.replace(path)
    return path


def forget_controller(record: str | os.PathLike[str]) -> None:
    """Remove a controller's record; it stopped and released its locks itself."""
    Path(record).unlink(missing_ok=True)


def _gone(holder: dict[str, Any]) -> bool:
    """Whether the recorded process has provably ended (on this host: callers check the host)."""
    pid, start = holder.get("pid"), holder.get("start")
    if not isinstance(pid, int) or not isinstance(start, str):
        return False  # unreadable record: the holder may be alive
    return _process_start(pid) != start  # gone, or the PID now names a later process


def _unchanged(lock: Path, entry: dict[str, Any]) -> bool:
    try:
        return bool(_identity(lock) == {k: entry.get(k) for k in ("inode", "mtime_ns", "size", "sha256")})
    except OSError:
        return False


def _read(record: Path) -> dict[str, Any] | None:
    try:
        holder = json.loads(record.read_text())
    except (OSError, ValueError):
        return None
    return holder if isinstance(holder, dict) else None


def _entries(holder: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The lock entries of a record; none from a malformed one."""
    locks = (holder or {}).get("locks")
    return [e for e in locks if isinstance(e, dict)] if isinstance(locks, list) else []


def clear_stale_locks(state_dir: str | os.PathLike[str]) -> list[Removed]:
    """Remove the lock files that controllers on this host, now gone, left in ``state_dir``.

    A file is removed only when a dead controller's record names it, it is
    still the very file that controller wrote, and no other record (of a live
    controller, or one this function cannot judge) names it too. Records of dead
    controllers are removed; those of live ones, and lock files no record
    names, are left alone.
    """
    state = Path(state_dir)
    host = socket.gethostname()
    dead: list[tuple[Path, dict[str, Any]]] = []
    kept: set[tuple[str, str]] = set()  # (name, inode) of files some live or unknown controller holds
    for record in sorted((state / RECORDS).glob("*.json")):
        holder = _read(record)
        if holder is not None and holder.get("host") == host and _gone(holder):
            dead.append((record, holder))
        else:
            kept.update((str(e.get("name")), str(e.get("inode"))) for e in _entries(holder))
    removed = []
    for record, holder in dead:
        for entry in _entries(holder):
            name = str(entry.get("name"))
            lock = state / name
            if _LOCK_NAME.fullmatch(name) and (name, str(entry.get("inode"))) not in kept and _unchanged(lock, entry):
                lock.unlink(missing_ok=True)
                removed.append(Removed(lock, int(holder["pid"])))
        forget_controller(record)
    return removed

"""Stale-lock recovery (``unsure.controller``): only a dead controller's own lock files go."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from unsure.controller import (
    RECORDS,
    _process_start,
    clear_stale_locks,
    forget_controller,
    own_lock_files,
    record_controller,
)


def lock(state: Path, name: str, *paths: str) -> Path:
    """A lock file as Snakemake writes one: the locked paths, one a line."""
    path = state / "locks" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(paths) + "\n")
    return path


@pytest.fixture
def dead_pid() -> int:
    """The PID of a process that has ended and been reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture
def live_pid() -> Iterator[int]:
    """The PID of a running process other than this one."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc.pid
    proc.kill()
    proc.wait()


def fake_record(state: Path, pid: int, locks: list[Path], **changes: object) -> Path:
    """A record of process ``pid`` (another process, running or ended) holding ``locks``."""
    path = record_controller(state, locks)
    start = _process_start(pid) or "the start of a process that has ended"
    record = {**json.loads(path.read_text()), "pid": pid, "start": start, **changes}
    moved = path.with_name(f"{socket.gethostname()}-{pid}-0.json")
    path.unlink()
    moved.write_text(json.dumps(record))
    return moved


def test_the_record_names_the_controller_and_exactly_its_lock_files(tmp_path: Path) -> None:
    state = tmp_path / ".snakemake"
    mine = [lock(state, "0.input.lock", "a"), lock(state, "0.output.lock", "b")]
    lock(state, "1.input.lock", "another controller's")
    path = record_controller(state, [*mine, tmp_path / "elsewhere.lock"])
    assert path.parent == state / RECORDS
    assert path.name.startswith(f"{socket.gethostname()}-{os.getpid()}-")
    record = json.loads(path.read_text())
    assert (record["host"], record["pid"]) == (socket.gethostname(), os.getpid())
    assert [e["name"] for e in record["locks"]] == ["locks/0.input.lock", "locks/0.output.lock"]
    forget_controller(path)
    assert not path.exists()


def test_a_live_controllers_locks_stay_when_a_dead_one_recorded_after_it(
    tmp_path: Path, live_pid: int, dead_pid: int
) -> None:
    """The report: a live controller X, then one Y that recorded later and was killed.
    Only Y's locks go; X's stay, and so do locks no record names."""
    state = tmp_path / ".snakemake"
    x_locks = [lock(state, "0.input.lock", "x-in"), lock(state, "0.output.lock", "x-out")]
    x = fake_record(state, live_pid, x_locks)
    y_locks = [lock(state, "1.input.lock", "y-in"), lock(state, "1.output.lock", "y-out")]
    y = fake_record(state, dead_pid, y_locks)
    unrecorded = lock(state, "2.input.lock", "a controller before its onstart")

    removed = clear_stale_locks(state)
    assert sorted(r.lock for r in removed) == y_locks
    assert {r.pid for r in removed} == {dead_pid}
    assert all(p.exists() for p in [*x_locks, unrecorded])
    assert x.exists() and not y.exists()
    assert clear_stale_locks(state) == []


def test_this_process_is_alive_and_a_reused_pid_is_not_its_recorded_process(tmp_path: Path) -> None:
    state = tmp_path / ".snakemake"
    held = [lock(state, "0.input.lock", "a")]
    record = record_controller(state, held)
    assert clear_stale_locks(state) == []
    assert held[0].exists() and record.exists()
    # the same PID, started at another time: a later process that reuses the PID
    record.write_text(json.dumps({**json.loads(record.read_text()), "start": "another start"}))
    assert [r.lock for r in clear_stale_locks(state)] == held
    assert not held[0].exists() and not record.exists()


def test_a_killed_unreaped_controller_is_gone(tmp_path: Path) -> None:
    """SIGKILLed but not yet reaped by its parent (a zombie): its locks are stale."""
    state = tmp_path / ".snakemake"
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        held = [lock(state, "0.output.lock", "a")]
        fake_record(state, proc.pid, held)
        assert clear_stale_locks(state) == []
        proc.send_signal(signal.SIGKILL)
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # it has ended; not reaped
        assert Path(f"/proc/{proc.pid}").exists() or sys.platform != "linux", "a zombie keeps its /proc entry"
        assert [r.lock for r in clear_stale_locks(state)] == held
    finally:
        proc.kill()
        proc.wait()


def test_a_lock_file_written_again_since_or_held_by_a_live_record_stays(tmp_path: Path, dead_pid: int) -> None:
    """A dead controller's lock file removed (``--unlock``) and written again by a new
    controller at the same path is the new controller's: it stays."""
    state = tmp_path / ".snakemake"
    held = lock(state, "0.input.lock", "old")
    fake_record(state, dead_pid, [held])
    held.unlink()
    lock(state, "0.input.lock", "new controller, not recorded yet")
    assert clear_stale_locks(state) == []
    assert held.exists() and not list((state / RECORDS).glob("*.json"))

    # one file in two records (Snakemake's racy naming): a live one keeps it
    shared = lock(state, "1.output.lock", "both")
    fake_record(state, dead_pid, [shared])
    alive = record_controller(state, [shared])
    assert clear_stale_locks(state) == []
    assert shared.exists() and alive.exists()


def test_records_of_other_hosts_unreadable_ones_and_paths_outside_the_locks_stay(tmp_path: Path, dead_pid: int) -> None:
    state = tmp_path / ".snakemake"
    held = [lock(state, "0.input.lock", "a")]
    other = fake_record(state, dead_pid, held, host="another-host")
    assert clear_stale_locks(state) == [] and held[0].exists() and other.exists()
    other.unlink()
    broken = state / RECORDS / "half-written.json"
    broken.write_text("{")
    assert clear_stale_locks(state) == [] and held[0].exists() and broken.exists()
    broken.unlink()
    outside = tmp_path / "results.parquet"
    outside.write_text("x")
    record = fake_record(state, dead_pid, held)
    entry = json.loads(record.read_text())["locks"][0]
    record.write_text(
        json.dumps({**json.loads(record.read_text()), "locks": [{**entry, "name": "../results.parquet"}]})
    )
    assert clear_stale_locks(state) == [] and outside.exists()


def test_own_lock_files_are_the_files_snakemakes_lock_wrote(tmp_path: Path) -> None:
    """The installed Snakemake's file persistence keeps the paths it wrote (``_lockfile``):
    with another controller's locks present, exactly this one's new files are named."""
    from types import SimpleNamespace

    from snakemake.persistence.file import FilePersistence

    state = tmp_path / ".snakemake"
    earlier = [lock(state, "0.input.lock", "in-other"), lock(state, "0.output.lock", "out-other")]
    job = SimpleNamespace(input=[str(tmp_path / "in")], output=[str(tmp_path / "out")])
    persistence = FilePersistence(path=state)
    persistence.dag = SimpleNamespace(jobs=[job], needrun_jobs=lambda: [job])
    assert own_lock_files(persistence) == []
    with persistence.lock():
        mine = own_lock_files(persistence)
        assert mine == [state / "locks" / "1.input.lock", state / "locks" / "1.output.lock"]
        assert mine[1].read_text().split() == job.output
        assert set((state / "locks").iterdir()) == {*earlier, *mine}
    assert own_lock_files(SimpleNamespace()) == []  # a backend without lock files

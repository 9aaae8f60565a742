"""Several controllers in one directory, some killed: stale-lock recovery with real Snakemake runs.

Issue 30 item 1: a controller X runs; a second one, Y, on another target records itself and
is killed; a third, Z, on X's target used to remove X's locks (the single record named Y, dead)
and score X's shard beside X.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
import pytest
import yaml
from workflow_helpers import SNAKEMAKE, install_demo_zoo, snakemake, untrained

from unsure.controller import RECORDS

pytestmark = pytest.mark.workflow

SHARD = "results/riskscores/scores/shards/tiny-llama/ACSIncome/multiple_choice/0.parquet"
OTHER = "results/subgroups/inputs/labelbias.parquet"  # shares no file with SHARD's jobs
STALE = "the controller that held it is no longer running"


def config(checkout: Path) -> Path:
    raw = untrained(yaml.safe_load((checkout / "config" / "demo.yaml").read_text()))
    raw["data"]["acs"].update({"states": ["CA"], "generated_rows_per_state": 2000})
    # one task and prompting, enough rows that the shard takes a few seconds to score
    raw["studies"]["riskscores"].update(
        {"tasks": ["ACSIncome"], "prompting": ["multiple_choice"], "n_train": 200, "n_eval": 600}
    )
    path = checkout / "controllers.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.fixture
def started(checkout: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Controllers the test starts, each in its own process group (with its jobs); none outlives it."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            os.killpg(proc.pid, signal.SIGCONT)
            proc.wait()


def start(procs: list[subprocess.Popen[bytes]], root: Path, *args: str) -> subprocess.Popen[bytes]:
    """A controller in the background; its output goes to a file (a stopped reader must not block it)."""
    with open(root / f"controller-{len(procs)}.log", "wb") as out:
        proc = subprocess.Popen(
            [SNAKEMAKE, *args], cwd=root, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    procs.append(proc)
    return proc


def wait_for(what: str, found: Callable[[], bool], proc: subprocess.Popen[bytes], timeout: float = 300) -> None:
    """Poll ``found()`` every few milliseconds until true; fail if ``proc`` ends or time runs out."""
    deadline = time.monotonic() + timeout
    while not found():
        assert proc.poll() is None, f"the controller ended before {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def record_of(root: Path, pid: int) -> dict[str, object] | None:
    """The lock record of controller ``pid``, once it has written it (in ``onstart``)."""
    for path in (root / ".snakemake" / RECORDS).glob(f"*-{pid}-*.json"):
        return dict(json.loads(path.read_text()))
    return None


def lock_files(root: Path, record: dict[str, object]) -> dict[Path, str]:
    """The lock files a record names, with their contents."""
    locks = record["locks"]
    assert isinstance(locks, list) and locks, record
    return {root / ".snakemake" / e["name"]: (root / ".snakemake" / e["name"]).read_text() for e in locks}


def shard_holder(root: Path) -> int | None:
    """The PID of the job scoring SHARD, from the shard's lock (``unsure.engine.shards``)."""
    try:
        text = (root / (SHARD + ".chunks") / "lock").read_text()
    except FileNotFoundError:
        return None
    return int(text.split()[1]) if text.startswith("process ") else None


def test_a_killed_second_run_leaves_a_live_runs_locks_and_shard_alone(
    checkout: Path, demo_zoo: dict[str, Path], started: list[subprocess.Popen[bytes]]
) -> None:
    cfg = config(checkout)
    install_demo_zoo(checkout, demo_zoo, yaml.safe_load(cfg.read_text()))
    args = ["--configfile", str(cfg), "--cores", "1"]

    # X scores SHARD. Y, on another target, starts once X has recorded its locks, records its
    # own (the newest record) and is killed. X is stopped (controller and jobs): alive, locked.
    x = start(started, checkout, SHARD, *args)
    wait_for("X's record", lambda: record_of(checkout, x.pid) is not None, x)
    y = start(started, checkout, OTHER, *args)

    def y_recorded_or_x_scoring() -> bool:
        return record_of(checkout, y.pid) is not None or shard_holder(checkout) is not None

    wait_for("Y's record (or X's job mid-shard)", y_recorded_or_x_scoring, y)
    os.killpg(x.pid, signal.SIGSTOP)  # at once if X's job is mid-shard: Y's start overlaps X's work
    wait_for("Y's record", lambda: record_of(checkout, y.pid) is not None, y)
    os.killpg(y.pid, signal.SIGKILL)
    y.wait()
    x_record, y_record = record_of(checkout, x.pid), record_of(checkout, y.pid)
    assert x_record is not None and y_record is not None
    x_locks, y_locks = lock_files(checkout, x_record), lock_files(checkout, y_record)
    assert any(SHARD in text.split() for text in x_locks.values()), "X's record names its output lock"
    assert not set(y_locks) & set(x_locks)

    # Z, on X's target: removes Y's stale locks, not X's, and is refused X's job
    z = snakemake(SHARD, *args, cwd=checkout)
    assert z.returncode != 0, z.stderr[-3000:] + (checkout / "controller-0.log").read_text()[-3000:]
    removed = {line.split()[1].rstrip(":") for line in z.stderr.splitlines() if STALE in line}
    assert removed == {str(p.relative_to(checkout)) for p in y_locks}, z.stderr[-3000:]
    assert "Directory cannot be locked" in z.stderr, z.stderr[-3000:]
    assert "riskscores_infer" not in z.stdout + z.stderr, "Z must not run X's job"
    assert {p: p.read_text() for p in x_locks} == x_locks
    assert record_of(checkout, x.pid) == x_record and record_of(checkout, y.pid) is None

    if shard_holder(checkout) is None:  # let X's job reach the shard, and stop it there
        os.killpg(x.pid, signal.SIGCONT)
        wait_for("X's job to lock the shard", lambda: shard_holder(checkout) is not None, x)
        os.killpg(x.pid, signal.SIGSTOP)
    scorer = shard_holder(checkout)
    assert scorer is not None and os.getpgid(scorer) == x.pid
    assert not (checkout / SHARD).exists(), "X's job ended before it was stopped: too few rows"

    # without Snakemake's locks (--nolock), the shard's own lock stops a second scorer, naming X's job
    z2 = snakemake(SHARD, *args, "--nolock", cwd=checkout)
    assert z2.returncode != 0
    assert f"this shard is being scored by process {scorer} " in z2.stdout + z2.stderr, z2.stderr[-3000:]
    assert "done:" not in z2.stdout + z2.stderr
    assert shard_holder(checkout) == scorer

    # X goes on and finishes its shard, alone
    os.killpg(x.pid, signal.SIGCONT)
    assert x.wait(timeout=300) == 0, (checkout / "controller-0.log").read_text()[-3000:]
    assert (checkout / "controller-0.log").read_text().count(f"done: {SHARD}: 620 rows") == 1
    scores = pd.read_parquet(checkout / SHARD)
    rows = pd.read_parquet(checkout / "results/riskscores/data/ACSIncome.parquet")
    assert len(scores) == 620 and scores["row_id"].is_unique and scores["row_id"].isin(rows["row_id"]).all()
    assert not list((checkout / ".snakemake" / RECORDS).glob("*.json")), "X's record goes when X ends"


def test_a_killed_lone_controllers_locks_are_removed_by_the_same_command(
    checkout: Path, started: list[subprocess.Popen[bytes]]
) -> None:
    """The local counterpart of test_slurm's killed-controller test: the record names exactly
    the locks the killed controller left, and the same command run again removes them and runs."""
    args = [OTHER, "--configfile", str(config(checkout)), "--cores", "1"]
    first = start(started, checkout, *args)
    wait_for("the controller's record", lambda: record_of(checkout, first.pid) is not None, first)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    record = record_of(checkout, first.pid)
    assert record is not None
    left = lock_files(checkout, record)
    assert set((checkout / ".snakemake" / "locks").iterdir()) == set(left)

    rerun = snakemake(*args, cwd=checkout)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert [line for line in rerun.stderr.splitlines() if STALE in line] == [
        f"removed {p.relative_to(checkout)}: {STALE} (process {first.pid})" for p in sorted(left)
    ]
    assert (checkout / OTHER).exists()
    assert not list((checkout / ".snakemake" / RECORDS).glob("*.json"))

"""The riskscores study end to end on a real SLURM cluster, through three faults:
an inference job cancelled mid-shard, the controller killed mid-run, and a job
killed for exceeding its memory. Each ends with the same numbers as a local run.

Needs the single-node cluster of ``slurm/local/cluster.sh start`` (CI starts
it); skips without one. The profile is the users' ``slurm/``, pointed at the
local partition only by ``UNSURE_SLURM_PARTITION``.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
import yaml
from workflow_helpers import REPO, SNAKEMAKE, copy_workflow, snakemake, untrained

pytestmark = [pytest.mark.workflow, pytest.mark.slurm]

SLICE = {
    "models": ["tiny-gpt2"],  # one model: the faults are the scheduler's, whatever the model
    "tasks": ["ACSIncome"],
    "shards": 2,
    "n_eval": 400,
    "chunk_rows": 20,
    "importance": {"tasks": ["ACSIncome"], "models": ["tiny-gpt2"], "rows": 150},
    "evidence": {"tasks": ["ACSIncome"], "models": ["tiny-gpt2"], "rows": 150},
}
"""The demo's riskscores study cut to one task and one model, sized so a shard runs for a while
(each of its two shards is one job, which the cancel and kill tests catch mid-shard)."""

TARGET = "riskscores_tables"
"""What each run builds: the study's scores, metrics and tables, every output :func:`outputs`
compares (its figures, and the importance and evidence analyses only they draw, are left out:
no assertion reads them)."""

FAST_POLLING = ["--slurm-init-seconds-before-status-checks", "2", "--seconds-between-status-checks", "2"]
"""The plugin checks a job's status this many seconds after the last finished, then 10 s later
each time than the last while nothing finishes (2, 14, 36, 68 s): a job level costs a run 14 or
36 s here (two Snakemake starts in the job, then its imports), whatever its work. Starting
from 8 (8, 26, 54 s) took as long in all: the persons and task jobs then waited 26 s, not 14."""
# Without slurmdbd `sacct` cannot answer: the plugin then asks squeue.
STATUS = ["--slurm-status-command", "squeue"]


def cluster_up() -> bool:
    if not shutil.which("sbatch"):
        return False
    out = subprocess.run(["sinfo", "-h", "-p", "local", "-o", "%T"], capture_output=True, text=True)
    return out.returncode == 0 and any(s in out.stdout for s in ("idle", "mixed", "allocated"))


def slice_config(root: Path) -> Path:
    config = untrained(yaml.safe_load((REPO / "config" / "demo.yaml").read_text()))
    config["studies"]["riskscores"].update(SLICE)
    path = root / "slice.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def outputs(root: Path) -> dict[str, pd.DataFrame | str]:
    """Every data and table output of the study (figures are renderings of these)."""
    base = root / "results" / "riskscores"
    found: dict[str, pd.DataFrame | str] = {}
    for path in sorted(base.rglob("*")):
        rel = str(path.relative_to(base))
        if path.suffix == ".parquet" and "/shards/" not in f"/{rel}":
            found[rel] = pd.read_parquet(path)
        elif path.suffix == ".csv":
            found[rel] = path.read_text()
    return found


def slurm_run(root: Path, target: str, **env: str) -> tuple[list[str], dict[str, str]]:
    """The users' command on the local partition (plus ``env``), for ``target`` of the slice."""
    cmd = [SNAKEMAKE, "--profile", "slurm", *STATUS, *FAST_POLLING, target, "--configfile", str(slice_config(root))]
    return cmd, {**os.environ, "UNSURE_SLURM_PARTITION": "local", **env}


def assert_same_outputs(got_root: Path, want_root: Path) -> None:
    want, got = outputs(want_root), outputs(got_root)
    assert set(got) == set(want)
    for name, frame in want.items():
        if isinstance(frame, str):
            assert got[name] == frame, name
        else:
            pd.testing.assert_frame_equal(got[name], frame, check_exact=False, atol=1e-6, obj=name)


@pytest.fixture(autouse=True)
def no_jobs_left_behind() -> Iterator[None]:
    """A failed test must not leave its jobs to run into the next one."""
    yield
    if shutil.which("squeue"):
        jobs = [job for job, comment in queued() if "riskscores" in comment]
        if jobs:
            subprocess.run(["scancel", *jobs], check=False)


@pytest.fixture(scope="module")
def local_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not cluster_up():
        pytest.skip("no local SLURM cluster (start one with: slurm/local/cluster.sh start)")
    root = copy_workflow(tmp_path_factory.mktemp("local") / "wf")
    result = snakemake("-c2", TARGET, "--configfile", str(slice_config(root)), cwd=root, timeout=1800)
    assert result.returncode == 0, result.stderr[-3000:]
    return root


def from_local_run(root: Path, local_run: Path) -> Path:
    """A fresh copy of the workflow with the local run's raw data, models and task rows (the
    persons and task files, as it left them): the SLURM run starts at the scoring jobs. Each
    job level costs a SLURM run 14-36 s whatever the job (the plugin's status checks back off
    by 10 s while nothing finishes), and the faults are in scoring."""
    root = copy_workflow(root)
    (root / "resources").symlink_to(local_run / "resources")  # same raw data and models, built once
    for name in ("persons.parquet", "ACSIncome.parquet"):
        target = root / "results" / "riskscores" / "data" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(local_run / "results" / "riskscores" / "data" / name, target)
    return root


def test_riskscores_on_slurm_survives_a_cancelled_shard_and_equals_a_local_run(local_run: Path, tmp_path: Path) -> None:
    root = from_local_run(tmp_path / "wf", local_run)
    cmd, env = slurm_run(root, TARGET)
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    cancelled = cancel_mid_shard(root)
    out, _ = proc.communicate(timeout=1800)
    assert proc.returncode == 0, out[-4000:]
    assert cancelled, "no inference shard was caught mid-run to cancel"
    logs = "\n".join(p.read_text() for p in (root / "results" / "riskscores" / "logs" / "infer").rglob("*.log"))
    assert "chunks resumed" in logs and not all(" (0 of " in line for line in logs.splitlines() if "resumed" in line)

    assert_same_outputs(root, local_run)


def cancel_mid_shard(root: Path, timeout: float = 900) -> bool:
    """``scancel`` the first inference job seen with a checkpointed chunk but unfinished."""
    job = job_mid_shard(root, timeout)
    if job is not None:
        subprocess.run(["scancel", job], check=True)
    return job is not None


def job_mid_shard(root: Path, timeout: float) -> str | None:
    """The SLURM id of the first inference job seen with a checkpointed chunk but unfinished."""
    shards = root / "results" / "riskscores" / "scores" / "shards"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for chunk_dir in shards.rglob("*.parquet.chunks"):
            if any(chunk_dir.glob("chunk-*.parquet")) and not chunk_dir.with_suffix("").exists():
                model, *_, shard = chunk_dir.relative_to(shards).with_suffix("").with_suffix("").parts
                for job, comment in queued():  # a job scores every task and prompting of its model and shard
                    if comment == f"rule_riskscores_infer_wildcards_{model}_{shard}":
                        return job
        time.sleep(0.5)
    return None


def queued() -> list[tuple[str, str]]:
    """(job id, comment) of every job in the queue; the plugin puts rule and wildcards in the comment."""
    out = subprocess.run(["squeue", "-h", "-o", "%i %k"], capture_output=True, text=True, check=True).stdout
    return [(job, comment) for job, _, comment in (line.partition(" ") for line in out.splitlines())]


def finished_outputs(root: Path) -> dict[Path, int]:
    """Result files the controller has recorded as complete, with their modification times
    (logs and a shard's checkpoint chunks are scratch, not results)."""
    incomplete_dir = root / ".snakemake" / "incomplete"
    incomplete = set()
    for marker in incomplete_dir.rglob("*"):
        if marker.is_file():
            encoded = "".join(part.lstrip("@") for part in marker.relative_to(incomplete_dir).parts)
            incomplete.add(root / base64.urlsafe_b64decode(encoded).decode())
    return {
        p: p.stat().st_mtime_ns
        for p in (root / "results").rglob("*")
        if p.is_file() and p not in incomplete and "/logs/" not in str(p) and ".chunks" not in str(p)
    }


def test_killed_controller_rerun_finishes_only_unfinished_work(local_run: Path, tmp_path: Path) -> None:
    """SIGKILL the controller mid-shard (its lock stays behind, its jobs run on); the same
    command run again takes over the lock, reruns only what was not finished, and gives
    the local run's numbers. (From the start: what finished before the kill must be what the
    killed controller recorded, the persons and task files.)"""
    root = copy_workflow(tmp_path / "wf")
    (root / "resources").symlink_to(local_run / "resources")
    cmd, env = slurm_run(root, TARGET)
    first = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    caught = job_mid_shard(root, timeout=900)
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=60)
    assert caught is not None, "no inference shard was caught mid-run"
    assert list((root / ".snakemake" / "locks").glob("*.lock")), "a killed controller should leave its lock"
    # The killed controller's jobs run on; let them leave the queue (as docs/slurm.md advises).
    deadline = time.monotonic() + 600
    while any("riskscores" in comment for _, comment in queued()) and time.monotonic() < deadline:
        time.sleep(1)
    done_before = finished_outputs(root)
    assert any(p.suffix == ".parquet" for p in done_before), "nothing had finished before the kill"

    rerun = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=1800)
    assert rerun.returncode == 0, rerun.stderr[-4000:]
    assert "the controller that held it is no longer running" in rerun.stderr
    for path, mtime in done_before.items():
        assert path.stat().st_mtime_ns == mtime, f"{path} was finished before the kill but was recomputed"
    assert_same_outputs(root, local_run)


def test_job_over_its_memory_is_retried_with_more(local_run: Path, tmp_path: Path) -> None:
    """One inference shard with the first attempt's memory set below what the job needs:
    SLURM kills it, Snakemake resubmits it with more (the profile scales ``mem_mb`` by
    attempt) and the shard equals the local run's."""
    root = from_local_run(tmp_path / "wf", local_run)
    shard = "results/riskscores/scores/shards/tiny-gpt2/ACSIncome/multiple_choice/0.parquet"
    cmd, env = slurm_run(root, shard, UNSURE_SLURM_MEM_MB="400")
    run = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=1200)
    assert run.returncode == 0, run.stderr[-4000:]
    # The memory asked for grows with the attempt; how many attempts it takes depends on the
    # job's peak memory, which varies from run to run. (A failed job's logs, printed in
    # between, repeat its resources line, so distinct values are counted.)
    submitted = len(re.findall(r"has been submitted with SLURM jobid", run.stderr))
    asked = list(dict.fromkeys(int(m) for m in re.findall(r"^\s+resources: .*?\bmem_mb=(\d+),", run.stderr, re.M)))
    assert submitted >= 2 and asked == [400 * attempt for attempt in range(1, submitted + 1)], (submitted, asked)
    # The plugin keeps the SLURM logs of failed jobs only: the first attempt's says why it died.
    slurm_logs = (root / ".snakemake" / "slurm_logs" / "rule_riskscores_infer").rglob("*.log")
    assert any("exceeded memory limit" in p.read_text() for p in slurm_logs)
    pd.testing.assert_frame_equal(pd.read_parquet(root / shard), pd.read_parquet(local_run / shard), atol=1e-6)

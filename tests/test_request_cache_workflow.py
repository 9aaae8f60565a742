"""The request cache and per-config directories, as a user meets them on the demo workflow."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from workflow_helpers import SNAKEMAKE, install_demo_zoo, snakemake, untrained

pytestmark = pytest.mark.workflow

SHARD = "results/riskscores/scores/shards/tiny-llama/ACSIncome/multiple_choice/0.parquet"
SHARD_LOG = "results/riskscores/logs/infer/tiny-llama/0.log"


def demo_config(checkout: Path, name: str, **riskscores: object) -> Path:
    raw = untrained(yaml.safe_load((checkout / "config" / "demo.yaml").read_text()))
    # one task and prompting: the shard's job scores every one of them
    raw["studies"]["riskscores"].update({"tasks": ["ACSIncome"], "prompting": ["multiple_choice"], **riskscores})
    path = checkout / name
    path.write_text(yaml.safe_dump(raw))
    return path


def cache_line(root: Path) -> tuple[int, int]:
    """(rows from the cache, rows of the shard), from its job's log."""
    text = (root / SHARD_LOG).read_text()
    found = re.findall(rf"request cache \S+: (\d+) of (\d+) rows from the cache \({re.escape(SHARD)}\)", text)
    assert found, text[-2000:]
    return int(found[-1][0]), int(found[-1][1])


def incomplete(root: Path) -> set[str]:
    """The outputs Snakemake has marked incomplete (its markers are base64 of the path)."""
    folder = root / ".snakemake" / "incomplete"
    return {base64.urlsafe_b64decode(p.name).decode() for p in folder.iterdir()} if folder.is_dir() else set()


def default_sigint() -> None:
    """In the child before it runs the controller: SIGINT handled by default and not blocked."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def test_a_grown_n_eval_and_a_ctrl_c_rerun_score_only_new_rows(checkout: Path, demo_zoo: dict[str, Path]) -> None:
    small = demo_config(checkout, "small.yaml")
    install_demo_zoo(checkout, demo_zoo, yaml.safe_load(small.read_text()))
    run = snakemake(SHARD, "--configfile", str(small), "--cores", "1", cwd=checkout)
    assert run.returncode == 0, run.stderr[-3000:]
    assert cache_line(checkout) == (0, 100)  # n_eval 80 + threshold_rows 20

    grown = demo_config(checkout, "grown.yaml", n_eval=120)
    run = snakemake(SHARD, "--configfile", str(grown), "--cores", "1", cwd=checkout)
    assert run.returncode == 0, run.stderr[-3000:]
    assert cache_line(checkout) == (100, 140), "the 100 rows scored before come from the cache"
    scored = (checkout / SHARD).read_bytes()

    # Ctrl-C to the controller once the job has written its output but not yet ended: Snakemake
    # leaves the output marked incomplete and deletes it before the rerun's job starts. The job's
    # end is held back 5 s (a sitecustomize in its environment) so that the interrupt lands in it
    # (a job ends within a fraction of a second of writing its output). The controller starts with
    # SIGINT at its default: an earlier test in the same pytest process can leave SIGINT ignored,
    # which a child inherits, and the interrupt was then lost and the run exited 0.
    out = checkout / SHARD
    cmd = [SNAKEMAKE, SHARD, "--configfile", str(grown), "--cores", "1", "--forcerun", "riskscores_infer"]
    out.unlink()
    hold = checkout / "hold-job-ends"
    hold.mkdir()
    (hold / "sitecustomize.py").write_text(
        "import atexit, sys, time\nif '.snakemake/scripts/' in sys.argv[0]:\n    atexit.register(time.sleep, 5)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(hold), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen(
        cmd, cwd=checkout, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=default_sigint
    )
    deadline = time.monotonic() + 300
    while not out.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=120) != 0
    assert SHARD in incomplete(checkout), "the interrupted job's output should be marked incomplete"
    rerun = snakemake(SHARD, "--configfile", str(grown), "--cores", "1", cwd=checkout)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "riskscores_infer" in rerun.stdout + rerun.stderr, "the profile's rerun-incomplete reruns the job"
    assert cache_line(checkout) == (140, 140), "nothing is scored again"
    assert out.read_bytes() == scored

    # another GPU count changes no number on one device: the job reruns (its entry changed) and
    # finds every row in the cache
    raw = yaml.safe_load(grown.read_text())
    raw["models"]["tiny-llama"]["gpus"] = 1
    (checkout / "gpus.yaml").write_text(yaml.safe_dump(raw))
    rerun = snakemake(SHARD, "--configfile", "gpus.yaml", "--cores", "1", "--resources", "gpu=1", cwd=checkout)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "riskscores_infer" in rerun.stdout + rerun.stderr, "the entry changed: the job reruns"
    assert cache_line(checkout) == (140, 140), "gpus is not part of the request-cache key"
    assert out.read_bytes() == scored


def digests(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "/logs/" not in f"/{p.relative_to(folder)}"
    }


def test_two_configs_in_two_directories_leave_each_others_results_alone(checkout: Path, tmp_path: Path) -> None:
    """docs/configuration.md: ``--directory`` per config. The workflow's scripts, schema and profile resolve
    from the Snakefile's folder; results, resources, logs and the cache from the directory."""
    target = "results/riskscores/data/ACSIncome.parquet"
    configs = {"a": demo_config(checkout, "a.yaml", n_eval=80), "b": demo_config(checkout, "b.yaml", n_eval=60)}
    dirs = {"a": checkout / "runs" / "a", "b": tmp_path / "elsewhere" / "b"}  # inside the checkout and outside
    snakefile = str(checkout / "Snakefile")

    def run(name: str) -> subprocess.CompletedProcess[str]:
        args = ["-s", snakefile, "--directory", str(dirs[name]), target, "--configfile", str(configs[name])]
        return snakemake(*args, "--cores", "1", cwd=checkout)

    first = run("a")
    assert first.returncode == 0, first.stderr[-3000:]
    assert "Using workflow specific profile profiles/default" in first.stderr
    before = digests(dirs["a"] / "results")
    key = target.removeprefix("results/")
    assert key in before
    second = run("b")
    assert second.returncode == 0, second.stderr[-3000:]
    assert digests(dirs["a"] / "results") == before, "the second config changed the first one's results"
    assert digests(dirs["b"] / "results")[key] != before[key], "n_eval differs: so must the rows"
    assert not (checkout / "results").exists() and not (checkout / "resources").exists()
    again = run("a")
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr
    assert os.listdir(dirs["a"] / "resources") and os.listdir(dirs["b"] / "resources")

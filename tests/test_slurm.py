"""The riskscores study end to end on a real SLURM cluster, with an inference job
cancelled mid-shard: the same numbers as a local run.

Needs the single-node cluster of ``slurm/local/cluster.sh start`` (CI starts
it); skips without one. The profile is the users' ``slurm/``, pointed at the
local partition only by ``UNSURE_SLURM_PARTITION``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from workflow_helpers import REPO, SNAKEMAKE, copy_workflow, snakemake

pytestmark = [pytest.mark.workflow, pytest.mark.slurm]

SLICE = {
    "models": ["tiny-gpt2", "tiny-llama-chat"],
    "tasks": ["ACSIncome"],
    "shards": 2,
    "n_eval": 400,
    "chunk_rows": 20,
    "importance": {"tasks": ["ACSIncome"], "models": ["tiny-gpt2"], "rows": 150},
    "evidence": {"tasks": ["ACSIncome"], "models": ["tiny-gpt2"], "rows": 150},
}
"""The demo's riskscores study cut to one task, sized so a shard runs for a while."""

FAST_POLLING = ["--slurm-init-seconds-before-status-checks", "2", "--seconds-between-status-checks", "2"]
# Without slurmdbd `sacct` cannot answer: the plugin then asks squeue.
STATUS = ["--slurm-status-command", "squeue"]


def cluster_up() -> bool:
    if not shutil.which("sbatch"):
        return False
    out = subprocess.run(["sinfo", "-h", "-p", "local", "-o", "%T"], capture_output=True, text=True)
    return out.returncode == 0 and any(s in out.stdout for s in ("idle", "mixed", "allocated"))


def slice_config(root: Path) -> Path:
    config = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
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


@pytest.fixture(scope="module")
def local_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not cluster_up():
        pytest.skip("no local SLURM cluster (start one with: slurm/local/cluster.sh start)")
    root = copy_workflow(tmp_path_factory.mktemp("local") / "wf")
    result = snakemake("-c2", "riskscores_all", "--configfile", str(slice_config(root)), cwd=root, timeout=1800)
    assert result.returncode == 0, result.stderr[-3000:]
    return root


def test_riskscores_on_slurm_survives_a_cancelled_shard_and_equals_a_local_run(local_run: Path, tmp_path: Path) -> None:
    root = copy_workflow(tmp_path / "wf")
    (root / "resources").symlink_to(local_run / "resources")  # same raw data and models, built once
    config = slice_config(root)
    cmd = [SNAKEMAKE, "--profile", "slurm", *STATUS, *FAST_POLLING, "riskscores_all", "--configfile", str(config)]
    env = {**os.environ, "UNSURE_SLURM_PARTITION": "local"}
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    cancelled = cancel_mid_shard(root)
    out, _ = proc.communicate(timeout=1800)
    assert proc.returncode == 0, out[-4000:]
    assert cancelled, "no inference shard was caught mid-run to cancel"
    logs = "\n".join(p.read_text() for p in (root / "results" / "riskscores" / "logs" / "infer").rglob("*.log"))
    assert "chunks resumed" in logs and not all(" (0 of " in line for line in logs.splitlines() if "resumed" in line)

    want, got = outputs(local_run), outputs(root)
    assert set(got) == set(want)
    for name, frame in want.items():
        if isinstance(frame, str):
            assert got[name] == frame, name
        else:
            pd.testing.assert_frame_equal(got[name], frame, check_exact=False, atol=1e-6, obj=name)


def cancel_mid_shard(root: Path, timeout: float = 900) -> bool:
    """``scancel`` the first inference job seen with a checkpointed chunk but unfinished."""
    shards = root / "results" / "riskscores" / "scores" / "shards"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for chunk_dir in shards.rglob("*.parquet.chunks"):
            if any(chunk_dir.glob("chunk-*.parquet")) and not chunk_dir.with_suffix("").exists():
                jobs = subprocess.run(["squeue", "-h", "-o", "%i %k"], capture_output=True, text=True).stdout
                wildcards = chunk_dir.relative_to(shards).with_suffix("").with_suffix("").parts
                for line in jobs.splitlines():
                    job, _, comment = line.partition(" ")
                    if "riskscores_infer" in comment and all(w in comment for w in wildcards):
                        subprocess.run(["scancel", job], check=True)
                        return True
        time.sleep(0.5)
    return False

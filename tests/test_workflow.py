"""The Snakemake workflow as users drive it: dry runs, profiles, config errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from workflow_helpers import REPO, jobs, snakemake

pytestmark = pytest.mark.workflow


def test_paper_scale_dry_run_builds_the_whole_dag(checkout: Path) -> None:
    result = snakemake("-n", "all", cwd=checkout)
    assert result.returncode == 0, result.stderr
    counts = jobs(result.stdout)
    assert counts["acs_fetch_state"] == 51
    assert {"acs_fetch_dictionary", "provo_fetch", "sni_fetch", "mcqa_fetch"} <= set(counts)
    raw_generators = {
        "acs_generate_state",
        "acs_generate_dictionary",
        "provo_generate",
        "sni_generate",
        "mcqa_generate",
    }
    assert not raw_generators & set(counts), "the paper config must download its raw data, not generate it"
    assert not (checkout / "resources").exists(), "a dry run downloaded or built something"


def test_demo_dry_run_generates_and_builds_the_zoo(checkout: Path) -> None:
    result = snakemake("-n", "all", "--configfile", "config/demo.yaml", cwd=checkout)
    assert result.returncode == 0, result.stderr
    counts = jobs(result.stdout)
    assert counts["zoo_model"] == 4
    assert counts["mcqa_generate"] == 4
    assert counts["acs_generate_state"] == 2
    assert not any(name.endswith("_fetch") for name in counts), "the demo must not download"


def test_slurm_profile_resolves_from_the_repo_root(checkout: Path) -> None:
    result = snakemake("--profile", "slurm", "-n", "all", cwd=checkout)
    assert result.returncode == 0, result.stderr
    assert jobs(result.stdout)["acs_fetch_state"] == 51


def test_slurm_profile_sets_account_and_partition_in_one_place() -> None:
    profile = yaml.safe_load((REPO / "slurm" / "config.yaml").read_text())
    assert profile["executor"] == "slurm"
    assert {"slurm_account", "slurm_partition"} <= set(profile["default-resources"])
    for other in (REPO / "profiles").rglob("*.yaml"):
        text = other.read_text()
        assert "slurm_account" not in text and "slurm_partition" not in text, other


@pytest.mark.parametrize(
    ("study", "key", "value", "expected"),
    [
        ("riskscores", "shardz", 2, "studies.riskscores.shardz: unknown key"),
        ("nextword", "n_samples", "lots", "studies.nextword.n_samples: Input should be a valid integer"),
        ("labelbias", "models", ["gpt-9"], "studies.labelbias.models[0]: unknown model 'gpt-9'"),
        ("decisionrisk", "shards", 0, "studies.decisionrisk.shards: Input should be greater than or equal to 1"),
    ],
)
def test_broken_config_fails_before_any_job_with_the_key(
    checkout: Path, study: str, key: str, value: object, expected: str
) -> None:
    config = yaml.safe_load((checkout / "config" / "demo.yaml").read_text())
    config["studies"][study][key] = value
    (checkout / "bad.yaml").write_text(yaml.safe_dump(config))
    result = snakemake("-n", "all", "--configfile", "bad.yaml", cwd=checkout)
    assert result.returncode != 0
    assert expected in result.stdout + result.stderr
    assert not (checkout / "resources").exists()


def test_too_few_gpus_for_a_model_stop_the_dry_run_naming_model_estimate_and_need(checkout: Path) -> None:
    config = yaml.safe_load((checkout / "config" / "config.yaml").read_text())
    config["models"]["llama-3-70b"]["gpus"] = 2  # 169 GB of bf16 weights + 20% on 2 x 80 GB
    (checkout / "small.yaml").write_text(yaml.safe_dump(config))
    result = snakemake("-n", "all", "--configfile", "small.yaml", cwd=checkout)
    out = result.stdout + result.stderr
    assert result.returncode != 0
    assert "models.llama-3-70b.gpus: 2 GPUs of 80 GB" in out and "169 GB needs 3 GPUs" in out, out[-3000:]
    assert "Traceback" not in result.stderr and "site-packages" not in out
    assert not (checkout / "resources").exists()

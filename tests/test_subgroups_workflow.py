"""The subgroups module in the DAG: its jobs, swapping a generated input for a study's file, config errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from workflow_helpers import jobs, snakemake

from unsure.subgroups.generate import generate

pytestmark = pytest.mark.workflow

TINY = {
    "repetitions": 2,
    "equal_sizes": [10],
    "sr_trees": [10, 20],
    "sr_depths": [1],
    "generated_rows": 600,
    "generated_subgroups": 6,
    "max_clusters": 4,
    "lasso_lambdas": 5,
}


def with_subgroups(checkout: Path, **settings: Any) -> str:
    config = yaml.safe_load((checkout / "config" / "demo.yaml").read_text())
    config["studies"]["subgroups"].update(settings)
    (checkout / "test.yaml").write_text(yaml.safe_dump(config))
    return "test.yaml"


def test_demo_dry_run_schedules_every_subgroups_job(checkout: Path) -> None:
    result = snakemake("-n", "subgroups_all", "--configfile", "config/demo.yaml", cwd=checkout)
    assert result.returncode == 0, result.stderr
    counts = jobs(result.stdout)
    for rule, n in [("subgroups_generate", 3), ("subgroups_prepare", 3), ("subgroups_evaluate", 3)]:
        assert counts[rule] == n
    assert {"subgroups_summarize", "subgroups_tables", "subgroups_figures"} <= set(counts)


def test_a_study_file_replaces_the_generated_input(checkout: Path) -> None:
    """Pointing a source at a per-instance parquet is the only change needed to use real results."""
    data = generate("labelbias", ["llm-a", "llm-b"], rows=700, subgroups=6, seed=3).instances
    (checkout / "study").mkdir()
    data.to_parquet(checkout / "study" / "instances.parquet", index=False)
    config = with_subgroups(checkout, **TINY, inputs={"labelbias": "study/instances.parquet"})
    dry = snakemake("-n", "subgroups_all", "--configfile", config, cwd=checkout)
    assert dry.returncode == 0, dry.stderr
    assert jobs(dry.stdout)["subgroups_generate"] == 2
    run = snakemake("subgroups_all", "--configfile", config, "--cores", "2", cwd=checkout)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    out = checkout / "results" / "subgroups"
    assert not (out / "inputs" / "labelbias.parquet").exists()
    units = pd.read_parquet(out / "scores" / "labelbias_units.parquet")
    assert set(units["model"]) == {"llm-a", "llm-b"}
    for name in ("table1", "table2", "table3", "loco"):
        assert (out / "tables" / f"{name}.md").exists()
    for name in ("fig1", "fig2", "fig3", "fig4", "fig7"):
        assert (out / "figures" / f"{name}.pdf").exists()
    assert (out / "logs" / "evaluate" / "labelbias.log").read_text().count("chunks done") >= 1


def test_a_missing_study_file_is_named(checkout: Path) -> None:
    config = with_subgroups(checkout, inputs={"riskscores": "results/riskscores/scores/nope.parquet"})
    result = snakemake("-n", "subgroups_all", "--configfile", config, cwd=checkout)
    assert result.returncode != 0
    assert "results/riskscores/scores/nope.parquet" in result.stdout + result.stderr


def test_bad_subgroups_config_names_the_key(checkout: Path) -> None:
    config = with_subgroups(checkout, protocol="exact")
    result = snakemake("-n", "subgroups_all", "--configfile", config, cwd=checkout)
    assert result.returncode != 0
    assert "studies.subgroups.protocol" in result.stdout + result.stderr
    assert not (checkout / "results").exists()

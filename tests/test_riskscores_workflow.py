"""The riskscores module in the DAG: every output scheduled, and a new model runs only its own inference."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from workflow_helpers import REPO, jobs, snakemake, stand_in_outputs

from unsure.config import ConfigError, parse_config

pytestmark = pytest.mark.workflow


def with_models(checkout: Path, name: str, models: list[str]) -> str:
    config = yaml.safe_load((checkout / "config" / "demo.yaml").read_text())
    config["studies"]["riskscores"]["models"] = models
    (checkout / name).write_text(yaml.safe_dump(config))
    return name


def test_adding_a_model_runs_only_its_inference_and_the_summaries(checkout: Path) -> None:
    before = with_models(checkout, "before.yaml", ["tiny-llama", "tiny-llama-chat"])
    summary = snakemake("--summary", "riskscores_all", "--configfile", before, cwd=checkout)
    assert summary.returncode == 0, summary.stderr
    outputs = stand_in_outputs(checkout, summary.stdout)  # then mark them done with their provenance
    assert {"results/riskscores/tables/table1.tex", "results/riskscores/figures/figA9.pdf",
            "results/riskscores/scores/subgroups_input.parquet"} <= {o[0] for o in outputs}  # fmt: skip
    touched = snakemake("--touch", "riskscores_all", "--configfile", before, "-c1", cwd=checkout)
    assert touched.returncode == 0, touched.stderr
    after = with_models(checkout, "after.yaml", ["tiny-llama", "tiny-llama-chat", "tiny-gpt2"])
    dry = snakemake("-n", "riskscores_all", "--configfile", after, cwd=checkout)
    assert dry.returncode == 0, dry.stderr
    counts = jobs(dry.stdout)
    counts.pop("total")
    assert counts.pop("riskscores_infer") == 1  # one shard: one job scores the five tasks, two prompting kinds
    assert counts.pop("zoo_model") == 1  # the new model's build
    # the study's target refreshes its provenance, which then names the new model (issue 30)
    assert set(counts) == {"riskscores_metrics", "riskscores_tables", "riskscores_figures",
                           "riskscores_subgroups_input", "riskscores_provenance", "riskscores_all"}  # fmt: skip
    scheduled = [
        path
        for line in dry.stdout.splitlines()
        if line.strip().startswith("output: results/riskscores/scores/shards/")
        for path in line.strip().removeprefix("output: ").split(", ")
    ]
    assert len(scheduled) == 10 and all("/shards/tiny-gpt2/" in path for path in scheduled)


def test_config_errors_name_the_key() -> None:
    config = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    study = config["studies"]["riskscores"]
    study["tasks"] = ["ACSIncome", "ACSIncom"]
    study["custom_tasks"] = {"Grads": {"based_on": "ACSIncome", "filters": ["SCHL>20"]}}
    study["importance"] = {"models": ["tiny-gpt2"]}
    with pytest.raises(ConfigError) as err:
        parse_config(config)
    message = str(err.value)
    assert "studies.riskscores.custom_tasks.Grads.filters[0]" in message
    study["custom_tasks"] = {}
    with pytest.raises(ConfigError) as err:
        parse_config(config)
    assert "tasks[1]: unknown task 'ACSIncom'" in str(err.value)
    assert "importance.models[0]: 'tiny-gpt2' is not one of this study's models" in str(err.value)

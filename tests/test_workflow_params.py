"""Snakemake reruns a job when its params change only if it can compare them: plain values.

A pydantic object as a param is skipped by Snakemake's comparison (it records only
builtin values), so changing a model's ``id`` or ``dtype`` left stale samples behind
with "Nothing to be done". This walks every job of the demo and the paper config.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from workflow_helpers import REPO, jobs, snakemake, stand_in_outputs


def _unrepresentable_params(configfile: str) -> dict[str, set[tuple[str, str]]]:
    from snakemake.api import SnakemakeApi
    from snakemake.persistence import UNREPRESENTABLE
    from snakemake.settings.types import ConfigSettings, DAGSettings, OutputSettings, ResourceSettings, StorageSettings

    bad: dict[str, set[tuple[str, str]]] = {}
    cwd = os.getcwd()
    try:
        with SnakemakeApi(OutputSettings()) as api:
            workflow_api = api.workflow(
                resource_settings=ResourceSettings(cores=1),
                config_settings=ConfigSettings(configfiles=[REPO / configfile]),
                storage_settings=StorageSettings(),
                snakefile=REPO / "Snakefile",
                workdir=REPO,
            )
            dag_api = workflow_api.dag(dag_settings=DAGSettings(targets={"all"}, forceall=True))
            workflow = dag_api.workflow_api._workflow  # the API offers no job list; Snakemake's own objects
            workflow._prepare_dag(forceall=True, ignore_incomplete=True, lock_warn_only=True, nolock=True)
            workflow._build_dag()
            for job in workflow.dag.jobs:
                for name, value in job.params.items():
                    if workflow.persistence._serialize_param_builtin(value) is UNREPRESENTABLE:
                        bad.setdefault(job.rule.name, set()).add((name, type(value).__name__))
    finally:
        os.chdir(cwd)
    return bad


@pytest.mark.parametrize("configfile", ["config/demo.yaml", "config/config.yaml"])
def test_every_param_of_every_job_is_a_value_snakemake_compares(configfile: str) -> None:
    assert _unrepresentable_params(configfile) == {}


def test_the_check_sees_an_object_param(tmp_path: Path) -> None:
    """The check itself: Snakemake's serializer skips an object (so the test above can fail)."""
    from snakemake.persistence import UNREPRESENTABLE, PersistenceBase

    from unsure.config import Model

    assert PersistenceBase._serialize_param_builtin(None, Model(id="gpt2")) is UNREPRESENTABLE
    assert PersistenceBase._serialize_param_builtin(None, Model(id="gpt2").model_dump()) is not UNREPRESENTABLE


def _demo_with(checkout: Path, name: str, dtype: str) -> str:
    config = yaml.safe_load((checkout / "config" / "demo.yaml").read_text(encoding="utf-8"))
    config["models"]["tiny-llama-chat"]["dtype"] = dtype
    (checkout / name).write_text(yaml.safe_dump(config), encoding="utf-8")
    return name


@pytest.mark.workflow
def test_changing_one_nextword_model_entry_plans_only_that_models_jobs(checkout: Path) -> None:
    """Changing ``dtype`` of a nextword model gave "Nothing to be done" and stale samples."""
    before = _demo_with(checkout, "before.yaml", "auto")
    summary = snakemake("--summary", "nextword_all", "--configfile", before, cwd=checkout)
    assert summary.returncode == 0, summary.stderr
    stand_in_outputs(checkout, summary.stdout)  # then marked done with their provenance
    touched = snakemake("--touch", "nextword_all", "--configfile", before, "-c1", cwd=checkout)
    assert touched.returncode == 0, touched.stderr
    same = snakemake("-n", "nextword_all", "--configfile", before, cwd=checkout)
    assert "Nothing to be done" in same.stdout + same.stderr, same.stdout[-2000:]
    dry = snakemake("-n", "nextword_all", "--configfile", _demo_with(checkout, "after.yaml", "float32"), cwd=checkout)
    assert dry.returncode == 0, dry.stderr
    counts = jobs(dry.stdout)
    assert counts["nextword_sample"] == 2, counts  # its two chat modes, one shard each
    assert not {"nextword_tokens", "nextword_biased", "nextword_finetune", "zoo_model"} & set(counts), counts
    sampled = [line for line in dry.stdout.splitlines() if line.strip().startswith("output: results/nextword/samples/")]
    assert sampled and all("/samples/tiny-llama-chat/" in line for line in sampled), sampled


@pytest.mark.workflow
def test_all_skips_a_study_without_models_and_says_so(checkout: Path) -> None:
    """``models: []`` ended in a matplotlib error deep inside a figure job."""
    config = yaml.safe_load((checkout / "config" / "demo.yaml").read_text(encoding="utf-8"))
    config["studies"]["decisionrisk"]["models"] = []
    (checkout / "no-dr.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    dry = snakemake("-n", "all", "--configfile", "no-dr.yaml", cwd=checkout)
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert "studies.decisionrisk.models is empty: `all` skips the decisionrisk study" in dry.stdout + dry.stderr
    assert not any(rule.startswith("decisionrisk_") for rule in jobs(dry.stdout)), jobs(dry.stdout)
    assert jobs(dry.stdout)["riskscores_provenance"] == 1


@pytest.mark.workflow
def test_changing_protocol_plans_only_the_jobs_whose_numbers_depend_on_it(checkout: Path) -> None:
    """Changing ``protocol`` reran the five riskscores task and baseline jobs, whose outputs
    were byte-identical: the task file held the rows' text in the protocol's words."""
    raw = yaml.safe_load((checkout / "config" / "demo.yaml").read_text(encoding="utf-8"))
    before = raw["studies"]["riskscores"].get("protocol", "corrected")
    (checkout / "before.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    raw["studies"]["riskscores"]["protocol"] = "paper" if before == "corrected" else "corrected"
    (checkout / "after.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    summary = snakemake("--summary", "riskscores_all", "--configfile", "before.yaml", cwd=checkout)
    assert summary.returncode == 0, summary.stderr
    stand_in_outputs(checkout, summary.stdout)
    touched = snakemake("--touch", "riskscores_all", "--configfile", "before.yaml", "-c1", cwd=checkout)
    assert touched.returncode == 0, touched.stderr
    dry = snakemake("-n", "riskscores_all", "--configfile", "after.yaml", cwd=checkout)
    assert dry.returncode == 0, dry.stderr
    counts = jobs(dry.stdout)
    assert counts["riskscores_infer"] >= 1 and counts["riskscores_subgroups_input"] == 1, counts
    assert not {"riskscores_task", "riskscores_baselines", "riskscores_persons", "zoo_model"} & set(counts), counts
    # XGBoost's permutation importance does not prompt: it stays (its increasing evidence adds the
    # features in the order of every model's importance, the language models' included: it reruns)
    planned = [line.strip() for line in dry.stdout.splitlines() if line.strip().startswith("output: ")]
    assert not [line for line in planned if "/importance/xgboost/" in line], planned
    assert [line for line in planned if "/importance/" in line], planned

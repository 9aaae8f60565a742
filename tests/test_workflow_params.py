"""Snakemake reruns a job when its params change only if it can compare them: plain values.

A pydantic object as a param is skipped by Snakemake's comparison (it records only
builtin values), so changing a model's ``id`` or ``dtype`` left stale samples behind
with "Nothing to be done". This walks every job of the demo and the paper config.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from workflow_helpers import REPO


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

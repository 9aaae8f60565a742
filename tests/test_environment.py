"""The conda environment of the rules installs exactly what pyproject.toml declares."""

from __future__ import annotations

import tomllib

import yaml
from workflow_helpers import REPO


def test_conda_environment_matches_pyproject() -> None:
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    env = yaml.safe_load((REPO / "envs" / "unsure.yaml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert sorted(p for p in pip if not p.startswith("-e")) == sorted(d.split("#")[0].strip() for d in declared)
    assert "-e ../" in pip, "the rules' environment must install the unsure library itself"

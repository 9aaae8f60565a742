"""Every study's results carry a provenance record: weights, code, packages, config slice."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from workflow_helpers import REPO, jobs, snakemake

from unsure.config import Config, parse_config
from unsure.engine.identity import model_identity
from unsure.provenance import PACKAGES, provenance, study_settings


def _config(tmp_path: Path) -> dict[str, Any]:
    raw: dict[str, Any] = yaml.safe_load((REPO / "config" / "demo.yaml").read_text(encoding="utf-8"))
    for name, entry in raw["models"].items():
        folder = tmp_path / name
        folder.mkdir()
        (folder / "model.safetensors").write_bytes(name.encode())
        entry["id"] = str(folder)
    return raw


def _provenance(config: Config, study: str) -> dict[str, Any]:
    """The record as the provenance rule's script writes it: each model's weights identity from the engine."""
    weights = {name: model_identity(entry) for name, entry in config.study_models(study).items()}
    return provenance(config, study, weights=weights, repo=REPO)


def test_a_model_without_a_weights_identity_is_named(tmp_path: Path) -> None:
    config = parse_config(_config(tmp_path))
    with pytest.raises(ValueError, match=r"provenance of labelbias: no weights identity for model.*tiny-llama"):
        provenance(config, "labelbias", weights={"tiny-gpt2": {"id": "x"}}, repo=REPO)


def test_the_record_names_weights_code_packages_protocol_and_settings(tmp_path: Path) -> None:
    raw = _config(tmp_path)
    record = _provenance(parse_config(raw), "riskscores")
    assert record["protocol"] == raw["studies"]["riskscores"]["protocol"]
    assert set(record["models"]) == set(raw["studies"]["riskscores"]["models"])
    assert all(len(m["files_sha256"]) == 64 for m in record["models"].values())
    assert set(record["packages"]) == set(PACKAGES) and record["packages"]["torch"]
    assert len(record["project_commit"].removesuffix("+dirty")) == 40
    assert record["settings"]["study"]["tasks"] == raw["studies"]["riskscores"]["tasks"]
    json.dumps(record)  # plain JSON values only


def test_rebuilt_weights_change_the_record(tmp_path: Path) -> None:
    raw = _config(tmp_path)
    before = _provenance(parse_config(raw), "labelbias")["models"]
    (Path(raw["models"]["tiny-gpt2"]["id"]) / "model.safetensors").write_bytes(b"other weights")
    after = _provenance(parse_config(raw), "labelbias")["models"]
    assert after["tiny-gpt2"] != before["tiny-gpt2"] and after["tiny-llama"] == before["tiny-llama"]


def test_the_settings_slice_is_the_study_its_models_and_the_data(tmp_path: Path) -> None:
    raw = _config(tmp_path)
    config = parse_config(raw)
    settings = study_settings(config, "nextword")
    assert set(settings["models"]) == set(raw["studies"]["nextword"]["models"])
    raw["studies"]["riskscores"]["n_eval"] = 7  # another study's change leaves this slice alone
    assert study_settings(parse_config(raw), "nextword") == settings


def test_the_workflow_writes_a_record_per_study_after_its_results(checkout: Path) -> None:
    result = snakemake("-n", "all", "--configfile", "config/demo.yaml", cwd=checkout)
    assert result.returncode == 0, result.stderr[-3000:]
    assert sum(n for rule, n in jobs(result.stdout).items() if rule.endswith("_provenance")) == 5

"""The config model and its JSON schema: good configs pass, bad ones name the key."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from unsure.config import ConfigError, check_files, json_schema, load_config, parse_config

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.json"


def raw(name: str) -> dict[str, Any]:
    return yaml.safe_load((REPO / "config" / name).read_text())


@pytest.mark.parametrize("name", ["config.yaml", "demo.yaml"])
def test_shipped_configs_are_valid(name: str) -> None:
    cfg = load_config(REPO / "config" / name)
    for study in ("riskscores", "nextword", "labelbias", "decisionrisk"):
        assert cfg.study_models(study), f"{name}: study {study} runs no model"
    jsonschema.validate(raw(name), json.loads(SCHEMA.read_text()))


def test_committed_schema_is_generated_from_the_model() -> None:
    assert json.loads(SCHEMA.read_text()) == json_schema(), "run: python -m unsure.config > " + str(SCHEMA)


def test_demo_models_are_zoo_models_without_gpus() -> None:
    cfg = load_config(REPO / "config" / "demo.yaml")
    for name, model in cfg.models.items():
        assert model.zoo_name in cfg.zoo.models, name
        assert model.gpus == 0, name


def test_paper_config_uses_real_hub_ids() -> None:
    cfg = load_config(REPO / "config" / "config.yaml")
    ids = {m.id for m in cfg.models.values()}
    for expected in ("meta-llama/Meta-Llama-3-70B", "mistralai/Mixtral-8x22B-v0.1", "openai-community/gpt2"):
        assert expected in ids
    assert all(m.zoo_name is None for m in cfg.models.values())


def broken(path: str, value: Any) -> dict[str, Any]:
    """The demo config with ``value`` set at dotted ``path`` (created if missing)."""
    cfg = copy.deepcopy(raw("demo.yaml"))
    *parents, last = path.split(".")
    node = cfg
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return cfg


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("studies.riskscores.n_eval_rows", 5, "studies.riskscores.n_eval_rows: unknown key"),
        ("modles", {}, "modles: unknown key"),
        ("studies.riskscores.n_eval", "many", "studies.riskscores.n_eval: Input should be a valid integer"),
        ("studies.nextword.shards", 0, "studies.nextword.shards: Input should be greater than or equal to 1"),
        ("studies.labelbias.models", ["tiny-llama", "gpt-9"], "studies.labelbias.models[1]: unknown model 'gpt-9'"),
        ("models.tiny-gpt2.gpus", "two", "models.tiny-gpt2.gpus: Input should be a valid integer"),
        ("models.x", {"id": "resources/models/nope", "gpus": 0}, "models.x.id: 'resources/models/nope' is a zoo path"),
        ("data.acs.states", ["California"], "data.acs.states[0]: String should match pattern"),
        ("data.provo.source", "local", "data.provo: source 'local' needs local_dir"),
        ("studies.decisionrisk.encoder", "tiny-llama", "studies.decisionrisk.encoder: model 'tiny-llama' is not kind"),
        ("zoo.models.tiny-gpt2.heads", 5, "zoo.models.tiny-gpt2: hidden_size 64 is not divisible by heads 5"),
        ("models.api", {"id": "gpt-4o", "backend": "openai"}, "models.api: an API model needs no GPUs"),
        ("zoo.models.tiny-llama-chat.base", "tiny-lama", "models.tiny-llama-chat.base: 'tiny-lama' is not a zoo model"),
        ("zoo.models.tiny-llama-chat.base", "tiny-bert", "'tiny-bert' is not a causal base model"),
        ("zoo.models.tiny-llama-chat.chat", False, "zoo.models.tiny-llama-chat: base: 'tiny-llama' is tuned into"),
        ("zoo.models.tiny-llama-chat.layers", 3, "zoo.models.tiny-llama-chat: layers: a variant of base 'tiny-llama'"),
        ("zoo.models.tiny-llama-chat.architecture", "llama", "names exactly one of architecture"),
    ],
)
def test_bad_config_names_the_key(path: str, value: Any, expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(broken(path, value))
    assert expected in str(err.value)


def test_model_name_must_be_path_safe() -> None:
    cfg = raw("demo.yaml")
    cfg["models"]["../etc"] = {"id": "gpt2"}
    with pytest.raises(ConfigError, match=r"config key models\.\.\./etc"):
        parse_config(cfg)


def test_schema_rejects_what_the_model_rejects() -> None:
    schema = json.loads(SCHEMA.read_text())
    for path, value in [("studies.riskscores.bogus", 1), ("studies.nextword.shards", 0), ("seed", "x")]:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken(path, value), schema)


def test_config_is_frozen() -> None:
    cfg = load_config(REPO / "config" / "demo.yaml")
    with pytest.raises(ValueError):
        cfg.seed = 3  # type: ignore[misc]


def test_a_yaml_syntax_error_is_named_with_its_file_and_line(tmp_path: Path) -> None:
    """Snakemake says only "Config file is not valid JSON or YAML"; `python -m unsure.config FILE` says where."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("seed: 0\nstudies:\n  riskscores:\n    models: [a, b\n    tasks: x\n", encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "unsure.config", str(bad)], capture_output=True, text=True)
    assert run.returncode == 1
    assert str(bad) in run.stderr and "line 5" in run.stderr, run.stderr


def test_config_files_are_checked_merged_as_snakemake_merges_them() -> None:
    config = check_files([REPO / "config" / "demo.yaml", REPO / "config" / "untrained.yaml"])
    assert config.zoo.training is None and config.zoo.models  # the overlay replaced one key only
    assert all(model.training is None for model in config.zoo.models.values())  # their own too
    assert check_files([REPO / "config" / "demo.yaml"]).zoo.training is not None

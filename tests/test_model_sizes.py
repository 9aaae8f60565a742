"""GPUs per model: parameter counts, the memory estimate and the config check built on them."""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

from unsure import model_sizes
from unsure.config import ConfigError, load_config, parse_config
from unsure.model_sizes import gpus_needed, parameter_count, weights_gb

REPO = Path(__file__).resolve().parents[1]

LLAMA_3_70B = {  # meta-llama/Meta-Llama-3-70B config.json (the keys the count reads)
    "model_type": "llama", "hidden_size": 8192, "num_hidden_layers": 80, "num_attention_heads": 64,
    "num_key_value_heads": 8, "intermediate_size": 28672, "vocab_size": 128256, "tie_word_embeddings": False,
}  # fmt: skip
MIXTRAL_8X7B = {  # mistralai/Mixtral-8x7B-v0.1 config.json
    "model_type": "mixtral", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
    "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 32000, "tie_word_embeddings": False,
    "num_local_experts": 8, "num_experts_per_tok": 2,
}  # fmt: skip
GPT2 = {"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "n_inner": None, "vocab_size": 50257}


def paper(**models: dict[str, Any]) -> dict[str, Any]:
    """The paper config with ``models`` entries replaced or added."""
    raw = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    raw = copy.deepcopy(raw)
    raw["models"].update(models)
    return raw


def test_estimate_is_weights_in_the_dtype_plus_20_percent_over_gpus_of_the_given_memory() -> None:
    assert weights_gb(70.6e9, "bfloat16") == pytest.approx(169.44)  # 70.6B x 2 bytes x 1.2
    assert weights_gb(70.6e9, "auto") == weights_gb(70.6e9, "float16") == weights_gb(70.6e9, "bfloat16")
    assert weights_gb(70.6e9, "float32") == pytest.approx(338.88)
    assert gpus_needed(70.6e9, "auto", 80) == 3  # Llama-3-70B
    assert gpus_needed(141e9, "bfloat16", 80) == 5  # Mixtral-8x22B: 338 GB
    assert gpus_needed(46.7e9, "auto", 80) == 2  # Mixtral-8x7B: 112 GB
    assert gpus_needed(7.24e9, "auto", 80) == 1
    assert gpus_needed(70.6e9, "float32", 80) == 5
    assert gpus_needed(70.6e9, "auto", 141) == 2  # an H200
    assert gpus_needed(1e6, "auto", 80) == 1  # never zero
    assert model_sizes.MEMORY_OVERHEAD == 1.2


def test_too_few_gpus_is_a_config_error_naming_model_estimate_and_need() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(paper(**{"llama-3-70b": {"id": "meta-llama/Meta-Llama-3-70B", "gpus": 2}}))
    message = str(err.value)
    assert "models.llama-3-70b.gpus: 2 GPUs of 80 GB cannot hold" in message
    assert "169 GB" in message and "needs 3 GPUs" in message
    with pytest.raises(ConfigError, match=r"models\.big\.gpus: .*339 GB .*needs 5 GPUs"):
        parse_config(paper(big={"id": "meta-llama/Meta-Llama-3-70B", "dtype": "float32", "gpus": 3}))


def test_gpu_memory_gb_is_the_one_memory_setting() -> None:
    h200 = paper(**{"llama-3-70b": {"id": "meta-llama/Meta-Llama-3-70B", "gpus": 2}}) | {"gpu_memory_gb": 141}
    assert parse_config(h200).models["llama-3-70b"].gpus == 2
    with pytest.raises(ConfigError, match=r"models\.yi-34b\.gpus: 2 GPUs of 40 GB .*83 GB needs 3 GPUs"):
        parse_config(paper() | {"gpu_memory_gb": 40})
    assert load_config(REPO / "config" / "config.yaml").gpu_memory_gb == 80


def test_params_key_counts_a_model_not_in_the_table() -> None:
    with pytest.raises(ConfigError, match=r"models\.new-70b\.gpus: .*168 GB needs 3 GPUs"):
        parse_config(paper(**{"new-70b": {"id": "example-org/new-70b", "params": 70, "gpus": 2}}))
    cfg = parse_config(paper(**{"new-70b": {"id": "example-org/new-70b", "params": 70, "gpus": 3}}))
    assert parameter_count(cfg.models["new-70b"], cfg.zoo.models) == (70e9, 70e9)
    with pytest.raises(ConfigError, match="params"):
        parse_config(paper(api={"id": "m", "backend": "openai", "base_url": "https://x/v1", "gpus": 0, "params": 7}))


def test_a_local_folder_is_counted_from_its_config_json(tmp_path: Path) -> None:
    for name, spec in (("llama", LLAMA_3_70B), ("mixtral", MIXTRAL_8X7B), ("gpt2", GPT2)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps(spec))
    cfg = parse_config(
        paper(
            llama={"id": str(tmp_path / "llama"), "gpus": 3},
            mixtral={"id": str(tmp_path / "mixtral"), "gpus": 2},
            gpt2={"id": str(tmp_path / "gpt2")},
        )
    )
    total, active = parameter_count(cfg.models["llama"], cfg.zoo.models) or (0, 0)
    assert total == active == pytest.approx(70.6e9, rel=0.005)  # the published size
    total, active = parameter_count(cfg.models["mixtral"], cfg.zoo.models) or (0, 0)
    assert (total, active) == (pytest.approx(46.7e9, rel=0.005), pytest.approx(12.9e9, rel=0.005))
    total, _ = parameter_count(cfg.models["gpt2"], cfg.zoo.models) or (0, 0)
    assert total == pytest.approx(124e6, rel=0.01)  # position embeddings, norms and biases left out
    with pytest.raises(ConfigError, match=r"models\.llama\.gpus: 2 GPUs of 80 GB .*169 GB needs 3 GPUs"):
        parse_config(paper(llama={"id": str(tmp_path / "llama"), "gpus": 2}))


def test_zoo_models_are_counted_from_their_spec() -> None:
    cfg = load_config(REPO / "config" / "demo.yaml")
    assert parameter_count(cfg.models["tiny-llama"], cfg.zoo.models) == (12 * 2 * 64**2 + 4096 * 64,) * 2


def test_an_unknown_model_is_not_checked_and_warned_about_once(caplog: pytest.LogCaptureFixture) -> None:
    raw = paper(**{"brand-new": {"id": "example-org/brand-new-unlisted-model", "gpus": 1}})
    with caplog.at_level(logging.WARNING, logger="unsure"):
        parse_config(raw)
        parse_config(raw)
    warned = [r.getMessage() for r in caplog.records if "brand-new-unlisted-model" in r.getMessage()]
    assert len(warned) == 1, warned
    assert "models.brand-new" in warned[0] and "params" in warned[0]


def test_cpu_and_api_models_are_not_checked() -> None:
    cfg = parse_config(paper(cpu={"id": "meta-llama/Meta-Llama-3-70B", "gpus": 0}))
    assert cfg.models["cpu"].gpus == 0
    assert cfg.models["gpt-4o-mini"].backend == "openai"


def test_paper_config_asks_each_model_for_the_gpus_its_estimate_needs() -> None:
    cfg = load_config(REPO / "config" / "config.yaml")
    for name, model in cfg.models.items():
        if model.backend != "hf" or model.gpus == 0:
            continue
        counted = parameter_count(model, cfg.zoo.models)
        assert counted is not None, f"{name}: no parameter count"
        assert model.gpus == gpus_needed(counted[0], model.dtype, cfg.gpu_memory_gb), name


QWEN = {"id": "Qwen/Qwen2-7B-Instruct", "instruct": True, "gpus": 1, "params": 7.62}
"""The "Adding a model" example of docs/configuration.md."""


def test_a_hub_model_this_machine_cannot_hold_is_named_with_its_size_and_where_it_runs() -> None:
    from unsure.model_sizes import local_memory_warnings

    raw = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    raw["models"]["qwen2-7b-instruct"] = QWEN
    cfg = parse_config(raw)
    models = {"qwen2-7b-instruct": cfg.models["qwen2-7b-instruct"], "tiny-llama": cfg.models["tiny-llama"]}
    (line,) = local_memory_warnings(models, cfg.zoo.models, memory_bytes=24 * 2**30, has_gpu=False)
    assert line.startswith("models.qwen2-7b-instruct: 'Qwen/Qwen2-7B-Instruct' has 7.62B parameters")
    assert "downloads about 15 GB and loads about 30 GB (float32 on this machine's CPU, no GPU here)" in line
    assert "on SLURM it runs on a node with its gpus" in line
    # a machine that holds it, or a GPU for a model that asks for one: nothing to say; zoo models never
    assert not local_memory_warnings(models, cfg.zoo.models, memory_bytes=64 * 2**30, has_gpu=False)
    assert not local_memory_warnings(models, cfg.zoo.models, memory_bytes=24 * 2**30, has_gpu=True)


@pytest.mark.workflow
def test_the_readme_example_pasted_into_the_demo_warns_at_plan_time(tmp_path: Path) -> None:
    """A newcomer pasted the Qwen entry of docs/configuration.md into demo.yaml: the dry run said nothing of the
    15 GB it would download and run on a laptop's CPU (issue 30)."""
    import subprocess
    import sys

    raw = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    raw["models"]["qwen2-7b-instruct"] = QWEN
    raw["studies"]["riskscores"]["models"].append("qwen2-7b-instruct")
    config = tmp_path / "demo-qwen.yaml"
    config.write_text(yaml.safe_dump(raw))
    snakemake = str(Path(sys.executable).with_name("snakemake"))
    cmd = [snakemake, "-n", "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path), "--configfile", str(config)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    memory, has_gpu = model_sizes.this_machine()
    if memory / 1e9 < 7.62 * 4 * 1.2 and not has_gpu:
        assert "models.qwen2-7b-instruct: 'Qwen/Qwen2-7B-Instruct' has 7.62B parameters" in run.stderr + run.stdout
    else:
        pytest.skip(f"this machine ({memory / 2**30:.0f} GiB, or a GPU) holds the model: nothing to warn of")


def test_an_instruct_variant_counts_its_base_models_parameters() -> None:
    """A zoo variant names no sizes of its own (its base's are its); the demo's chat model is tiny-llama's size."""
    cfg = load_config(REPO / "config" / "demo.yaml")
    assert cfg.zoo.models["tiny-llama-chat"].base == "tiny-llama"
    wide = cfg.zoo.models["tiny-llama"].model_copy(update={"hidden_size": 128})
    zoo = {**cfg.zoo.models, "tiny-llama": wide}
    assert parameter_count(cfg.models["tiny-llama-chat"], zoo) == parameter_count(cfg.models["tiny-llama"], zoo)
    assert parameter_count(cfg.models["tiny-llama-chat"], zoo) != parameter_count(
        cfg.models["tiny-llama"], cfg.zoo.models
    )

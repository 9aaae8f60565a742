"""How large a model is and how many GPUs hold it: the one place for parameter counts and the memory rule.

The config check (:class:`unsure.config.Config`: each Hugging Face model's
``gpus`` must hold its weights) and ``bench/scale.py`` (FLOPs, loading time and
its memory check) both read the counts and the rule from here. The memory of one
GPU is the config's ``gpu_memory_gb``.

A model's parameters come from, in this order: its config entry's ``params``
(billions), the published table :data:`PARAMS` (by hub id), the zoo spec (a
``resources/models/<name>`` id) or the ``config.json`` of a local folder. A
model none of them knows is not checked (a warning says so, once per model).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger(__name__)


class ModelEntry(Protocol):
    """What the sizes read of a config ``models:`` entry (:class:`unsure.config.Model`): described
    here, not imported, as :mod:`unsure.config` imports this module for its GPU check."""

    @property
    def id(self) -> str: ...
    @property
    def backend(self) -> str: ...
    @property
    def dtype(self) -> str: ...
    @property
    def gpus(self) -> int: ...
    @property
    def params(self) -> float | None: ...
    @property
    def zoo_name(self) -> str | None: ...


class ZooSizes(Protocol):
    """What the sizes read of a zoo entry (:class:`unsure.config.ZooModel`)."""

    @property
    def vocab_size(self) -> int: ...
    @property
    def hidden_size(self) -> int: ...
    @property
    def layers(self) -> int: ...
    @property
    def base(self) -> str | None: ...


PARAMS: dict[str, tuple[float, float]] = {
    # hub id: (total, active per token) in billions; published sizes (model cards, papers)
    "google/gemma-2b": (2.51, 2.51),
    "google/gemma-2b-it": (2.51, 2.51),
    "google/gemma-7b": (8.54, 8.54),
    "google/gemma-7b-it": (8.54, 8.54),
    "mistralai/Mistral-7B-v0.1": (7.24, 7.24),
    "mistralai/Mistral-7B-Instruct-v0.2": (7.24, 7.24),
    "mistralai/Mixtral-8x7B-v0.1": (46.7, 12.9),  # two of eight experts per token
    "mistralai/Mixtral-8x7B-Instruct-v0.1": (46.7, 12.9),
    "mistralai/Mixtral-8x22B-v0.1": (141.0, 39.0),
    "mistralai/Mixtral-8x22B-Instruct-v0.1": (141.0, 39.0),
    "meta-llama/Meta-Llama-3-8B": (8.03, 8.03),
    "meta-llama/Meta-Llama-3-8B-Instruct": (8.03, 8.03),
    "meta-llama/Meta-Llama-3-70B": (70.6, 70.6),
    "meta-llama/Meta-Llama-3-70B-Instruct": (70.6, 70.6),
    "01-ai/Yi-34B": (34.4, 34.4),
    "01-ai/Yi-34B-Chat": (34.4, 34.4),
    "openai-community/gpt2": (0.124, 0.124),
    "openai-community/gpt2-large": (0.774, 0.774),
    "bigscience/bloom-7b1": (7.07, 7.07),
    "meta-llama/Llama-2-7b-hf": (6.74, 6.74),
    "meta-llama/Llama-2-7b-chat-hf": (6.74, 6.74),
    "meta-llama/Llama-2-13b-hf": (13.0, 13.0),
    "meta-llama/Llama-2-13b-chat-hf": (13.0, 13.0),
    "tiiuae/falcon-7b": (7.22, 7.22),
    "tiiuae/falcon-7b-instruct": (7.22, 7.22),
    "tiiuae/falcon-40b": (41.8, 41.8),
    "tiiuae/falcon-40b-instruct": (41.8, 41.8),
    "FacebookAI/roberta-large": (0.355, 0.355),
    "sentence-transformers/nq-distilbert-base-v1": (0.066, 0.066),
}
"""FLOPs use the active parameters (Mixtral runs 2 of 8 experts per token); memory and loading use the total."""

MEMORY_OVERHEAD = 1.2
"""Weights plus 20% for activations, KV cache and the CUDA context."""

BYTES_PER_PARAM: dict[str, int] = {"auto": 2, "bfloat16": 2, "float16": 2, "float32": 4}
"""Bytes per weight of each config ``dtype`` on a GPU (``auto`` loads bfloat16 there)."""

GATED_MLP = frozenset(
    {"llama", "mistral", "mixtral", "gemma", "gemma2", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "phi3", "olmo"}
)
"""``config.json`` model types whose MLP has three matrices (gate, up, down) rather than two."""

_warned: set[str] = set()


def weights_gb(total_params: float, dtype: str) -> float:
    """GB one job's GPUs must hold: the weights in ``dtype`` plus :data:`MEMORY_OVERHEAD`."""
    return BYTES_PER_PARAM[dtype] * total_params * MEMORY_OVERHEAD / 1e9


def gpus_needed(total_params: float, dtype: str, gpu_memory_gb: float) -> int:
    """GPUs of ``gpu_memory_gb`` each that hold :func:`weights_gb` (at least one)."""
    return max(1, math.ceil(round(weights_gb(total_params, dtype) / gpu_memory_gb, 9)))


def zoo_parameters(spec: ZooSizes) -> float:
    """Parameters of a zoo model from its spec: 12 x layers x hidden² plus the embedding."""
    return 12.0 * spec.layers * spec.hidden_size**2 + spec.vocab_size * spec.hidden_size


def _first(config: Mapping[str, Any], *keys: str) -> Any:
    return next((config[k] for k in keys if config.get(k) is not None), None)


def config_json_parameters(config: Mapping[str, Any]) -> tuple[float, float] | None:
    """(total, active) parameters of a Hugging Face ``config.json``; ``None`` where its sizes are missing.

    Attention (grouped-query heads counted), the MLP (gated in :data:`GATED_MLP`;
    each expert of a mixture, ``num_experts_per_tok`` of them active) and the
    input and output embeddings (one matrix when tied); norms, biases and position
    embeddings (under 1%) are left out.
    """
    hidden = _first(config, "hidden_size", "n_embd", "d_model")
    layers = _first(config, "num_hidden_layers", "n_layer", "num_layers")
    vocab = _first(config, "vocab_size")
    if not all(isinstance(v, int) and v > 0 for v in (hidden, layers, vocab)):
        return None
    heads = _first(config, "num_attention_heads", "n_head") or 1
    kv_heads = _first(config, "num_key_value_heads", "num_kv_heads") or heads
    head_dim = _first(config, "head_dim") or hidden // heads
    inner = _first(config, "intermediate_size", "n_inner", "ffn_dim") or 4 * hidden
    attention = 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim
    mlp = (3 if config.get("model_type") in GATED_MLP else 2) * hidden * inner
    experts = _first(config, "num_local_experts", "num_experts") or 1
    active_experts = min(_first(config, "num_experts_per_tok") or experts, experts)
    embedding = vocab * hidden * (1 if config.get("tie_word_embeddings", True) else 2)
    total = layers * (attention + experts * mlp) + embedding
    active = layers * (attention + active_experts * mlp) + embedding
    return float(total), float(active)


def parameter_count(model: ModelEntry, zoo: Mapping[str, ZooSizes]) -> tuple[float, float] | None:
    """(total, active) parameters of a config entry, or ``None`` where nothing says (module docstring)."""
    if model.params is not None:
        return model.params * 1e9, model.params * 1e9
    if model.id in PARAMS:
        total, active = PARAMS[model.id]
        return total * 1e9, active * 1e9
    zoo_name = model.zoo_name
    if zoo_name is not None:
        if zoo_name not in zoo:
            return None
        spec = zoo[zoo_name]
        spec = zoo.get(spec.base, spec) if spec.base else spec  # an instruct variant is its base's size
        return (zoo_parameters(spec),) * 2
    config = Path(model.id) / "config.json"
    if config.is_file():
        try:
            return config_json_parameters(json.loads(config.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError, ValueError, TypeError):
            return None
    return None


def gpu_problems(models: Mapping[str, ModelEntry], zoo: Mapping[str, ZooSizes], gpu_memory_gb: float) -> list[str]:
    """One line per Hugging Face model whose ``gpus`` cannot hold its weights (``gpus: 0`` runs on a CPU).

    A model without a parameter count is not checked; a warning names it, once per model and process.
    """
    problems = []
    for name, model in models.items():
        if model.backend != "hf" or model.gpus == 0:
            continue
        counted = parameter_count(model, zoo)
        if counted is None:
            if model.id not in _warned:
                _warned.add(model.id)
                log.warning(
                    f"models.{name}: no parameter count for {model.id!r} (not in unsure.model_sizes.PARAMS, no "
                    "params: key, no local config.json), so its gpus are not checked against its memory; add "
                    "params: <billions> to its entry to check them"
                )
            continue
        total = counted[0]
        need = gpus_needed(total, model.dtype, gpu_memory_gb)
        if model.gpus < need:
            gb = weights_gb(total, model.dtype)
            problems.append(
                f"models.{name}.gpus: {model.gpus} GPUs of {gpu_memory_gb:g} GB cannot hold {model.id!r}: "
                f"{total / 1e9:.3g}B parameters x {BYTES_PER_PARAM[model.dtype]} bytes ({model.dtype}) + "
                f"{MEMORY_OVERHEAD - 1:.0%} = {gb:.0f} GB needs {need} GPUs (set gpus: {need}, or gpu_memory_gb)"
            )
    return problems


def local_memory_warnings(
    models: Mapping[str, ModelEntry],
    zoo: Mapping[str, ZooSizes],
    *,
    memory_bytes: float | None = None,
    has_gpu: bool | None = None,
    most: int | None = None,
) -> list[str]:
    """One line per Hugging Face hub model whose weights a local run on this machine cannot hold.

    Without a GPU here a local run loads every model on the CPU in float32 (``dtype: auto``), whatever
    its ``gpus``; a model pasted from the paper config into a laptop's config would download gigabytes
    and then fail or swap. Zoo models, local folders and API models are not checked, nor are models
    with ``gpus`` on a machine that has a GPU. ``memory_bytes`` and ``has_gpu`` default to this machine's.
    Past ``most`` lines, one more names the other models (the paper config on a laptop names 23).
    """
    here_memory, here_gpu = this_machine()
    memory_bytes = here_memory if memory_bytes is None else memory_bytes
    has_gpu = here_gpu if has_gpu is None else has_gpu
    lines, names = [], []
    for name, model in models.items():
        if model.backend != "hf" or model.zoo_name is not None or Path(model.id).exists():
            continue
        if has_gpu and model.gpus > 0:
            continue
        counted = parameter_count(model, zoo)
        if counted is None:
            continue
        total = counted[0]
        dtype = "float32" if model.dtype == "auto" else model.dtype
        load_gb, download_gb = total * BYTES_PER_PARAM[dtype] / 1e9, total * 2 / 1e9
        if load_gb * MEMORY_OVERHEAD <= memory_bytes / 1e9:
            continue
        where = "on SLURM it runs on a node with its gpus" if model.gpus > 0 else "gpus: 0 runs it on a CPU anywhere"
        names.append(name)
        lines.append(
            f"models.{name}: {model.id!r} has {total / 1e9:.3g}B parameters: a local run downloads about "
            f"{download_gb:.0f} GB and loads about {load_gb:.0f} GB ({dtype} on this machine's CPU"
            f"{', no GPU here' if not has_gpu else ''}) into {memory_bytes / 2**30:.0f} GiB of memory; {where} "
            "(snakemake --profile slurm), or use a zoo model for a local run (config/demo.yaml)"
        )
    if most is not None and len(lines) > most:
        rest = names[most:]
        lines = [*lines[:most], f"{len(rest)} more models this machine cannot hold in a local run: {', '.join(rest)}"]
    return lines


def this_machine() -> tuple[float, bool]:
    """This machine's memory in bytes and whether it has an NVIDIA GPU (without importing torch)."""
    import os

    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), Path("/proc/driver/nvidia/gpus").is_dir()

"""Tiny models for the engine tests, built once per session from the zoo code."""

from __future__ import annotations

from pathlib import Path

from unsure.config import ZooModel
from unsure.zoo.build import build, training_texts

SPECS = {
    "gpt2": ZooModel(architecture="gpt2", vocab_size=800, hidden_size=64, layers=2, heads=4),
    "llama": ZooModel(architecture="llama", vocab_size=800, hidden_size=64, layers=2, heads=4),
}


def build_all(root: Path) -> dict[str, Path]:
    texts = training_texts(seed=0, n_sentences=3000)
    for name, spec in SPECS.items():
        build(name, spec, texts, root / name, zoo_seed=0)
    return {name: root / name for name in SPECS}

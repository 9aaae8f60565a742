"""The multiple-choice encoder: fine-tuning learns, scores are seeded distributions; the DAG."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from workflow_helpers import jobs, snakemake

from unsure.config import ZooModel
from unsure.engine.encoder import MultipleChoiceEncoder, finetune
from unsure.zoo.build import build, training_texts


@pytest.fixture(scope="module")
def bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bert") / "tiny-bert"
    spec = ZooModel(architecture="bert", vocab_size=600, hidden_size=32, layers=1, heads=2)
    build("tiny-bert", spec, training_texts(seed=0, n_sentences=1500), out, zoo_seed=0)
    return out


def _task(n: int, seed: int) -> tuple[list[str], list[list[str]], list[int]]:
    """A learnable task: the gold choice is always "the cat", at a random position."""
    labels = np.random.default_rng(seed).integers(2, size=n).tolist()
    choices = [["the cat", "the dog"] if y == 0 else ["the dog", "the cat"] for y in labels]
    return ["which animal"] * n, choices, labels


def test_finetuning_learns_and_scores_are_distributions(bert: Path, tmp_path: Path) -> None:
    summary = finetune(bert, *_task(96, 0), tmp_path / "a", epochs=6, learning_rate=3e-3, max_length=16, seed=1)
    assert summary["instances"] == 96 and summary["choices"] == 2
    assert summary["epoch_loss"][-1] < 0.5 * summary["epoch_loss"][0]
    prompts, choices, labels = _task(30, 1)
    encoder = MultipleChoiceEncoder(tmp_path / "a", max_length=16)
    probs = encoder.probs(prompts, choices, batch_size=7)
    assert probs.shape == (30, 2) and np.allclose(probs.sum(axis=1), 1)
    assert (probs.argmax(axis=1) == labels).mean() > 0.9
    np.testing.assert_allclose(probs, encoder.probs(prompts, choices, batch_size=30), atol=1e-6)
    assert np.isfinite(encoder.probs(["", ""], choices[:2])).all()  # no question: an empty first segment


def test_finetuning_is_seeded(bert: Path, tmp_path: Path) -> None:
    prompts, choices, labels = _task(16, 2)
    for name in ("a", "b"):
        finetune(bert, prompts, choices, labels, tmp_path / name, epochs=1, learning_rate=1e-3, seed=4)
    a = MultipleChoiceEncoder(tmp_path / "a").probs(prompts, choices)
    np.testing.assert_array_equal(a, MultipleChoiceEncoder(tmp_path / "b").probs(prompts, choices))


def test_finetuning_rejects_bad_labels(bert: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="gold labels must index the 2 choices"):
        finetune(bert, ["p"], [["a", "b"]], [2], tmp_path / "x", epochs=1)
    with pytest.raises(ValueError, match="same number of choices"):
        finetune(bert, ["p", "q"], [["a", "b"], ["a", "b", "c"]], [0, 0], tmp_path / "x", epochs=1)


@pytest.mark.workflow
def test_demo_dry_run_schedules_every_decisionrisk_job(checkout: Path) -> None:
    result = snakemake("-n", "decisionrisk_all", "--configfile", "config/demo.yaml", cwd=checkout)
    assert result.returncode == 0, result.stderr
    counts = jobs(result.stdout)
    expected = [
        ("decisionrisk_instances", 4),
        ("decisionrisk_encoder", 4),
        ("decisionrisk_decide", 4),
        ("decisionrisk_generative", 2),  # two models, one shard each
        ("decisionrisk_similarity", 1),
        ("zoo_model", 3),  # the encoder (also the demo's embedder) and both generative models
    ]
    for rule, n in expected:
        assert counts[rule] == n, rule
    assert {"decisionrisk_tables", "decisionrisk_figures", "decisionrisk_subgroups_input"} <= set(counts)

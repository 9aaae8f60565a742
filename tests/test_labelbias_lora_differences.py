"""The ledger's two LoRA differences (targets, example selection), each flipped alone (issue 17):
one flag per difference, the (k, set) each is fine-tuned again at, a second fine-tuning run on a
tiny model, and the ledger rows it gives."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from unsure.config import Model
from unsure.engine.lora import LoraSettings
from unsure.labelbias import prompts
from unsure.labelbias.finetune import LoraProtocol, finetune_and_score, lora_examples, lora_flip_plan
from unsure.labelbias.reproduction import (
    LORA_DIFFERENCES,
    SHOWN,
    LoraFlip,
    lora_flip_evidence,
    lora_flip_metrics,
    reproduction_table,
)
from unsure.labelbias.scoring import TaskPrompting
from unsure.labelbias.tables import METRICS

LABELS = ("Yes", "No")
DEFINITION = "Decide whether the sentence mentions an animal"
WORDS = ["cat", "cup", "dog", "pen", "", "box", "cow", "car", "bee", "hat", "fox", "mug"]
POOL = tuple(
    (f"the {w} was by the door" if w else "", "Yes" if w in {"cat", "dog", "cow", "bee", "fox"} else "No")
    for w in WORDS
)
"""Twelve pool items; item 4 has an empty input (rendered ``Input: .`` by the authors' prompt)."""
EOS = "</s>"


def _task(pool: tuple[tuple[str, str], ...] = POOL) -> TaskPrompting:
    return TaskPrompting(DEFINITION, LABELS, pool)


def test_one_flag_per_difference_and_the_protocols_set_them_all() -> None:
    assert LoraProtocol.differences() == ("empty_input", "prompt_limit", "lora_targets", "lora_examples")
    assert LoraProtocol.of("paper") == LoraProtocol(True, True, True, True)
    assert LoraProtocol.of("corrected") == LoraProtocol()
    assert LoraProtocol().flipped("lora_targets") == LoraProtocol(lora_targets=True)
    assert LoraProtocol.of("paper").flipped("lora_examples") == LoraProtocol(True, True, True, False)
    with pytest.raises(ValueError, match="not a LoRA difference"):
        LoraProtocol().flipped("dc_inputs")
    with pytest.raises(ValueError, match="unknown protocol"):
        LoraProtocol.of("authors")


def test_each_flag_changes_only_its_own_part_of_the_training_examples() -> None:
    """Set 1 of k = 2 (demonstrations: pool items 2, 3): ours trains on pool items 0, 1, 4, 5,
    the authors' code on 6..9 (from k + n_train·s); item 4 has the empty input."""
    task = _task()
    demos = prompts.demonstrations(POOL, 2, 1)

    def expected(picked: list[tuple[str, str]], *, paper_prompt: bool = False, eos: str = "") -> list[tuple[str, str]]:
        return [(prompts.sni_prompt(DEFINITION, demos, x, paper=paper_prompt), " " + y + eos) for x, y in picked]

    ours_picked, theirs_picked = [POOL[i] for i in (0, 1, 4, 5)], [POOL[i] for i in (6, 7, 8, 9)]
    ours = lora_examples(task, k=2, s=1, n_train=4)
    assert ours == expected(ours_picked)
    # targets alone: the same contexts, each target followed by EOS
    assert lora_examples(task, k=2, s=1, n_train=4, choices=LoraProtocol(lora_targets=True), eos=EOS) == expected(
        ours_picked, eos=EOS
    )
    # the example selection alone: the authors' items, our rendering, no EOS
    assert lora_examples(task, k=2, s=1, n_train=4, choices=LoraProtocol(lora_examples=True)) == expected(theirs_picked)
    # the empty input alone: only the empty item's context changes
    empty = lora_examples(task, k=2, s=1, n_train=4, choices=LoraProtocol(empty_input=True))
    assert [a == b for a, b in zip(empty, ours, strict=True)] == [True, True, False, True]
    assert empty[2][0].endswith("Input: .\n\nOutput:") and ours[2][0].endswith("Input:\n\nOutput:")
    # the paper protocol: every choice the authors' (what paper=True trained on before the split)
    assert lora_examples(task, k=2, s=1, n_train=4, choices=LoraProtocol.of("paper"), eos=EOS) == expected(
        theirs_picked, paper_prompt=True, eos=EOS
    )
    with pytest.raises(ValueError, match="EOS"):
        lora_examples(task, k=2, s=1, n_train=4, choices=LoraProtocol(lora_targets=True))


@pytest.mark.parametrize("protocol", ["corrected", "paper"])
def test_each_difference_is_flipped_at_the_first_run_whose_training_examples_it_changes(protocol: str) -> None:
    tasks = {"t1": _task(), "t2": _task(POOL[::-1])}
    choices = LoraProtocol.of(protocol)
    runs = [(0, 0), (2, 0), (2, 1)]
    plan = {f.difference: f for f in lora_flip_plan(tasks, runs, n_train=4, choices=choices)}
    assert set(plan) == set(LORA_DIFFERENCES)
    # the targets change every example of the first run
    assert plan["lora_targets"] == LoraFlip("lora_targets", 0, 0, compared=8, changed=8)
    # the selections coincide for set 0 of every k (ours: the first 4 after the k demonstrations, theirs:
    # from k); at set 1 of k = 2 ours is items 0, 1, 4, 5 and theirs 6..9: all 4 differ, in both tasks
    assert plan["lora_examples"] == LoraFlip("lora_examples", 2, 1, compared=8, changed=8)
    # where every run is a set 0 there is nothing to fine-tune again for the selection, and the plan says why
    only = {f.difference: f for f in lora_flip_plan(tasks, runs[:2], n_train=4, choices=choices)}
    assert only["lora_targets"] == plan["lora_targets"]
    assert only["lora_examples"].changed == 0 and (only["lora_examples"].k, only["lora_examples"].set) == (0, 0)
    assert "same 8 examples at every (k, set) this run fine-tunes (k = 0 set 0, k = 2 set 0)" in (
        only["lora_examples"].unmeasured
    )
    assert lora_flip_plan(tasks, [], n_train=4, choices=choices) == []


def _per_task(rng: np.random.Generator) -> pd.DataFrame:
    """This run's per-task metrics (both scorings): methods none and lora at k = 0 and k = 2 (sets 0, 1)."""
    rows = []
    for scoring in ("corrected", "paper"):
        for task in ("t1", "t2"):
            for k, s in [(0, 0), (2, 0), (2, 1)]:
                for method in ("none", "lora"):
                    rows.append({"scoring": scoring, "model": "m", "task": task, "k": k, "set": s, "method": method})
    frame = pd.DataFrame(rows)
    for metric in METRICS:
        frame[metric] = rng.uniform(0.1, 0.9, len(frame))
    return frame.assign(n_eval=10, n_heldout=4)


@pytest.mark.parametrize("protocol", ["corrected", "paper"])
def test_the_ledger_compares_the_lora_numbers_of_the_flipped_run_at_its_k_and_set_only(protocol: str) -> None:
    rng = np.random.default_rng(0)
    per_task = _per_task(rng)
    scoring = protocol
    flips = [
        LoraFlip("lora_targets", 2, 0, compared=32, changed=32),
        LoraFlip("lora_examples", 2, 1, compared=32, changed=32),
    ]
    flipped = pd.DataFrame(
        [
            {"difference": f.difference, "scoring": scoring, "task": task, "k": f.k, "set": f.set, "method": "lora"}
            for f in flips
            for task in ("t1", "t2")
        ]
    )
    for metric in METRICS:
        flipped[metric] = rng.uniform(0.1, 0.9, len(flipped))
    models = pd.DataFrame({"model": ["m"], "family": ["f"], "size": ["1"], "variant": ["base"]})

    def ledger_of(flipped: pd.DataFrame, flips: list[LoraFlip]) -> pd.DataFrame:
        return reproduction_table(
            per_task,
            models,
            protocol=protocol,
            interchangeable=set(),
            semantically_equivalent=set(),
            flipped=flipped.assign(model="m"),
            evidence=lora_flip_evidence(flips).assign(model="m"),
        )

    ledger = ledger_of(flipped, flips)
    run_col, other_col = ("paper", "corrected") if protocol == "paper" else ("corrected", "paper")
    run = per_task[(per_task["scoring"] == scoring) & (per_task["method"] == "lora")]
    for flip in flips:
        rows = ledger[ledger["difference"] == flip.difference]
        assert set(rows["method"]) == {"lora"} and set(rows["k"]) == {2} and set(rows["metric"]) == set(SHOWN)
        mine = run[(run["k"] == flip.k) & (run["set"] == flip.set)]  # that set alone, not the mean over sets
        theirs = flipped[flipped["difference"] == flip.difference]
        for r in rows.itertuples(index=False):
            assert getattr(r, run_col) == pytest.approx(mine[r.metric].mean()), (flip.difference, r.metric)
            assert getattr(r, other_col) == pytest.approx(theirs[r.metric].mean()), (flip.difference, r.metric)
            assert r.gap == pytest.approx(r.paper - r.corrected)
        note = rows["note"].iloc[0]
        assert f"Measured on m at k = 2, demonstration set {flip.set} only: 32 of 32 training examples differ" in note
    named_only = ledger.loc[ledger["note"].str.startswith("this run scored"), "difference"]
    assert set(named_only) == {"dc_inputs", "empty_input", "prompt_limit"}  # no prompt flip given here
    # a difference that changed nothing gets one row saying why
    unchanged = [flips[0], LoraFlip("lora_examples", 2, 0, 32, 0, unmeasured="both variants fine-tune on the same")]
    ledger = ledger_of(flipped[flipped["difference"] == "lora_targets"], unchanged)
    row = ledger[ledger["difference"] == "lora_examples"]
    assert len(row) == 1 and "Not measured on m: both variants fine-tune on the same." in row["note"].iloc[0]


def _items() -> pd.DataFrame:
    words = ["owl", "pen", "cat", "mug", "dog", "cup", "bee", "hat"]
    kinds = ["eval"] * 6 + ["heldout"] * 2
    return pd.DataFrame(
        {
            "row_id": [f"r{i}" for i in range(len(words))],
            "task": "t",
            "kind": kinds,
            "input": [f"the {w} was by the door" for w in words],
            "gold": ["Yes" if w in {"owl", "cat", "dog", "bee"} else "No" for w in words],
        }
    )


def test_a_flipped_fine_tuning_run_differs_from_the_run_by_its_difference_alone(
    tiny_models: dict[str, Path], tmp_path: Path
) -> None:
    """The ledger's LoRA gap is a second fine-tuning run against the first: with the same choices the
    two give the same probabilities bit for bit (same seed, adapters trained independently), so
    whatever a flip changes is the flip's."""
    entry = Model(id=str(tiny_models["llama"]), gpus=0)
    tasks, items = {"t": _task()}, _items()
    settings = LoraSettings(rank=4, alpha=8, epochs=2, learning_rate=5e-3, gradient_accumulation=2)

    def run(name: str, choices: LoraProtocol) -> pd.DataFrame:
        return finetune_and_score(
            entry, tasks, items, runs=[(2, 1)], n_train=4, settings=settings, adapters=tmp_path / name, choices=choices
        )

    def probs(scores: pd.DataFrame) -> np.ndarray:
        return np.stack([np.asarray(p) for p in scores["probs"]])

    first, again = run("first", LoraProtocol()), run("again", LoraProtocol())
    np.testing.assert_array_equal(probs(first), probs(again))
    for difference in LORA_DIFFERENCES:
        flipped = run(difference, LoraProtocol().flipped(difference))
        assert list(flipped["row_id"]) == list(first["row_id"])
        assert np.abs(probs(flipped) - probs(first)).max() > 1e-6, difference
        metrics = lora_flip_metrics(flipped.assign(difference=difference), items, {"t": LABELS}, ["corrected"])
        assert len(metrics) == 1 and metrics.iloc[0][["method", "k", "set", "n_eval", "n_heldout"]].tolist() == [
            "lora",
            2,
            1,
            6,
            2,
        ]

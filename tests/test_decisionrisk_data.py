"""Benchmark loaders (generated and real files) and the risk injection functions."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from unsure.decisionrisk.data import inject, load_benchmark, sample, with_injections
from unsure.generate.mcqa import N_CHOICES, linked_choice, write_benchmark

BENCHMARKS = ("anli", "hellaswag", "piqa", "siqa")


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("mcqa")
    for b in BENCHMARKS:
        write_benchmark(root / b, benchmark=b, n_train=40, n_val=30, seed=3)
    return {b: root / b for b in BENCHMARKS}


@pytest.mark.parametrize("benchmark", BENCHMARKS)
def test_loader_reads_generated_files_with_gold_at_the_planted_choice(
    generated: dict[str, Path], benchmark: str
) -> None:
    for split, n in (("train", 40), ("val", 30)):
        frame = load_benchmark(generated[benchmark], benchmark, split)
        assert len(frame) == n and frame["row_id"].is_unique
        assert frame["row_id"].iloc[0] == f"{benchmark}-{split}-0"
        assert {len(c) for c in frame["choices"]} == {N_CHOICES[benchmark]}
        # the generator links the gold choice to the prompt on most items: the labels line up
        linked = [linked_choice(p, c) for p, c in zip(frame["prompt"], frame["choices"], strict=True)]
        hits = [lk == lab for lk, lab in zip(linked, frame["label"], strict=True) if lk is not None]
        assert len(hits) > n // 2 and all(hits)
    assert load_benchmark(generated[benchmark], benchmark, "val")["category"].notna().all() == (
        benchmark == "hellaswag"
    )


def test_loader_errors_name_the_file(generated: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown benchmark"):
        load_benchmark(generated["piqa"], "boolq", "val")
    broken = tmp_path / "piqa"
    shutil.copytree(generated["piqa"], broken)
    (broken / "valid-labels.lst").write_text("0\n1\n")
    with pytest.raises(ValueError, match=r"valid-labels\.lst: 2 labels for 30 items"):
        load_benchmark(broken, "piqa", "val")
    (broken / "valid-labels.lst").write_text("0\n" * 29 + "2\n")
    with pytest.raises(ValueError, match=r"line 30: label 2 outside the 2 choices"):
        load_benchmark(broken, "piqa", "val")


def _real(shared_data: Path, benchmark: str, tmp_path: Path) -> Path:
    """The real validation copy in the official layout (aNLI is stored reformatted: convert it back)."""
    src = shared_data / "mcqa"
    out = tmp_path / benchmark
    out.mkdir()
    if benchmark == "piqa":
        for name in ("valid.jsonl", "valid-labels.lst"):
            shutil.copy(src / "piqa" / name, out / name)
    elif benchmark == "siqa":
        for name in ("dev.jsonl", "dev-labels.lst"):
            shutil.copy(src / "socialiqa" / name, out / name)
    elif benchmark == "hellaswag":
        shutil.copy(src / "hellaswag" / "hellaswag_val_subset1000_rubriks_cube.jsonl", out / "hellaswag_val.jsonl")
    else:
        items, labels = [], []
        for line in (src / "anli" / "anli_dev_HyKAS.jsonl").read_text().splitlines():
            obj = json.loads(line)
            hyps = [c["text"] for c in obj["question"]["choices"]]
            items.append({"story_id": obj["id"], "obs1": obj["context"], "obs2": obj["question"]["stem"],
                          "hyp1": hyps[0], "hyp2": hyps[1]})  # fmt: skip
            labels.append({"A": 1, "B": 2}[obj["answerKey"]])
        (out / "dev.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
        (out / "dev-labels.lst").write_text("".join(f"{v}\n" for v in labels))
    return out


@pytest.mark.parametrize(("benchmark", "n"), [("anli", 1532), ("hellaswag", 1000), ("piqa", 1838), ("siqa", 1954)])
def test_loader_reads_the_real_validation_files(shared_data: Path, tmp_path: Path, benchmark: str, n: int) -> None:
    frame = load_benchmark(_real(shared_data, benchmark, tmp_path), benchmark, "val")
    assert len(frame) == n
    assert frame["row_id"].is_unique
    assert {len(c) for c in frame["choices"]} == {N_CHOICES[benchmark]}
    assert set(frame["label"]) == set(range(N_CHOICES[benchmark]))
    first = frame.iloc[0]
    if benchmark == "piqa":
        assert first["prompt"] == "How do I ready a guinea pig cage for it's new occupants?" and first["label"] == 0
    if benchmark == "siqa":  # label 3 names answerC
        assert first["choices"][first["label"]] == "Find somewhere to go"
    if benchmark == "anli":
        assert first["prompt"].startswith("Ron started his new job as a landscaper today. Ron is immediately fired")
        assert first["choices"][first["label"]] == "Ron ignores his bosses's orders and called him an idiot."
    if benchmark == "hellaswag":
        assert first["category"] == "Pole vault" and first["label"] == 3


@pytest.fixture
def frame() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    n = 50
    return pd.DataFrame(
        {
            "row_id": [f"b-val-{i}" for i in range(n)],
            "prompt": [f"prompt {i}" for i in range(n)],
            "choices": [[f"choice {i}.{j}" for j in range(3)] for i in range(n)],
            "label": rng.integers(3, size=n),
        }
    )


def test_nq_leaves_an_empty_prompt(frame: pd.DataFrame) -> None:
    out = inject(frame, "NQ", seed=0)
    assert (out["prompt"] == "").all()
    assert list(out["row_id"]) == [f"{r}-NQ" for r in frame["row_id"]]
    assert out["choices"].tolist() == frame["choices"].tolist()
    assert (out["label"] == frame["label"]).all() and not out["answerable"].any()


def test_wq_prompt_comes_from_a_different_instance(frame: pd.DataFrame) -> None:
    frame.loc[1, "prompt"] = frame.loc[0, "prompt"]  # a duplicate prompt must not be borrowed
    out = inject(frame, "WQ", seed=1)
    prompts = frame["prompt"].tolist()
    for i, new in enumerate(out["prompt"]):
        assert new != prompts[i] and new in prompts
    assert out["prompt"].nunique() > 10  # not one prompt for all
    assert out["choices"].tolist() == frame["choices"].tolist()
    assert list(out["row_id"]) == [f"{r}-WQ" for r in frame["row_id"]]


def test_nra_keeps_the_number_of_choices_and_removes_the_gold(frame: pd.DataFrame) -> None:
    out = inject(frame, "NRA", seed=2)
    all_choices = {c for cs in frame["choices"] for c in cs}
    for old, new, gold in zip(frame["choices"], out["choices"], frame["label"], strict=True):
        assert len(new) == len(old)
        assert old[gold] not in new
        assert [c for j, c in enumerate(new) if j != gold] == [c for j, c in enumerate(old) if j != gold]
        assert new[gold] in all_choices - set(old)
    assert (out["label"] == -1).all() and (out["prompt"] == frame["prompt"]).all()


def test_injection_is_seeded_and_combined_with_the_originals(frame: pd.DataFrame) -> None:
    a, b = inject(frame, "WQ", seed=5), inject(frame, "WQ", seed=5)
    pd.testing.assert_frame_equal(a, b)
    assert not inject(frame, "WQ", seed=6)["prompt"].equals(a["prompt"])
    both = with_injections(frame, ("NQ", "WQ", "NRA"), seed=0)
    assert len(both) == 4 * len(frame) and both["row_id"].is_unique
    assert both.groupby("injection")["answerable"].all().to_dict() == {
        "NQ": False, "NRA": False, "WQ": False, "none": True
    }  # fmt: skip
    with pytest.raises(ValueError, match="unknown injection"):
        inject(frame, "XX", seed=0)


def test_sample_is_seeded_and_keeps_order(frame: pd.DataFrame) -> None:
    s = sample(frame, 10, seed=0)
    assert len(s) == 10 and s["row_id"].tolist() == sorted(s["row_id"], key=lambda r: int(r.split("-")[-1]))
    pd.testing.assert_frame_equal(s, sample(frame, 10, seed=0))
    assert len(sample(frame, 500, seed=0)) == len(frame)

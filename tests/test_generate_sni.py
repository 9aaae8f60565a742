"""Generated SNI tasks: the official file layout, valid labels, and labels that follow the stated rules."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from unsure.generate import sni

N_TASKS = 8
N_INSTANCES = 300


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("sni")
    return root, sni.write_tasks(root, n_tasks=N_TASKS, instances_per_task=N_INSTANCES, seed=0)


def _load(root: Path, name: str) -> dict[str, Any]:
    with open(root / "tasks" / f"{name}.json", encoding="utf-8") as f:
        task: dict[str, Any] = json.load(f)
    return task


def _classification(task: dict[str, Any]) -> bool:
    return len({o for i in task["Instances"] for o in i["output"]}) <= 10


def test_same_seed_gives_identical_bytes(generated: tuple[Path, list[str]], tmp_path: Path) -> None:
    root, names = generated
    assert sni.write_tasks(tmp_path, n_tasks=N_TASKS, instances_per_task=N_INSTANCES, seed=0) == names
    for path in sorted(root.rglob("*")):
        if path.is_file():
            assert (tmp_path / path.relative_to(root)).read_bytes() == path.read_bytes(), path


def test_a_task_does_not_depend_on_how_many_are_written(generated: tuple[Path, list[str]], tmp_path: Path) -> None:
    root, names = generated
    fewer = sni.write_tasks(tmp_path, n_tasks=2, instances_per_task=N_INSTANCES, seed=0)
    assert fewer[:2] == names[:2]
    assert (tmp_path / "tasks" / f"{names[1]}.json").read_bytes() == (root / "tasks" / f"{names[1]}.json").read_bytes()


def test_task_files_and_splits(generated: tuple[Path, list[str]]) -> None:
    root, names = generated
    assert len(names) == N_TASKS + 3 and len(set(names)) == len(names)
    assert sorted(p.stem for p in (root / "tasks").glob("*.json")) == sorted(names)
    splits = root / "splits" / "default"
    test = (splits / "test_tasks.txt").read_text(encoding="utf-8")
    train = (splits / "train_tasks.txt").read_text(encoding="utf-8")
    assert test.endswith("\n") and train.endswith("\n")
    assert test.splitlines() + train.splitlines() == names
    assert not set(test.splitlines()) & set(train.splitlines())
    for name in names:
        assert re.fullmatch(r"task\d+_[a-z0-9_]+", name)


def test_format_ids_and_labels(generated: tuple[Path, list[str]]) -> None:
    root, names = generated
    for name in names:
        raw = (root / "tasks" / f"{name}.json").read_text(encoding="utf-8")
        task = json.loads(raw)
        assert json.dumps(task, indent=4, ensure_ascii=False) == raw  # the real files' serialization
        assert list(task) == list(sni.KEY_ORDER)
        number = name.split("_", 1)[0]
        assert len(task["Instances"]) == N_INSTANCES
        for inst in task["Instances"]:
            assert re.fullmatch(rf"{number}-[0-9a-f]{{32}}", inst["id"])
            assert len(inst["output"]) == 1 and isinstance(inst["output"][0], str)
        tpl = sni.task_template(name)
        if tpl.classification:
            outputs = Counter(i["output"][0] for i in task["Instances"])
            assert set(outputs) == set(tpl.labels), name
            for example in task["Positive Examples"]:
                assert example["output"] in tpl.labels
                assert sni.rule_label(name, example["input"]) == example["output"]
            for example in task["Negative Examples"]:
                assert sni.rule_label(name, example["input"]) != example["output"]


def test_labels_follow_the_stated_rule_up_to_the_noise(generated: tuple[Path, list[str]]) -> None:
    root, names = generated
    for name in names:
        tpl = sni.task_template(name)
        if not tpl.classification:
            continue
        instances = _load(root, name)["Instances"]
        agree = sum(sni.rule_label(name, i["input"]) == i["output"][0] for i in instances) / len(instances)
        assert abs(agree - (1 - tpl.noise)) < 0.05, (name, agree)
        counts = Counter(i["output"][0] for i in instances)
        for label, p in zip(tpl.labels, tpl.prior, strict=True):
            expected = p * (1 - tpl.noise) + (1 - p) * tpl.noise / (len(tpl.labels) - 1)
            assert abs(counts[label] / len(instances) - expected) < 0.1, (name, label)


def test_label_sets_are_varied_and_the_filter_has_something_to_reject(generated: tuple[Path, list[str]]) -> None:
    root, names = generated
    tasks = {n: _load(root, n) for n in names}
    label_sets = {
        frozenset(o for i in t["Instances"] for o in i["output"]) for t in tasks.values() if _classification(t)
    }
    for expected in ({"Yes", "No"}, {"positive", "negative"}, {"A", "B"}, {"1", "0"}, {"A", "B", "C"}):
        assert expected in label_sets
    assert any(len(s) == 4 for s in label_sets)
    assert sum(t["Input_language"] != ["English"] for t in tasks.values()) >= 1
    test_names = (root / "splits" / "default" / "test_tasks.txt").read_text(encoding="utf-8").splitlines()
    assert any(not _classification(tasks[n]) for n in test_names)


def test_layout_matches_the_real_task_files(generated: tuple[Path, list[str]], shared_data: Path) -> None:
    root, names = generated
    real_files = sorted((shared_data / "sni" / "tasks").glob("*.json"))
    assert real_files
    ours = _load(root, names[0])
    for path in real_files:
        raw = path.read_text(encoding="utf-8")
        real = json.loads(raw)
        assert json.dumps(real, indent=4, ensure_ascii=False) == raw
        assert list(real) == list(ours)
        for key, value in real.items():
            assert isinstance(value, list) and isinstance(ours[key], list), key
            if value and ours[key]:
                assert type(value[0]) is type(ours[key][0]), key
                if isinstance(value[0], dict):
                    assert list(value[0]) == list(ours[key][0]), key
        number = path.name.split("_", 1)[0]
        assert all(re.fullmatch(rf"{number}-[0-9a-f]{{32}}", i["id"]) for i in real["Instances"])
    for split in ("test_tasks.txt", "train_tasks.txt"):
        text = (shared_data / "sni" / "splits" / "default" / split).read_text(encoding="utf-8")
        assert text.endswith("\n") and all(re.fullmatch(r"task\d+_[\w.-]+", line) for line in text.splitlines())


def test_input_templates_file_gives_the_demo_a_multipart_task_whose_dc_inputs_keep_its_markers(
    generated: tuple[Path, list[str]], tmp_path: Path, shared_data: Path
) -> None:
    """The demo's DC difference must reach the template path (issue 17): the generated premise/options
    and object/part tasks carry the real COPA (task1393) and meronym (task1584) templates in the
    study's CSV layout, and their DC inputs under ``paper`` keep those markers in order."""
    from unsure.labelbias import prompts, tasks

    root, names = generated
    path = tmp_path / "classification_task_input_templates.csv"
    written = sni.write_input_templates(path, n_tasks=N_TASKS)
    assert written == [n for n in names if sni.task_template(n) in sni.CATALOGUE]
    assert path.read_text(encoding="utf-8").startswith("task,template\n")
    templates = prompts.read_templates(path)
    real = prompts.read_templates(shared_data / "sni" / "task_info" / "classification_task_input_templates.csv")
    copa = next(n for n in names if "premise_option_selection" in n)
    part = next(n for n in names if "object_part_classification" in n)
    assert templates[prompts.task_number(copa)] == real["task1393"]
    assert templates[prompts.task_number(part)] == real["task1584"]
    multipart = [n for n in written if templates[prompts.task_number(n)].count(prompts.TEMPLATE_SLOT) >= 2]
    assert copa in multipart and part in multipart and len(multipart) < len(written)
    for name in multipart:
        task = tasks.read_task(root / "tasks" / f"{name}.json")
        drawn = tasks.draw_instances(task, n_eval=100, n_heldout=8, n_pool=16, seed=0)
        template = templates[prompts.task_number(name)]
        markers = [m for m in template.split(prompts.TEMPLATE_SLOT) if m.strip()]
        evals = drawn.loc[drawn["split"] == "eval", "input"].tolist()
        for text in evals:  # every generated input follows its template
            assert all(m in text for m in markers), (name, text)
        items = prompts.build_items(
            drawn, shots=[0], sets=1, content_free=["N/A"], n_domain=10, seed=0, protocol="paper", templates=templates
        )
        plain = prompts.build_items(
            drawn, shots=[0], sets=1, content_free=["N/A"], n_domain=10, seed=0, protocol="paper", templates={}
        )
        dc = items.loc[items["kind"] == "dc", "input"].tolist()
        for text in dc:
            at = [text.find(m) for m in markers]
            assert -1 not in at and at == sorted(at), (name, text)
            assert all(text.count(m) == 1 for m in markers), (name, text)
        # without the file the markers' words are drawn among the others, so the inputs differ
        assert dc != plain.loc[plain["kind"] == "dc", "input"].tolist()

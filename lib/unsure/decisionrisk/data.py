"""The four multiple-choice benchmarks as (prompt, choices, gold index), and risk injection.

One loader per benchmark reads the official training or validation files
(the layouts of :mod:`unsure.generate.mcqa`, which the downloads and the
generator share). Every instance becomes one row with a stable ``row_id``
(``<benchmark>-<split>-<line>``), the ``prompt``, the ``choices`` and the
gold ``label`` (0-based). A risk-injected copy keeps the original id plus the
function's name (``<row_id>-NQ``) and is marked not ``answerable``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from unsure.generate.mcqa import prompt_and_choices

SPLIT_FILES: dict[str, dict[str, tuple[str, str | None]]] = {
    "hellaswag": {"train": ("hellaswag_train.jsonl", None), "val": ("hellaswag_val.jsonl", None)},
    "piqa": {"train": ("train.jsonl", "train-labels.lst"), "val": ("valid.jsonl", "valid-labels.lst")},
    "siqa": {"train": ("train.jsonl", "train-labels.lst"), "val": ("dev.jsonl", "dev-labels.lst")},
    "anli": {"train": ("train.jsonl", "train-labels.lst"), "val": ("dev.jsonl", "dev-labels.lst")},
}
"""Per benchmark and split: the items file and the labels file (HellaSwag keeps labels inline)."""

LABEL_BASE = {"hellaswag": 0, "piqa": 0, "siqa": 1, "anli": 1}
"""What the first choice is called in the labels: Social IQa and aNLI count from 1."""

INJECTIONS = ("NQ", "WQ", "NRA")
ORIGINAL = "none"
"""The ``injection`` value of an original, answerable instance."""

COLUMNS = ["row_id", "benchmark", "split", "prompt", "choices", "label", "category"]


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    items = []
    with open(path, encoding="utf-8") as f:
        try:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    items.append(json.loads(line))
                except json.JSONDecodeError as err:
                    raise ValueError(f"{path}, line {n}: not valid JSON ({err.msg})") from None
        except UnicodeDecodeError as err:
            raise ValueError(f"{path}: not UTF-8 text ({err.reason}); the official files are UTF-8") from None
    if not items:
        raise ValueError(f"{path}: no instances (an empty file)")
    return items


def _read_labels(path: Path) -> list[int]:
    try:
        lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not UTF-8 text ({err.reason})") from None
    bad = next((i for i, v in enumerate(lines) if not v.lstrip("-").isdigit()), None)
    if bad is not None:
        raise ValueError(f"{path}, line {bad + 1}: label {lines[bad]!r} is not an integer")
    return [int(v) for v in lines]


def load_benchmark(raw_dir: str | Path, benchmark: str, split: str) -> pd.DataFrame:
    """One split of a benchmark from its official files in ``raw_dir``.

    Raises:
        ValueError: unknown benchmark or split, a missing file, labels that do
            not line up with the items or point outside the choices (naming the
            file and line).
    """
    if benchmark not in SPLIT_FILES:
        raise ValueError(f"unknown benchmark {benchmark!r}; known: {', '.join(SPLIT_FILES)}")
    if split not in ("train", "val"):
        raise ValueError(f"split must be 'train' or 'val', got {split!r}")
    items_name, labels_name = SPLIT_FILES[benchmark][split]
    items_path = Path(raw_dir) / items_name
    if not items_path.is_file():
        raise ValueError(f"{benchmark} {split}: {items_path} does not exist (see workflow/rules/data.smk)")
    items = _read_jsonl(items_path)
    if labels_name is None:
        missing = next((i for i, item in enumerate(items) if "label" not in item), None)
        if missing is not None:
            raise ValueError(f"{items_path}, line {missing + 1}: no 'label' (the test split has none)")
        labels, labels_path = [int(item["label"]) for item in items], items_path
    else:
        labels_path = Path(raw_dir) / labels_name
        if not labels_path.is_file():
            raise ValueError(f"{benchmark} {split}: {labels_path} does not exist")
        labels = [v - LABEL_BASE[benchmark] for v in _read_labels(labels_path)]
        if len(labels) != len(items):
            raise ValueError(f"{labels_path}: {len(labels)} labels for {len(items)} items in {items_path}")
    rows = []
    for i, (item, label) in enumerate(zip(items, labels, strict=True)):
        try:
            prompt, choices = prompt_and_choices(benchmark, item)
        except KeyError as err:
            raise ValueError(f"{items_path}, line {i + 1}: missing key {err}") from None
        if not 0 <= label < len(choices):
            raise ValueError(f"{labels_path}, line {i + 1}: label {label} outside the {len(choices)} choices")
        category = item.get("activity_label") if benchmark == "hellaswag" else None
        rows.append((f"{benchmark}-{split}-{i}", benchmark, split, prompt, choices, label, category))
    return pd.DataFrame(rows, columns=COLUMNS)


def sample(frame: pd.DataFrame, n: int, *, seed: int) -> pd.DataFrame:
    """At most ``n`` rows drawn without replacement (seeded), in their original order."""
    if len(frame) <= n:
        return frame.reset_index(drop=True)
    keep = np.sort(np.random.default_rng(seed).choice(len(frame), size=n, replace=False))
    return frame.iloc[keep].reset_index(drop=True)


def _others(n: int, rng: np.random.Generator) -> np.ndarray:
    """For each position, a different position (a random derangement-like draw)."""
    if n < 2:
        raise ValueError("risk injection needs at least two instances to borrow from")
    shift = rng.integers(1, n, size=n)
    out: np.ndarray = (np.arange(n) + shift) % n
    return out


def inject(frame: pd.DataFrame, name: str, *, seed: int) -> pd.DataFrame:
    """A risk-injected copy of every instance of ``frame`` (one benchmark and split).

    * ``NQ`` (no question): the prompt becomes the empty string;
    * ``WQ`` (wrong question): the prompt of another instance (one whose
      prompt differs, when any does);
    * ``NRA`` (no right answer): the gold choice is replaced by a choice of
      another instance, so no choice is correct (``label`` becomes -1).

    The borrowed instance is drawn from ``seed`` and the function's name, so a
    rerun injects identically.
    """
    if name not in INJECTIONS:
        raise ValueError(f"unknown injection {name!r}; known: {', '.join(INJECTIONS)}")
    rng = np.random.default_rng([seed, INJECTIONS.index(name)])
    out = frame.copy()
    out["row_id"] = frame["row_id"] + f"-{name}"
    prompts = frame["prompt"].tolist()
    if name == "NQ":
        out["prompt"] = ""
    elif name == "WQ":
        donors = _others(len(frame), rng)
        for same in np.flatnonzero([prompts[d] == p for d, p in zip(donors, prompts, strict=True)]):
            differ = [j for j, q in enumerate(prompts) if q != prompts[same]]
            if differ:
                donors[same] = differ[int(rng.integers(len(differ)))]
        out["prompt"] = [prompts[d] for d in donors]
    else:
        donors = _others(len(frame), rng)
        choices = frame["choices"].tolist()
        replaced = []
        for i, (original, gold) in enumerate(zip(choices, frame["label"], strict=True)):
            own = list(original)
            pool = [c for c in choices[donors[i]] if c not in own] or [c for cs in choices for c in cs if c not in own]
            if not pool:
                raise ValueError(f"NRA: no choice outside instance {frame['row_id'].iloc[i]!r} to replace the gold")
            own[int(gold)] = pool[int(rng.integers(len(pool)))]
            replaced.append(own)
        out["choices"] = replaced
        out["label"] = -1
    out["injection"] = name
    out["answerable"] = False
    return out


def with_injections(frame: pd.DataFrame, injections: tuple[str, ...], *, seed: int) -> pd.DataFrame:
    """The original instances (``injection`` ``none``, answerable) followed by each injected copy."""
    original = frame.assign(injection=ORIGINAL, answerable=True)
    parts = [original] + [inject(frame, name, seed=seed) for name in injections]
    return pd.concat(parts, ignore_index=True)

"""Running Snakemake as a user does, on a throwaway copy of the workflow."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))


def snakemake(*args: str, cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "UNSURE_SLURM_PARTITION": "debug"}
    return subprocess.run([SNAKEMAKE, *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=timeout)


def jobs(out: str) -> dict[str, int]:
    """The job counts table of a dry run."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("job ")) + 2
    counts: dict[str, int] = {}
    for line in lines[start:]:
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            break
        counts[parts[0]] = int(parts[1])
    return counts


def stand_in_outputs(checkout: Path, summary: str) -> list[list[str]]:
    """Empty stand-ins for every output a ``--summary`` lists (folders for directory outputs),
    so that ``--touch`` can mark them done; the summary's rows (path, date, rule, ...)."""
    rows = [line.split("\t") for line in summary.splitlines()[1:] if "\t" in line]
    for path, _, rule, *_ in rows:
        target = checkout / path
        if rule == "zoo_model" or path.endswith(("/encoders", "/tuned")):
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.touch()
    return rows


UNTRAINED = "config/untrained.yaml"
"""The overlay that keeps the zoo's models random: tests of plumbing need no trained model."""


def untrained(raw: dict[str, Any]) -> dict[str, Any]:
    """A raw config with the zoo's training off, its models' own included (they build in seconds)."""
    zoo = raw.setdefault("zoo", {})
    zoo["training"] = None
    for spec in zoo.get("models", {}).values():
        spec.pop("training", None)
    return raw


def build_demo_zoo(root: Path) -> dict[str, Path]:
    """Every zoo model of ``config/demo.yaml`` with its training off (``config/untrained.yaml``),
    built as rule ``zoo_model`` builds it (a build is byte-identical across processes:
    ``tests/test_zoo.py``), into ``root/<name>``."""
    from unsure.config import load_config
    from unsure.zoo.build import build, training_texts

    demo = load_config(REPO / "config" / "demo.yaml").zoo
    texts = training_texts(seed=demo.seed, n_sentences=demo.corpus_sentences)
    # bases before their instruct variants, which start from the base's folder (as the rule's input)
    for name, spec in sorted(demo.models.items(), key=lambda item: item[1].base is not None):
        base = root / spec.base if spec.base else None
        build(name, spec, texts if spec.trains_tokenizer else [], root / name, zoo_seed=demo.seed, base=base)
    return {name: root / name for name in demo.models}


def install_demo_zoo(checkout: Path, built: dict[str, Path], raw: dict[str, Any] | None = None) -> None:
    """Copy the session's untrained demo zoo (:func:`build_demo_zoo`) into ``checkout``'s
    ``resources/models``, so that a workflow run there finds its models built, as after an
    earlier run; ``raw``, the config the run uses, must build its zoo exactly as they were."""
    if raw is not None:
        demo = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())["zoo"]
        assert raw["zoo"] == untrained({"zoo": demo})["zoo"], (
            "the config's zoo is not the demo's with its training off: its models are not the session's"
        )
    for name, folder in built.items():
        shutil.copytree(folder, checkout / "resources" / "models" / name)


def copy_workflow(dest: Path) -> Path:
    """A copy of the workflow without resources/ or results/, so runs cannot touch the real tree."""
    shutil.copytree(
        REPO,
        dest,
        ignore=shutil.ignore_patterns(".venv", ".git", "resources", "results", ".snakemake", ".shadow", "*cache*"),
    )
    return dest

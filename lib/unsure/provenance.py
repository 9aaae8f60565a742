"""What produced a study's results: the weights, the code, the packages and the config slice.

Written beside every study's tables (``results/<study>/provenance.json``) and shown
in the report, so that a number always says which model revision, which project
commit and which settings made it.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from unsure.config import Config

PACKAGES = (
    "torch",
    "transformers",
    "peft",
    "accelerate",
    "tokenizers",
    "openai",
    "numpy",
    "pandas",
    "scikit-learn",
    "xgboost",
    "gensim",
    "nltk",
    "scipy",
    "snakemake",
)
"""The packages whose version can change a study's numbers."""


def study_settings(config: Config, study: str) -> dict[str, Any]:
    """The slice of ``config`` a study's results depend on: its section, its models'
    entries, the data sources and the seeds (plain JSON values, comparable across runs)."""
    models = config.study_models(study)
    return {
        "seed": config.seed,
        "study": getattr(config.studies, study).model_dump(mode="json"),
        "models": {name: entry.model_dump(mode="json") for name, entry in models.items()},
        "data": config.data.model_dump(mode="json"),
        "zoo": config.zoo.model_dump(mode="json") if any(m.zoo_name for m in models.values()) else None,
    }


def provenance(
    config: Config, study: str, *, weights: Mapping[str, Mapping[str, str]], repo: str | Path = "."
) -> dict[str, Any]:
    """The provenance record of ``study`` (see the module docstring).

    ``weights``: the identity of each of the study's models' weights
    (:func:`unsure.engine.identity.model_identity`, which the engine owns);
    every model of the study must have one.
    """
    section = getattr(config.studies, study)
    models = config.study_models(study)
    missing = sorted(set(models) - set(weights))
    if missing:
        raise ValueError(f"provenance of {study}: no weights identity for model(s) {', '.join(missing)}")
    return {
        "study": study,
        "protocol": getattr(section, "protocol", None),
        "project_commit": project_commit(repo),
        "models": {name: dict(weights[name]) for name in models},
        "packages": package_versions(),
        "settings": study_settings(config, study),
    }


def package_versions() -> dict[str, str | None]:
    """Installed version of each of :data:`PACKAGES` (``None``: not installed)."""
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def project_commit(repo: str | Path = ".") -> str:
    """The project's git commit, ``+dirty`` when tracked files differ from it; ``unknown`` outside git."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True, timeout=30
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=repo,
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")

"""Obtaining the raw files of a source that arrives as several files.

Downloads and local copies land in the same layout as the generators write,
so everything downstream reads one layout whatever ``data.<source>.source``
says. Single-file sources go straight through :func:`unsure.sources.obtain`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from unsure import sources
from unsure.download import copy_local
from unsure.io import atomic_dir, write_text

log = logging.getLogger(__name__)

MCQA_FILES = {
    "hellaswag": ["hellaswag_train.jsonl", "hellaswag_val.jsonl"],
    "piqa": ["train.jsonl", "train-labels.lst", "valid.jsonl", "valid-labels.lst"],
    "siqa": ["train.jsonl", "train-labels.lst", "dev.jsonl", "dev-labels.lst"],
    "anli": ["train.jsonl", "train-labels.lst", "dev.jsonl", "dev-labels.lst"],
}
"""The official file names of each benchmark's training and validation splits."""

TASK_LIST = "tasks.txt"
"""Written last into the SNI raw directory: the task files it holds, one per line."""


def obtain_mcqa(benchmark: str, out_dir: str | Path, *, local_dir: str | None, mirror: str | None = None) -> None:
    """Put one benchmark's official files into ``out_dir``.

    A local copy is ``<local_dir>/<benchmark>/<official file name>`` (for Social
    IQa and aNLI: the release zip's contents, or the zip itself); a mirror has
    the same layout under its base URL.
    """
    local = Path(local_dir, benchmark) if local_dir else None
    mirror = f"{mirror.rstrip('/')}/{benchmark}" if mirror else None
    with atomic_dir(out_dir) as tmp:
        if benchmark == "hellaswag":
            for src in (sources.hellaswag("train"), sources.hellaswag("val")):
                sources.obtain(src, tmp / src.filename, local_dir=local, mirror=mirror)
        elif benchmark == "piqa":
            for src in (
                sources.piqa("train"),
                sources.piqa_labels("train"),
                sources.piqa("valid"),
                sources.piqa_labels("valid"),
            ):
                sources.obtain(src, tmp / src.filename, local_dir=local, mirror=mirror)
        elif benchmark in ("siqa", "anli"):
            archive = sources.social_iqa() if benchmark == "siqa" else sources.anli()
            if local is not None and all((local / name).is_file() for name in MCQA_FILES[benchmark]):
                for member in archive.members:
                    copy_local(
                        local,
                        member.filename,
                        tmp / member.filename,
                        validate=member.validate,
                        config_key=archive.config_key,
                    )
            else:
                zip_path = sources.obtain(archive, tmp / archive.filename, local_dir=local, mirror=mirror)
                sources.extract(archive, zip_path, tmp)
                zip_path.unlink()
        else:
            raise ValueError(f"unknown benchmark {benchmark!r}; known: {', '.join(MCQA_FILES)}")
        missing = [name for name in MCQA_FILES[benchmark] if not (tmp / name).is_file()]
        if missing:
            raise RuntimeError(f"{benchmark}: the obtained files lack {', '.join(missing)}")


def obtain_sni(
    out_dir: str | Path, *, tasks: list[str], ref: str, local_dir: str | None, mirror: str | None = None
) -> None:
    """Put the official splits and the task files into ``out_dir`` (``tasks/``, ``splits/``).

    The task files fetched are :func:`sni_task_list`'s. Files already present
    from an interrupted run are validated and kept, so a rerun only fetches
    what is missing.
    """
    out = Path(out_dir)
    for split in ("train", "test"):
        src = sources.sni_split(split, ref=ref)
        dest = out / src.filename
        if not _valid(src, dest):
            sources.obtain(src, dest, local_dir=local_dir, mirror=mirror)
    wanted = sni_task_list(out, tasks)
    for i, task in enumerate(wanted):
        src = sources.sni_task(task, ref=ref)
        dest = out / src.filename
        if not _valid(src, dest):
            sources.obtain(src, dest, local_dir=local_dir, mirror=mirror)
        if (i + 1) % 100 == 0:
            log.info("SNI: %d of %d task files present", i + 1, len(wanted))
    write_text(out / TASK_LIST, "".join(f"{t}\n" for t in wanted))


def sni_task_list(root: str | Path, tasks: Sequence[str]) -> list[str]:
    """The SNI tasks to fetch: ``tasks`` (``data.sni.tasks``) when given, else every task of
    the default train and test splits under ``root``. Those splits leave out their excluded
    tasks, 33 of the label-bias study's among them, hence its list in the paper config."""
    if tasks:
        return list(tasks)
    names: set[str] = set()
    for split in ("train", "test"):
        path = Path(root) / sources.sni_split(split).filename
        names.update(line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    return sorted(names)


def _valid(src: sources.Source, path: Path) -> bool:
    if not path.is_file():
        return False
    try:
        src.validate(path)
    except ValueError:
        return False
    return True

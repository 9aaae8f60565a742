"""Atomic file output: a reader never sees a half-written file.

Every output of the workflow is written to a temporary sibling first and moved
into place with ``os.replace`` (atomic on POSIX within one file system), so a
killed job leaves either the old file or the new one, never a truncated one.

A write that the file system refuses (read-only, no permission, an immutable
folder, a full disk or quota) is a :class:`WriteError` naming the file, the
folder and what to do, not the library's errno line about a temporary file;
nothing written before is removed.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd


class WriteError(OSError):
    """The file system refused to write an output; the message names file, folder and remedy."""


class UnreadableFileError(ValueError):
    """A file the workflow wrote earlier cannot be read back (truncated or corrupt)."""


REFUSED = {
    errno.EROFS: "{folder} is on a read-only file system; remount it read-write, or run the workflow "
    "in a writable folder (snakemake --directory DIR)",
    errno.EACCES: "permission denied in {folder}; make it writable for this user (chmod u+w, chown), "
    "or run the workflow in a writable folder (snakemake --directory DIR)",
    errno.EPERM: "the system does not permit writing in {folder} (is it immutable? `lsattr -d {folder}` "
    "shows an i; `chattr -i {folder}` as root clears it)",
    errno.ENOSPC: "no space left on the device of {folder}; free space there (df -h {folder}) and rerun",
    errno.EDQUOT: "the disk quota of {folder} is used up; free space or raise the quota (quota -s) and rerun",
}
"""Errors of a write the user must fix outside the workflow, and what to say for each."""


def _refused_folder(err: OSError, target: Path, inside: Path | None) -> Path | None:
    """The folder in which the file system refused a write of ``target`` (its folder, its temporary
    sibling, or, with ``inside``, a file in that temporary folder), or ``None`` when ``err`` is not
    such a refusal (a body that cannot open one of its inputs is not a write error)."""
    if err.errno not in REFUSED:
        return None
    if err.filename is None:  # pyarrow's and write()'s errors name no file
        return target.parent if err.errno in (errno.ENOSPC, errno.EDQUOT) else None
    failed = Path(os.fsdecode(err.filename))
    temporary = failed.parent == target.parent and failed.name.startswith(f".{target.name}.")
    ours = failed == target or failed in target.parents or temporary
    if ours or (inside is not None and failed.is_relative_to(inside)):
        return failed.parent
    return None


@contextlib.contextmanager
def explained_writes(target: str | os.PathLike[str], *, inside: Path | None = None) -> Iterator[None]:
    """Re-raise a refused write of ``target`` (see :func:`_refused_folder`) as a :class:`WriteError`."""
    path = Path(target)
    try:
        yield
    except WriteError:
        raise
    except OSError as err:
        folder = _refused_folder(err, path, inside)
        if folder is None or err.errno is None:
            raise
        reason = REFUSED[err.errno].format(folder=folder)
        error = WriteError(f"cannot write {path}: {reason}; files written before are kept")
        error.errno = err.errno  # not strerror or filename: OSError's str() would show those instead
        raise error from None


def read_parquet(path: str | os.PathLike[str], **kwargs: Any) -> pd.DataFrame:
    """Read a parquet file the workflow wrote; a truncated or corrupt one is an error saying what to do."""
    try:
        return pd.read_parquet(path, **kwargs)
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as err:  # pyarrow's ArrowInvalid is a ValueError
        raise UnreadableFileError(
            f"{path}: not a readable parquet file, truncated or corrupt ({str(err).splitlines()[0]}); "
            "delete it and rerun: the job that writes it runs again"
        ) from None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], *, suffix: str | None = None) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; move it onto ``path`` on success.

    On an exception the temporary file is removed and ``path`` is untouched.
    ``suffix`` defaults to the target's suffix, so libraries that infer a format
    from the file name (pandas, matplotlib) still do.
    """
    target = Path(path)
    with explained_writes(target):
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(
            prefix=f".{target.name}.", suffix=target.suffix if suffix is None else suffix, dir=target.parent
        )
        os.close(fd)
    tmp = Path(tmp_name)
    try:
        with explained_writes(target):
            yield tmp
            os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it 0600; give it a normal file's mode
            os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()


def _ordinary_modes(folder: Path) -> None:
    """The modes the umask gives ordinary files and folders, on ``folder`` (mkdtemp makes it 0700)
    and on what was written in it: libraries that write through a temporary file of their own
    leave it 0600 (safetensors' model.safetensors), which other users of a shared project cannot read."""
    mask = _umask()
    os.chmod(folder, 0o777 & ~mask)
    for root, dirs, files in os.walk(folder):
        for name in dirs:
            os.chmod(Path(root) / name, 0o777 & ~mask)
        for name in files:
            path = Path(root) / name
            if not path.is_symlink():
                executable = os.stat(path).st_mode & 0o100
                os.chmod(path, (0o777 if executable else 0o666) & ~mask)


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary directory beside ``path``; swap it into place on success.

    An existing directory at ``path`` is replaced only after the new one is
    complete.
    """
    target = Path(path)
    with explained_writes(target):
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        with explained_writes(target, inside=tmp):
            yield tmp
            _ordinary_modes(tmp)
            if target.exists():
                old = target.with_name(f".{target.name}.old")
                shutil.rmtree(old, ignore_errors=True)
                os.replace(target, old)
                os.replace(tmp, target)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write UTF-8 text atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Write JSON atomically with sorted keys, so equal objects give equal bytes."""
    write_text(path, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def write_parquet(path: str | os.PathLike[str], frame: pd.DataFrame) -> None:
    """Write a data frame to parquet atomically (index dropped)."""
    with atomic_path(path) as tmp:
        frame.to_parquet(tmp, index=False)

"""File-safe slugs and atomic writes."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from unsure.io import atomic_dir, atomic_path, write_parquet, write_text
from unsure.paths import slug


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("meta-llama/Meta-Llama-3-8B", "meta-llama--Meta-Llama-3-8B"),
        ("../../etc/passwd", "etc--passwd"),
        ("/abs/path", "abs--path"),
        ("a b:c", "a-b-c"),
    ],
)
def test_slug_is_one_safe_component(name: str, expected: str) -> None:
    out = slug(name)
    assert out == expected
    assert "/" not in out and not out.startswith(".")


def test_slug_rejects_nothing_left() -> None:
    with pytest.raises(ValueError, match="file-safe"):
        slug("../")


def test_atomic_path_keeps_old_file_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    write_text(target, "old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("killed")
    assert target.read_text() == "old"
    assert list(tmp_path.iterdir()) == [target]


def test_atomic_dir_replaces_only_when_complete(tmp_path: Path) -> None:
    target = tmp_path / "d"
    with atomic_dir(target) as tmp:
        (tmp / "a").write_text("1")
    with pytest.raises(RuntimeError), atomic_dir(target) as tmp:
        (tmp / "b").write_text("2")
        raise RuntimeError("killed")
    assert sorted(p.name for p in target.iterdir()) == ["a"]
    with atomic_dir(target) as tmp:
        (tmp / "c").write_text("3")
    assert sorted(p.name for p in target.iterdir()) == ["c"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]


def test_write_parquet_roundtrip(tmp_path: Path) -> None:
    frame = pd.DataFrame({"row_id": [1, 2], "score": [0.25, 0.75]})
    write_parquet(tmp_path / "x.parquet", frame)
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "x.parquet"), frame)


def test_atomic_outputs_get_the_modes_the_umask_gives_ordinary_ones(tmp_path: Path) -> None:
    """Directories written atomically were mode 0700 (mkdtemp's), and the weights safetensors
    writes into them 0600 (its own temporary file's): other users of a shared project
    directory could not read a model the zoo built or an adapter LoRA trained."""
    import os

    import torch
    from safetensors.torch import save_file

    old = os.umask(0o022)
    try:
        with atomic_dir(tmp_path / "d") as d:
            (d / "f").write_text("x")
            save_file({"w": torch.zeros(2)}, str(d / "model.safetensors"))
            (d / "sub").mkdir(mode=0o700)
        write_text(tmp_path / "t.txt", "x")
    finally:
        os.umask(old)
    assert (tmp_path / "d").stat().st_mode & 0o777 == 0o755
    assert (tmp_path / "d" / "sub").stat().st_mode & 0o777 == 0o755
    assert (tmp_path / "d" / "model.safetensors").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "t.txt").stat().st_mode & 0o777 == 0o644

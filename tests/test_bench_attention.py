"""bench/attention.py on a CPU at the tiny shape: FlexAttention's block mask is the engine's packed mask."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from workflow_helpers import REPO


def test_flex_block_mask_reproduces_the_engines_packed_attention(tmp_path: Path) -> None:
    out = tmp_path / "attention.md"
    run = subprocess.run(
        [sys.executable, "-m", "bench.attention", "--device", "cpu", "--shapes", "tiny", "--widths", "128",
         "--rows", "3", "--repeats", "1", "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-5000:]
    rows = [
        line.strip("| ").split(" | ") for line in out.read_text().splitlines() if line.startswith(("| risk", "| label"))
    ]
    assert [r[0] for r in rows] == ["risk scores", "label scores"]
    for row in rows:  # dense, flex and flex padded (a width of 128 needs no padding) against the float32 dense
        dense, flex, flex_padded = float(row[4]), float(row[7]), float(row[10])
        assert dense == 0.0 and flex < 1e-5 and flex_padded < 1e-5, row

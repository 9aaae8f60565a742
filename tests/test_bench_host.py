"""bench/host.py end to end at tiny sizes, with Llama-3's real tokenizer: every request kind gets a row
whose host time is the total less the model's, over the runs asked for."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from workflow_helpers import REPO

TOKENIZER = REPO.parent / "shared" / "data" / "tokenizers" / "llama-3-8b-instruct"


def test_host_bench_times_every_request_kind_over_its_runs(tmp_path: Path) -> None:
    if not (TOKENIZER / "tokenizer.json").is_file():
        pytest.skip(f"real tokenizer not available: {TOKENIZER}")
    out = tmp_path / "engine-host.md"
    run = subprocess.run(
        [sys.executable, "-m", "bench.host", "--tokenizer", str(TOKENIZER), "--rows", "4", "--contexts", "8",
         "--samples", "20", "--repeats", "3", "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-5000:]
    header, _, *rows = out.read_text().splitlines()
    assert "range over 3 runs" in header
    kinds = [row.split("|")[1].strip() for row in rows]
    assert kinds == [
        "risk scores",
        "label scores",
        "label scores, 8 prompts a task",
        "numeric answers",
        "word sampling",
    ]
    for row in rows:
        cells = [c.strip() for c in row.split("|")[2:-1]]
        tokens, cpu, model, host = int(cells[0].replace(",", "")), *map(float, cells[1:4])
        low, high = map(float, cells[6].split("-"))
        assert tokens > 0 and 0 < model < cpu and host == pytest.approx(cpu - model, abs=2e-3)
        assert low <= float(cells[5]) <= high

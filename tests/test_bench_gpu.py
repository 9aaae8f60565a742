"""bench/gpu.py end to end on a CPU: the tiny shape, tiny sizes, Llama-3's real tokenizer, every peer.

So that the GPU benchmark is ready whenever a GPU is at hand (``bash bench/gpu_run.sh`` there).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from workflow_helpers import REPO

TOKENIZER = REPO.parent / "shared" / "data" / "tokenizers" / "llama-3-8b-instruct"
KINDS = ("risk_scores", "label_scores", "word_sampling", "numeric")


@pytest.fixture
def tokenizer() -> Path:
    if not (TOKENIZER / "tokenizer.json").is_file():
        pytest.skip(f"real tokenizer not available: {TOKENIZER}")
    return TOKENIZER


def test_gpu_bench_runs_end_to_end_on_a_cpu_with_the_tiny_shape(tokenizer: Path, tmp_path: Path) -> None:
    out = tmp_path / "engine-gpu.md"
    sizes = ["--rows", "4", "--labels", "2", "--contexts", "1", "--samples", "8", "--numeric", "4"]
    peers = ["--folktexts-rows", "1", "--reference-rows", "2", "--lm-eval-batch-sizes", "2", "--budgets", "4096"]
    run = subprocess.run(
        [sys.executable, str(REPO / "bench" / "gpu.py"), "--device", "cpu", "--shapes", "tiny", "--dtype", "bfloat16",
         "--tokenizer", str(tokenizer), "--out", str(out), "--workdir", str(tmp_path), *sizes, *peers],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-5000:]
    assert "Traceback" not in run.stderr, run.stderr[-5000:]  # a peer's failure is caught, so look for it

    result = json.loads(out.with_suffix(".json").read_text())
    assert result["device_type"] == "cpu" and result["device"].startswith("CPU")
    assert result["peak_tflops"] > 0 and result["vocab_size"] == 128_256 and result["date"]
    tiny = result["shapes"]["tiny"]
    assert tiny["dtype"] == "bfloat16" and list(tiny["workloads"]) == list(KINDS)
    for kind, w in tiny["workloads"].items():
        for call in ("first", "steady"):
            assert w[call]["rate"] > 0 and 0 < w[call]["mfu"] < 1, (kind, call)
        assert result["mfu"]["tiny"][kind] == w["steady"]["mfu"]
    # bf16 against the float32 forward of the same weights: rounding, not a different computation
    for kind in ("risk_scores", "label_scores", "numeric"):
        a = tiny["workloads"][kind]["agreement"]
        assert a["n"] > 0 and 0 <= a["median"] <= a["max"], (kind, a)
    assert tiny["workloads"]["risk_scores"]["agreement"]["max"] < 1e-2
    named = {p["name"]: p for w in tiny["workloads"].values() for p in w["peers"]}
    folktexts = named["folktexts predict_proba (batch 16)"]
    lm_eval = named["lm-eval loglikelihood (batch 2)"]
    assert folktexts["rate"] > 0 and folktexts["agreement"]["max"] < 1e-2, folktexts
    assert "prompts differ" not in folktexts["note"]  # protocol: paper asks what folktexts asks
    assert lm_eval["rate"] > 0 and lm_eval["agreement"]["n"] == tiny["workloads"]["label_scores"]["agreement"]["n"]
    assert named["HF generate"]["rate"] > 0 and "chi-square p" in named["HF generate"]["note"]
    assert list(tiny["budgets"]) == ["4096"]
    decoding = tiny["decoding"]  # numeric answers' second greedy step, what CUDA graphs could speed up
    assert decoding["one_step_s"] > 0 and decoding["two_steps_s"] > 0, decoding
    assert decoding["share"] == pytest.approx(1 - decoding["one_step_s"] / decoding["two_steps_s"])

    # bench/scale.py reads the record: the tiny shape's MFU per request kind, its device named
    sys.path.insert(0, str(REPO / "bench"))
    import scale

    measured = scale.Utilisation.read(out.with_suffix(".json"))
    assert measured.device == result["device"] and measured.of("numeric", 8e9) == result["mfu"]["tiny"]["numeric"]

    table = out.read_text()
    rows = [line for line in table.splitlines() if line.startswith("| tiny |")]
    assert len(rows) == len(KINDS) + 2  # a row per workload, the budget sweep and the MFU summary
    for what in ("risk scores", "label scores", "word sampling", "numeric answers"):
        (row,) = [r for r in rows if what in r]
        assert "%" in row, row  # MFU
        assert re.search(r"chi-square p" if what == "word sampling" else r"\de[+-]\d\d / ", row), row  # agreement
    assert "folktexts" in table and "lm-eval" in table and "HF generate" in table
    assert "Decoding's share of numeric answers (steady; the same prompts with 1 and 2 greedy steps): tiny " in table

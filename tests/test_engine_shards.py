"""Sharding and resume: the scores do not depend on K or on a SIGKILL mid-shard."""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from unsure.engine import ContinuationRequest
from unsure.engine.hf import HFEngine
from unsure.engine.shards import run_shard, select_shard, shard_of

SCORER = """
import logging, sys, time
import pandas as pd
from unsure.engine import ContinuationRequest
from unsure.engine.hf import HFEngine
from unsure.engine.shards import run_shard
from test_engine_shards import yes_no

from pathlib import Path
model, rows_path, out, shard, n_shards, delay, hold = sys.argv[1:8]
logging.basicConfig(level=logging.INFO)
engine = HFEngine(model)

scored = []

def score(chunk):
    time.sleep(float(delay))
    while scored and hold and Path(hold).exists():  # one chunk scored: go on once the test lets go
        time.sleep(0.05)
    scored.append(len(chunk))
    return yes_no(engine, chunk)

run_shard(pd.read_parquet(rows_path), score, out, shard=int(shard), n_shards=int(n_shards), chunk_rows=4,
          fingerprint={"model": model})
"""


def yes_no(engine: HFEngine, chunk: pd.DataFrame) -> pd.DataFrame:
    res = engine.continuation_scores([ContinuationRequest(t, (" yes", " no")) for t in chunk["text"]])
    return pd.DataFrame(
        {
            "row_id": chunk["row_id"].to_numpy(),
            "lp_yes": [r.logprob[0] for r in res],
            "lp_no": [r.logprob[1] for r in res],
        }
    )


@pytest.fixture
def rows(tmp_path: Path) -> Path:
    words = [
        "the",
        "old",
        "baker",
        "was",
        "brave",
        "they",
        "missed",
        "him",
        "inside",
        "jordan",
        "saw",
        "my",
        "dirty",
        "room",
    ]
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {"row_id": [f"r{i:03d}" for i in range(40)], "text": [" ".join(rng.choice(words, 6)) for _ in range(40)]}
    )
    path = tmp_path / "rows.parquet"
    frame.to_parquet(path)
    return path


def run(
    model: Path, rows: Path, out: Path, shard: int, n_shards: int, delay: float = 0.0, hold: Path | None = None
) -> subprocess.Popen[bytes]:
    """A scoring process; while ``hold`` exists it waits before each chunk after its first."""
    args = [sys.executable, "-c", SCORER, str(model), str(rows), str(out), str(shard), str(n_shards), str(delay)]
    args.append(str(hold or ""))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent)}
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)


def test_shard_membership_is_a_function_of_the_id_alone() -> None:
    ids = pd.Series([f"r{i}" for i in range(200)])
    full = shard_of(ids, 7)
    assert (shard_of(ids.iloc[50:120], 7) == full[50:120]).all()
    assert set(full) == set(range(7))


def test_shards_partition_the_rows() -> None:
    frame = pd.DataFrame({"row_id": range(100)})
    parts = [select_shard(frame, k, 4) for k in range(4)]
    assert sorted(pd.concat(parts)["row_id"]) == list(range(100))


def test_bad_rows_are_refused() -> None:
    with pytest.raises(ValueError, match="row_id"):
        select_shard(pd.DataFrame({"id": [1]}), 0, 1)
    with pytest.raises(ValueError, match="appears more than once"):
        select_shard(pd.DataFrame({"row_id": [1, 1]}), 0, 1)
    with pytest.raises(ValueError, match="at least 1"):
        select_shard(pd.DataFrame({"row_id": [1]}), 0, 0)


def test_one_shard_equals_four_and_a_killed_shard_resumes(
    tiny_models: dict[str, Path], rows: Path, tmp_path: Path
) -> None:
    model = tiny_models["llama"]
    engine = HFEngine(str(model))
    frame = pd.read_parquet(rows)

    def score(chunk: pd.DataFrame) -> pd.DataFrame:
        return yes_no(engine, chunk)

    fingerprint = {"model": str(model)}
    whole = run_shard(frame, score, tmp_path / "k1.parquet", shard=0, n_shards=1, chunk_rows=4, fingerprint=fingerprint)
    reference = whole.set_index("row_id").sort_index()
    parts = [
        run_shard(
            frame, score, tmp_path / f"k4-{k}.parquet", shard=k, n_shards=4, chunk_rows=4, fingerprint=fingerprint
        )
        for k in range(4)
    ]
    sharded = pd.concat(parts).set_index("row_id").sort_index()
    pd.testing.assert_frame_equal(sharded, reference, check_exact=False, atol=1e-6, rtol=0)

    # SIGKILL once some chunks are checkpointed, then rerun the same command.
    out = tmp_path / "killed.parquet"
    chunks = out.with_name(out.name + ".chunks")
    proc = run(model, rows, out, 0, 1, delay=0.3)
    deadline = time.time() + 120
    while len(list(chunks.glob("chunk-*.parquet"))) < 3 and time.time() < deadline:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not out.exists(), "a killed shard must not leave an output"
    n_done = len(list(chunks.glob("chunk-*.parquet")))
    assert 3 <= n_done < 10
    rerun = run(model, rows, out, 0, 1)
    _, err = rerun.communicate()
    assert rerun.returncode == 0, err.decode()
    assert f"({n_done} of 10 chunks resumed)" in err.decode()
    resumed = pd.read_parquet(out).set_index("row_id").sort_index()
    pd.testing.assert_frame_equal(resumed, reference, check_exact=False, atol=1e-6, rtol=0)
    assert not chunks.exists()


def test_stale_chunks_are_not_reused(tiny_models: dict[str, Path], rows: Path, tmp_path: Path) -> None:
    frame = pd.read_parquet(rows)
    engine = HFEngine(str(tiny_models["gpt2"]))
    calls = []

    def score(chunk: pd.DataFrame) -> pd.DataFrame:
        calls.append(len(chunk))
        res = engine.continuation_scores([ContinuationRequest(t, (" a",)) for t in chunk["text"]])
        return pd.DataFrame({"row_id": chunk["row_id"].to_numpy(), "lp": [r.logprob[0] for r in res]})

    out = tmp_path / "s.parquet"
    chunk_dir = out.with_name(out.name + ".chunks")
    chunk_dir.mkdir()
    (chunk_dir / "fingerprint.json").write_text('{"model": "another"}')
    pd.DataFrame({"row_id": frame["row_id"].sort_values()[:4].to_numpy(), "lp": 0.0}).to_parquet(
        chunk_dir / "chunk-000000.parquet"
    )
    result = run_shard(frame, score, out, shard=0, n_shards=1, chunk_rows=4, fingerprint={"model": "this"})
    assert sum(calls) == 40
    assert (result["lp"] != 0.0).all()


def test_weights_rebuilt_at_the_same_path_are_never_mixed_into_a_resumed_shard(rows: Path, tmp_path: Path) -> None:
    """A fault tester killed a shard after 4 of 10 chunks, rebuilt the model at the same path
    with another zoo seed and reran: 40 of 100 rows kept the old model's scores, because the
    fingerprint covered the config entry and not the weights."""
    from unsure.config import Model, ZooModel
    from unsure.zoo.build import build, training_texts

    frame = pd.read_parquet(rows)
    spec = ZooModel(architecture="gpt2", vocab_size=400, hidden_size=32, layers=1, heads=2)
    texts = training_texts(seed=0, n_sentences=500)
    path = tmp_path / "resources" / "models" / "m"
    entry = Model(id=str(path), gpus=0)
    out = tmp_path / "s.parquet"

    def scorer(stop_after: int | None) -> Callable[[pd.DataFrame], pd.DataFrame]:
        engine, done = HFEngine(str(path)), []

        def score(chunk: pd.DataFrame) -> pd.DataFrame:
            if stop_after is not None and len(done) == stop_after:
                raise KeyboardInterrupt("killed")
            done.append(1)
            return yes_no(engine, chunk)

        return score

    build("m", spec, texts, path, zoo_seed=0)
    with pytest.raises(KeyboardInterrupt):
        run_shard(frame, scorer(4), out, shard=0, n_shards=1, chunk_rows=4, fingerprint={"m": "same"}, model=entry)
    assert len(list(out.with_name(out.name + ".chunks").glob("chunk-*.parquet"))) == 4

    build("m", spec, texts, path, zoo_seed=1)  # other weights, same path, same entry
    resumed = run_shard(frame, scorer(None), out, shard=0, n_shards=1, chunk_rows=4, fingerprint={"m": "same"},
                        model=entry)  # fmt: skip
    fresh = run_shard(frame, scorer(None), tmp_path / "fresh.parquet", shard=0, n_shards=1, chunk_rows=4,
                      fingerprint={"m": "same"}, model=entry)  # fmt: skip
    pd.testing.assert_frame_equal(resumed, fresh)


def test_discarded_chunks_name_what_changed(rows: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Chunks discarded after a model was rebuilt at the same path were blamed on "other
    settings"; the warning now names the fingerprint keys that changed, values shortened."""
    from unsure.config import Model

    frame = pd.read_parquet(rows)
    weights = tmp_path / "models" / "m"
    weights.mkdir(parents=True)
    (weights / "model.safetensors").write_bytes(b"old weights")
    entry, out, done = Model(id=str(weights), gpus=0), tmp_path / "s.parquet", []

    def score(chunk: pd.DataFrame) -> pd.DataFrame:
        if len(done) == 2:
            raise KeyboardInterrupt("killed")
        done.append(1)
        return pd.DataFrame({"row_id": chunk["row_id"].to_numpy(), "p": 0.5})

    settings = {"prompting": "numeric", "year": 2018}
    with pytest.raises(KeyboardInterrupt):
        run_shard(frame, score, out, shard=0, n_shards=1, chunk_rows=4, fingerprint=settings, model=entry)
    (weights / "model.safetensors").write_bytes(b"new weights")  # rebuilt at the same path
    done.clear()
    changed = {"prompting": "multiple_choice", "year": 2018}
    # another dtype changes the numbers; another GPU count does not, and is not named
    other = entry.model_copy(update={"dtype": "bfloat16", "gpus": 2})
    with caplog.at_level(logging.WARNING, logger="unsure.engine.shards"), pytest.raises(KeyboardInterrupt):
        run_shard(frame, score, out, shard=0, n_shards=1, chunk_rows=4, fingerprint=changed, model=other)
    (message,) = [r.getMessage() for r in caplog.records if "discarding" in r.getMessage()]
    assert message.startswith(f"discarding checkpointed chunks in {out}.chunks: changed since they were made: ")
    changes = message.split("made: ", 1)[1]
    assert re.fullmatch(
        r'model \(dtype: "auto" -> "bfloat16"\), prompting \("numeric" -> "multiple_choice"\), '
        r'weights \(files_sha256: "[0-9a-f]{19}…" -> "[0-9a-f]{19}…"\)',
        changes,
    ), changes


def test_a_second_process_on_a_running_shard_fails_at_once_naming_the_first(
    tiny_models: dict[str, Path], rows: Path, tmp_path: Path
) -> None:
    """After SIGKILL of a local controller its job ran on, and the rerun scored the same shard
    beside it; now the rerun's job stops at once and says which process holds the shard."""
    out = tmp_path / "s.parquet"
    chunks = out.with_name(out.name + ".chunks")
    hold = tmp_path / "hold"
    hold.touch()  # the first process scores until the second has tried, however slow its start
    first = run(tiny_models["gpt2"], rows, out, 0, 1, hold=hold)
    deadline = time.time() + 120
    while not list(chunks.glob("chunk-*.parquet")) and time.time() < deadline:
        time.sleep(0.05)
    second = run(tiny_models["gpt2"], rows, out, 0, 1)
    _, err = second.communicate(timeout=120)
    hold.unlink()
    assert second.returncode != 0
    assert f"this shard is being scored by process {first.pid}" in err.decode()
    _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err.decode()
    assert len(pd.read_parquet(out)) == 40 and not chunks.exists()

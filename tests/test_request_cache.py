"""The request cache: a rerun scores only rows never scored by the same weights, fingerprint and code."""

from __future__ import annotations

import hashlib
import importlib
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import unsure
from unsure.config import Model
from unsure.engine import ContinuationRequest
from unsure.engine.shards import RequestCache, code_digest, request_cache, run_shard

Scorer = Callable[[pd.DataFrame], pd.DataFrame]


def table(n: int) -> pd.DataFrame:
    """``n`` rows whose ids interleave with those of a smaller table (as a grown ``n_eval`` does)."""
    ids = [f"r{hashlib.sha256(str(i).encode()).hexdigest()[:6]}" for i in range(n)]
    return pd.DataFrame({"row_id": ids, "text": [f"person {i} earns" for i in range(n)]})


def counting(calls: list[int]) -> Scorer:
    """A scorer whose result is a function of the row alone (float, int and list columns)."""

    def score(chunk: pd.DataFrame) -> pd.DataFrame:
        calls.append(len(chunk))
        digest = [hashlib.sha256(t.encode()).digest() for t in chunk["text"]]
        return pd.DataFrame(
            {
                "row_id": chunk["row_id"].to_numpy(),
                "p": [int.from_bytes(d[:4], "little") / 2**32 for d in digest],
                "n": [d[4] for d in digest],
                "words": [[t.split()[0], str(d[5])] for t, d in zip(chunk["text"], digest, strict=True)],
            }
        )

    return score


def shard(rows: pd.DataFrame, score: Scorer, out: Path, cache: Path | None, **kw: object) -> pd.DataFrame:
    args: dict[str, Any] = {"shard": 0, "n_shards": 1, "chunk_rows": 8, "fingerprint": {"prompt": "v1"}} | kw
    return run_shard(rows, score, out, cache=cache, **args)


def test_a_grown_row_set_scores_only_the_new_rows_and_equals_a_fresh_run(tmp_path: Path) -> None:
    cache, calls = tmp_path / "cache", list[int]()
    shard(table(40), counting(calls), tmp_path / "a.parquet", cache)
    assert sum(calls) == 40
    calls.clear()
    shard(table(70), counting(calls), tmp_path / "b.parquet", cache)
    assert sum(calls) == 30, "only the 30 new rows are scored"
    fresh: list[int] = []
    shard(table(70), counting(fresh), tmp_path / "fresh.parquet", None)
    assert sum(fresh) == 70
    assert (tmp_path / "b.parquet").read_bytes() == (tmp_path / "fresh.parquet").read_bytes()

    calls.clear()  # another shard count: every row is in the cache, the scorer is not called
    parts = [shard(table(70), counting(calls), tmp_path / f"k{k}.parquet", cache, shard=k, n_shards=3)
             for k in range(3)]  # fmt: skip
    assert calls == []
    merged = pd.concat(parts).sort_values("row_id").reset_index(drop=True)
    want = pd.read_parquet(tmp_path / "fresh.parquet").sort_values("row_id").reset_index(drop=True)
    pd.testing.assert_frame_equal(merged, want)


def test_an_output_lost_after_the_merge_is_rebuilt_from_the_cache(tmp_path: Path) -> None:
    """Ctrl-C to Snakemake as a job ends leaves its output marked incomplete; the rerun deletes it
    before the job runs, and the chunks are gone: the cache must give the rows back."""
    cache, calls, out = tmp_path / "cache", list[int](), tmp_path / "s.parquet"
    shard(table(50), counting(calls), out, cache)
    first = out.read_bytes()
    out.unlink()
    calls.clear()
    shard(table(50), counting(calls), out, cache)
    assert calls == [] and out.read_bytes() == first


def test_a_changed_fingerprint_weights_or_row_is_scored_again(tmp_path: Path) -> None:
    cache, calls = tmp_path / "cache", list[int]()
    weights = tmp_path / "models" / "m"
    weights.mkdir(parents=True)
    (weights / "model.safetensors").write_bytes(b"seed 0")
    entry = Model(id=str(weights), gpus=0)
    shard(table(30), counting(calls), tmp_path / "a.parquet", cache, model=entry)
    assert sum(calls) == 30

    calls.clear()
    shard(table(30), counting(calls), tmp_path / "b.parquet", cache, model=entry, fingerprint={"prompt": "v2"})
    assert sum(calls) == 30, "another prompt: nothing from the cache"

    calls.clear()
    (weights / "model.safetensors").write_bytes(b"seed 1")  # other weights at the same path
    shard(table(30), counting(calls), tmp_path / "c.parquet", cache, model=entry)
    assert sum(calls) == 30, "other weights: nothing from the cache"

    calls.clear()
    changed = table(30)
    changed.loc[3, "text"] = "person 3 earns a lot"  # same id, another request
    shard(changed, counting(calls), tmp_path / "d.parquet", cache, model=entry)
    assert sum(calls) == 1

    calls.clear()
    shard(table(30), counting(calls), tmp_path / "e.parquet", None, model=entry)
    assert sum(calls) == 30, "cache off: every row scored"


def test_rows_keyed_on_what_they_send_miss_on_a_changed_prompt_word_or_dtype_and_hit_otherwise(
    tmp_path: Path,
) -> None:
    """Issue 29 item 2: a row's key is what it sends the engine (the study's request function),
    not what a hand-written fingerprint says: a changed prompt word misses the cache with the
    fingerprint and the rows unchanged, and so does another dtype; anything else hits."""
    from unsure.riskscores.scoring import make_scorer
    from unsure.riskscores.tasks import FOLKTABLES

    cache, calls, rows = tmp_path / "cache", list[int](), table(24)
    weights = tmp_path / "models" / "m"
    weights.mkdir(parents=True)
    (weights / "model.safetensors").write_bytes(b"seed 0")

    def run(name: str, year: int, dtype: str = "auto") -> None:
        asked = make_scorer(None, FOLKTABLES["ACSIncome"], "multiple_choice", year=year, instruct=False,
                            both_orders=True, protocol="corrected")  # fmt: skip
        entry = Model(id=str(weights), gpus=0, dtype=dtype)
        fingerprint = {"prompting": "multiple_choice"}  # says nothing of the year the prompts name
        shard(rows, counting(calls), tmp_path / f"{name}.parquet", cache, model=entry, fingerprint=fingerprint,
              requests=asked.requests)  # fmt: skip

    run("a", 2018)
    run("b", 2018)
    assert sum(calls) == 24, "the same requests: every row from the cache"
    run("c", 2017)  # the prompts ask about another year
    assert sum(calls) == 48, "a changed prompt word was answered from the cache"
    run("d", 2018, dtype="bfloat16")
    assert sum(calls) == 72, "another dtype was answered from the cache"
    run("e", 2017)
    assert sum(calls) == 72


def test_a_chat_models_reply_length_is_in_its_rows_keys(tmp_path: Path) -> None:
    """decisionrisk: the verbal question's reply length was a hand-written fingerprint entry; now
    it is part of what each row sends, and another length misses the cache."""
    from unsure.decisionrisk.infer import generative_scorer

    class Chat:
        def chat_prompt(self, user: str, *, system: str | None = None, prefill: str = "") -> str:
            return f"<user>{user}</user>{prefill}"

    rows = table(16).assign(prompt=lambda f: f["text"], choices=[("yes", "no")] * 16)
    calls: list[int] = []
    for name, tokens in (("a", 12), ("b", 12), ("c", 24)):
        asked = generative_scorer(Chat(), instruct=True, normalize=True, max_new_tokens=tokens)  # type: ignore[arg-type]
        shard(rows, counting(calls), tmp_path / f"{name}.parquet", tmp_path / "cache", requests=asked.requests)
    assert sum(calls) == 32, "another reply length was answered from the cache"


def test_a_positions_sampling_seed_and_count_are_in_its_key(tmp_path: Path) -> None:
    """nextword: another seed or sample count (hand-written fingerprint entries before) misses."""
    from unsure.nextword.inference import sample_scorer

    rows = table(16).assign(context=lambda f: f["text"])
    calls: list[int] = []
    for name, n, seed in (("a", 10, 0), ("b", 10, 0), ("c", 10, 1), ("d", 20, 1)):
        asked = sample_scorer(None, n=n, seed=seed)  # type: ignore[arg-type]  # requests need no engine
        shard(rows, counting(calls), tmp_path / f"{name}.parquet", tmp_path / "cache", requests=asked.requests)
    assert sum(calls) == 48, "another seed or count was answered from the cache"


def positions(n: int) -> pd.DataFrame:
    """``n`` nextword positions of one passage (``row_id`` as :func:`position_rows` makes it)."""
    return pd.DataFrame(
        {
            "row_id": [f"1-{i}" for i in range(n)],
            "text_id": 1,
            "word_num": range(n),
            "context": [f"a b {i}" for i in range(n)],
            "text": [f"a b {i}" for i in range(n)],  # what counting() scores
        }
    )


def surfaces(n: int, changed: dict[int, str] | None = None) -> pd.DataFrame:
    """A surface table (``text_id, word_num, surface``): two words per position, ``changed`` replacing the first."""
    words = [(i, (changed or {}).get(i, f"Word{i}")) for i in range(n)] + [(i, "the") for i in range(n)]
    return pd.DataFrame({"text_id": 1, "word_num": [i for i, _ in words], "surface": [w for _, w in words]})


class Splits:
    """A stand-in tokenizer: context words are their lengths, a continuation's tokens its letters' codes."""

    def split_pair(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        return [len(w) for w in context.split()], [ord(c) for c in continuation.strip()]


def test_a_positions_biased_support_and_nucleus_settings_are_in_its_key(tmp_path: Path) -> None:
    """nextword, biased estimator: nucleus, sample count and seed (hand-written fingerprint
    entries before) and each position's support (a file key before: reads=) key the rows; a
    changed surface in the samples misses only at its position, with the fingerprint unchanged."""
    from unsure.nextword.inference import biased_scorer

    rows, calls = positions(16), list[int]()

    def run(name: str, samples: pd.DataFrame, nucleus: tuple[float, ...] = (0.8,), n: int = 5, seed: int = 0) -> None:
        tables = {"samples": samples, "human": surfaces(16), "corpus": surfaces(16)}
        asked = biased_scorer(None, **tables, nucleus=nucleus, nucleus_samples=n, seed=seed)  # type: ignore[arg-type]
        out, cache = tmp_path / f"{name}.parquet", tmp_path / "cache"
        shard(rows, counting(calls), out, cache, fingerprint={"scorer": "biased"}, requests=asked.requests)

    run("a", surfaces(16))
    run("b", surfaces(16))
    assert sum(calls) == 16, "the same requests: every position from the cache"
    run("c", surfaces(16), nucleus=(0.9,))
    run("d", surfaces(16), n=6)
    run("e", surfaces(16), seed=1)
    assert sum(calls) == 64, "another nucleus, sample count or seed was answered from the cache"
    run("f", surfaces(16, {3: "Other"}))
    assert sum(calls) == 65, "a changed sample at one position: that position alone is scored again"


def test_a_positions_human_words_are_in_its_token_level_key(tmp_path: Path) -> None:
    """nextword, token level: the context's ids, the tokens read and the human words key each
    position (the fingerprint said ``modal_token`` and the human file was a file key: reads=);
    another word misses at its position even where its first token is read already."""
    from unsure.nextword.inference import token_scorer

    rows, calls = positions(16), list[int]()

    def run(name: str, human: pd.DataFrame) -> None:
        asked = token_scorer(Splits(), human.rename(columns={"surface": "word"}))  # type: ignore[arg-type]
        out, cache = tmp_path / f"{name}.parquet", tmp_path / "cache"
        shard(rows, counting(calls), out, cache, fingerprint={"scorer": "tokens"}, requests=asked.requests)

    run("a", surfaces(16))
    run("b", surfaces(16))
    assert sum(calls) == 16, "the same requests: every position from the cache"
    run("c", surfaces(16, {3: "Wordy", 5: "xylophone"}))  # same first token (W) at 3, another at 5
    assert sum(calls) == 18, "another human word was answered from the cache"


def test_a_killed_nextword_shards_chunks_are_discarded_when_its_support_changes(tmp_path: Path) -> None:
    """The biased estimator's checkpoint follows the positions' supports: chunks made with other
    samples never resume, though the fingerprint is the same."""
    from unsure.nextword.inference import biased_scorer

    rows, out, calls = positions(24), tmp_path / "s.parquet", list[int]()

    def asked(samples: pd.DataFrame) -> Callable[[pd.DataFrame], Any]:
        tables = {"samples": samples, "human": surfaces(24), "corpus": surfaces(24)}
        return biased_scorer(None, **tables, nucleus=(0.8,), nucleus_samples=5).requests  # type: ignore[arg-type]

    def dies_after_two(chunk: pd.DataFrame) -> pd.DataFrame:
        if len(calls) == 2:
            raise KeyboardInterrupt
        return counting(calls)(chunk)

    with pytest.raises(KeyboardInterrupt):
        shard(rows, dies_after_two, out, None, fingerprint={"scorer": "biased"}, requests=asked(surfaces(24)))
    assert len(list(out.with_name(out.name + ".chunks").glob("chunk-*.parquet"))) == 2
    calls.clear()
    shard(rows, counting(calls), out, None, fingerprint={"scorer": "biased"}, requests=asked(surfaces(24, {20: "New"})))
    assert sum(calls) == 24, "chunks made with the old support were resumed"


def test_the_nextword_scorers_send_what_their_keys_say() -> None:
    """The token level sends exactly the requests its key holds; the biased estimator its sampling
    requests, then a support request holding the key's surfaces and the sampled ones."""
    from unsure.engine import ContinuationScores, TokenLogprobs, WordSamples
    from unsure.nextword.inference import biased_scorer, token_scorer

    rows = positions(3)

    class Recorder(Splits):
        def __init__(self) -> None:
            self.sent: list[Any] = []

        def sample_words(self, requests: list[Any]) -> list[WordSamples]:
            self.sent += requests
            return [WordSamples(words=["Sampled"]) for _ in requests]

        def continuation_scores(self, requests: list[ContinuationRequest]) -> list[ContinuationScores]:
            self.sent += requests
            sizes = [len(r.continuations) for r in requests]
            return [ContinuationScores(np.zeros(k), np.ones(k, dtype=np.int64), np.zeros(k, dtype=bool)) for k in sizes]

        def token_logprobs(self, requests: list[Any]) -> list[TokenLogprobs]:
            self.sent += requests
            return [TokenLogprobs(np.zeros(len(r.read_ids)), 0, 0.0) for r in requests]

    engine = Recorder()
    tokens = token_scorer(engine, surfaces(3).rename(columns={"surface": "word"}))  # type: ignore[arg-type]
    tokens(rows)
    assert engine.sent == [key[0] for key in tokens.requests(rows)]

    engine.sent = []
    tables = {"samples": surfaces(3), "human": surfaces(3), "corpus": surfaces(3)}
    biased = biased_scorer(engine, **tables, nucleus=(0.7, 0.9), nucleus_samples=2)  # type: ignore[arg-type]
    biased(rows)
    keys = biased.requests(rows)
    sampling, support = engine.sent[:-3], engine.sent[-3:]
    assert sampling == [key[j] for j in range(3) for key in keys]  # per setting, every position
    for key, sent in zip(keys, support, strict=True):
        assert sent.context == key[-1].context
        assert sorted(sent.continuations) == sorted([*key[-1].continuations, " Sampled"])


def test_a_killed_shards_chunks_are_discarded_when_its_rows_send_other_requests(tmp_path: Path) -> None:
    """The checkpoint follows the requests too: chunks made with the old prompts never resume."""
    rows, out = table(24), tmp_path / "s.parquet"
    calls: list[int] = []

    def asking(word: str) -> Callable[[pd.DataFrame], list[tuple[ContinuationRequest]]]:
        return lambda chunk: [(ContinuationRequest(f"{t} {word}", (" yes", " no")),) for t in chunk["text"]]

    def dies_after_two(chunk: pd.DataFrame) -> pd.DataFrame:
        if len(calls) == 2:
            raise KeyboardInterrupt
        return counting(calls)(chunk)

    with pytest.raises(KeyboardInterrupt):
        shard(rows, dies_after_two, out, None, requests=asking("earns"))
    assert len(list(out.with_name(out.name + ".chunks").glob("chunk-*.parquet"))) == 2
    calls.clear()
    shard(rows, counting(calls), out, None, requests=asking("makes"))
    assert sum(calls) == 24, "chunks made with the old prompts were resumed"


def test_a_file_the_scorer_reads_is_part_of_the_key(tmp_path: Path) -> None:
    cache, calls = tmp_path / "cache", list[int]()
    human = tmp_path / "human.csv"
    human.write_text("a,b\n")
    shard(table(20), counting(calls), tmp_path / "a.parquet", cache, reads=[human])
    shard(table(20), counting(calls), tmp_path / "b.parquet", cache, reads=[human])
    assert sum(calls) == 20
    human.write_text("a,c\n")
    shard(table(20), counting(calls), tmp_path / "c.parquet", cache, reads=[human])
    assert sum(calls) == 40


def test_the_scorers_code_is_part_of_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An edited prompt template must not be answered by rows scored with the old one."""
    module = tmp_path / "my_scorer.py"
    module.write_text("def score(chunk):\n    return chunk\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    first = code_digest(importlib.import_module("my_scorer").score)
    module.write_text("def score(chunk):\n    return chunk.copy()\n")
    assert code_digest(importlib.import_module("my_scorer").score) != first
    from unsure.riskscores.scoring import make_scorer

    assert code_digest(make_scorer) != code_digest(counting([]))


def test_an_edit_to_a_rooms_figures_keeps_its_cache_and_one_to_its_prompts_starts_a_new_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key holds the code the scores depend on (the scorer's module and the room modules it
    imports), not the room's tables and figures: redrawing a figure never rescored a row."""
    room = tmp_path / "fakeroom"
    room.mkdir()
    (room / "__init__.py").write_text("")
    (room / "prompts.py").write_text("WORD = 'earns'\n")
    (room / "scoring.py").write_text(
        "def score(chunk):\n    from unsure.fakeroom.prompts import WORD\n\n    return chunk.assign(word=WORD)\n"
    )
    (room / "plots.py").write_text("from unsure.fakeroom import prompts\n\nCOLOR = 'red'\n")
    monkeypatch.setattr(unsure, "__path__", [*unsure.__path__, str(tmp_path)])
    try:
        score = importlib.import_module("unsure.fakeroom.scoring").score
        calls: list[int] = []

        def counted(chunk: pd.DataFrame) -> pd.DataFrame:
            calls.append(len(chunk))
            return pd.DataFrame(score(chunk))

        counted.__module__ = score.__module__
        cache = tmp_path / "cache"
        shard(table(16), counted, tmp_path / "a.parquet", cache)
        (room / "plots.py").write_text("from unsure.fakeroom import prompts\n\nCOLOR = 'blue'\n")
        shard(table(16), counted, tmp_path / "b.parquet", cache)
        assert sum(calls) == 16, "a figure's edit rescored the rows"
        (room / "prompts.py").write_text("WORD = 'makes'\n")
        shard(table(16), counted, tmp_path / "c.parquet", cache)
        assert sum(calls) == 32, "a prompt's edit was answered from the cache"
    finally:
        for name in [n for n in sys.modules if n.startswith("unsure.fakeroom")]:
            del sys.modules[name]


CONCURRENT = """
import sys
from pathlib import Path
from typing import Any
from test_request_cache import counting, shard, table

k, n, out, cache = int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
calls = []
shard(table(90), counting(calls), out, cache, shard=k, n_shards=n, chunk_rows=2)
print(sum(calls))
"""


def test_concurrent_shards_share_one_cache(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    # the tests' folder and this process's library (the code digest is part of the cache key)
    env_path = os.pathsep.join([str(Path(__file__).parent), str(Path(unsure.__file__).parents[1])])
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CONCURRENT, str(k), "3", str(tmp_path / f"k{k}.parquet"), str(cache)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={"PYTHONPATH": env_path, "PATH": ""},
        )
        for k in range(3)
    ]
    scored = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        scored.append(int(out.split()[-1]))
    assert sum(scored) == 90
    (folder,) = [p for p in cache.iterdir() if p.is_dir()]
    assert len(list(folder.glob("*.parquet"))) == 3, "each run merged its chunk files into one"
    calls: list[int] = []
    shard(table(90), counting(calls), tmp_path / "all.parquet", cache)
    assert calls == []
    assert len(pd.read_parquet(tmp_path / "all.parquet")) == 90


def test_a_vanished_or_broken_cache_file_means_scoring_again_not_failing(tmp_path: Path) -> None:
    cache, calls = tmp_path / "cache", list[int]()
    shard(table(20), counting(calls), tmp_path / "a.parquet", cache)
    (folder,) = [p for p in cache.iterdir() if p.is_dir()]
    for path in folder.glob("*.parquet"):
        path.write_bytes(b"not parquet")
    calls.clear()
    shard(table(20), counting(calls), tmp_path / "b.parquet", cache)
    assert sum(calls) == 20
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "a.parquet"), pd.read_parquet(tmp_path / "b.parquet"))


def test_the_config_key_turns_it_off() -> None:
    assert request_cache({}) == Path("results/cache")
    assert request_cache({"request_cache": "/scratch/cache"}) == Path("/scratch/cache")
    assert request_cache({"request_cache": None}) is None


def test_real_engine_scores_from_the_cache_equal_a_fresh_run(tiny_models: dict[str, Path], tmp_path: Path) -> None:
    from unsure.engine.hf import HFEngine  # torch: not for the concurrent test's subprocesses

    engine = HFEngine(str(tiny_models["gpt2"]))
    entry = Model(id=str(tiny_models["gpt2"]), gpus=0)
    calls: list[int] = []

    def score(chunk: pd.DataFrame) -> pd.DataFrame:
        calls.append(len(chunk))
        res = engine.continuation_scores([ContinuationRequest(t, (" yes", " no")) for t in chunk["text"]])
        return pd.DataFrame({"row_id": chunk["row_id"].to_numpy(), "lp": [r.logprob[0] for r in res]})

    cache = tmp_path / "cache"
    shard(table(24), score, tmp_path / "a.parquet", cache, model=entry)
    calls.clear()
    grown = shard(table(40), score, tmp_path / "b.parquet", cache, model=entry)
    assert sum(calls) == 16
    fresh = shard(table(40), score, tmp_path / "fresh.parquet", None, model=entry)
    # Rows batched with other rows than in a fresh run: equal up to float noise of the padding.
    np.testing.assert_allclose(grown["lp"], fresh["lp"], atol=1e-5, rtol=0)
    assert list(grown["row_id"]) == list(fresh["row_id"])
    print("largest difference from a fresh run:", float(np.abs(grown["lp"] - fresh["lp"]).max()))


def test_cache_key_names_what_it_was_made_with(tmp_path: Path) -> None:
    store = RequestCache(tmp_path, {"prompt": "v1"}, counting([]))
    store.add(pd.Series(["x"]), pd.DataFrame({"row_id": ["a"], "p": [0.5]}))
    key = (store.folder / "key.json").read_text()
    assert '"prompt": "v1"' in key and '"code"' in key

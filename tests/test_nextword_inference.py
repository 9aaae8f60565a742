"""The model side of nextword on tiny models: sampling, chat parsing, biased estimator, token level, fine-tuning."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from unsure.engine import ContinuationRequest
from unsure.engine.finetune import Example, FinetuneSettings, finetune, transformer_blocks
from unsure.engine.hf import HFEngine
from unsure.engine.shards import run_shard
from unsure.generate import provo
from unsure.nextword.data import corpus_targets, read_norms, read_samples, write_samples
from unsure.nextword.distributions import human_counts, oracle_splits, restrict
from unsure.nextword.inference import (
    biased_scorer,
    biased_table,
    parse_word_list,
    position_rows,
    sample_counts,
    sample_scorer,
    token_scorer,
)
from unsure.nextword.metrics import tvd
from unsure.nextword.study import token_level_tvds

KEY = ["text_id", "word_num"]


@pytest.fixture(scope="module")
def engine(tiny_models: dict[str, Path]) -> HFEngine:
    torch.manual_seed(0)
    return HFEngine(str(tiny_models["gpt2"]), device="cpu")


@pytest.fixture(scope="module")
def norms(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pd.DataFrame]:
    path = tmp_path_factory.mktemp("provo") / provo.NORMS_FILENAME
    provo.write_norms(path, n_passages=1, seed=2)
    positions = read_norms(path)
    positions = positions[positions["word_num"] <= 7].reset_index(drop=True)
    human = human_counts(positions)
    return {"positions": positions, "human": human, "corpus": corpus_targets(positions)}


def test_samples_are_shard_independent_and_round_trip(
    engine: HFEngine, norms: dict[str, pd.DataFrame], tmp_path: Path
) -> None:
    rows = position_rows(norms["positions"])
    score = sample_scorer(engine, n=4, seed=3)
    one = run_shard(rows, score, tmp_path / "one.parquet", shard=0, n_shards=1, chunk_rows=4, fingerprint={})
    two = [
        run_shard(rows, score, tmp_path / f"two{k}.parquet", shard=k, n_shards=2, chunk_rows=2, fingerprint={})
        for k in range(2)
    ]
    counts, stats = sample_counts([one])
    counts2, _ = sample_counts(two)
    pd.testing.assert_frame_equal(counts, counts2)  # a position's samples do not depend on the sharding
    assert stats["samples"] + stats["rejected"] == 4 * len(rows)
    write_samples(tmp_path / "s.jsonl", counts)
    pd.testing.assert_frame_equal(read_samples(tmp_path / "s.jsonl"), counts)


def test_parse_word_list() -> None:
    reply = "1. The, cat;\n- dog\nred car, ?, Fish."
    assert parse_word_list(reply, 10) == ["the", "cat", "dog", "fish"]
    assert parse_word_list(reply, 2) == ["the", "cat"]


def test_biased_estimator_support_and_probabilities(
    engine: HFEngine, norms: dict[str, pd.DataFrame], tmp_path: Path
) -> None:
    rows = position_rows(norms["positions"]).head(2)
    samples, _ = sample_counts([sample_scorer(engine, n=5, seed=1)(rows)])
    score = biased_scorer(
        engine, samples=samples, human=norms["human"], corpus=norms["corpus"], nucleus=(0.7, 0.9), nucleus_samples=3
    )
    table = biased_table([score(rows)])
    sums = table.groupby(KEY)["prob"].sum()
    assert np.allclose(sums, 1.0)
    for (tid, num), g in table.groupby(KEY):
        words = set(g["word"])
        here = (norms["human"]["text_id"] == tid) & (norms["human"]["word_num"] == num)
        assert set(norms["human"].loc[here, "word"]) <= words
        corpus = norms["corpus"]
        assert set(corpus.loc[(corpus["text_id"] == tid) & (corpus["word_num"] == num), "word"]) <= words
        got = samples[(samples["text_id"] == tid) & (samples["word_num"] == num)]
        assert set(got["word"]) <= words
    # a word's probability is its joint log-probability as a continuation, renormalised over the support
    first = table[(table["text_id"] == rows["text_id"][0]) & (table["word_num"] == rows["word_num"][0])]
    ctx_ids, cont = engine.split_pair(rows["context"][0], " " + first["word"].iloc[0])
    with torch.inference_mode():
        logits = engine.model(torch.tensor([ctx_ids + cont])).logits[0].double().log_softmax(-1)
    direct = sum(float(logits[len(ctx_ids) - 1 + i, t]) for i, t in enumerate(cont))
    assert first["logprob"].iloc[0] == pytest.approx(direct, abs=1e-4)
    lp = first["logprob"].to_numpy()
    assert np.allclose(first["prob"], np.exp(lp) / np.exp(lp).sum())


def test_token_level_tvd_equals_the_full_vocabulary_tvd(engine: HFEngine, norms: dict[str, pd.DataFrame]) -> None:
    rows = position_rows(norms["positions"])
    scored = token_scorer(engine, norms["human"])(rows)
    splits = oracle_splits(norms["human"], [0])
    out = token_level_tvds("gpt2", scored, norms["human"], splits).set_index(KEY)
    for row in rows.itertuples():
        human = restrict(norms["human"], pd.MultiIndex.from_tuples([(row.text_id, row.word_num)], names=KEY))
        p_human = np.zeros(len(engine.tokenizer))
        ctx: list[int] = []
        for w, c in zip(human["word"], human["count"], strict=True):
            ctx, cont = engine.split_pair(row.context, " " + w)
            p_human[cont[0]] += c
        p_human /= p_human.sum()
        with torch.inference_mode():
            p_model = engine.model(torch.tensor([ctx])).logits[0, -1].double().softmax(-1).numpy()
        expected = 0.5 * np.abs(p_human - p_model[: len(p_human)]).sum()
        assert out.loc[(row.text_id, row.word_num), "tvd_model"] == pytest.approx(expected, abs=1e-6)
    assert out["tvd_oracle"].between(0, 1).all()


def test_finetune_trains_only_the_last_blocks(tiny_models: dict[str, Path], tmp_path: Path) -> None:
    train = [Example("The cat sat on the", " mat", 0.7), Example("The cat sat on the", " sofa", 0.3)] * 3
    settings = FinetuneSettings(trainable_blocks=1, learning_rate=5e-3, batch_size=2, epochs=3, seed=0)
    losses = finetune(tiny_models["gpt2"], train, tmp_path / "tuned", settings=settings, heldout=train[:2])
    curve = losses[losses["split"] == "train"]["loss"].to_numpy()
    assert list(losses["epoch"].unique()) == [0, 1, 2, 3]
    assert curve[-1] < curve[0] - 0.5
    base_engine, tuned_engine = (
        HFEngine(str(tiny_models["gpt2"]), device="cpu"),
        HFEngine(str(tmp_path / "tuned"), device="cpu"),
    )
    before, after = base_engine.model, tuned_engine.model
    blocks_before, blocks_after = transformer_blocks(before), transformer_blocks(after)
    changed = [
        not torch.equal(a, b)
        for a, b in zip(blocks_before[-1].parameters(), blocks_after[-1].parameters(), strict=True)
    ]
    assert any(changed)
    for a, b in zip(blocks_before[0].parameters(), blocks_after[0].parameters(), strict=True):
        assert torch.equal(a, b)
    assert torch.equal(before.get_input_embeddings().weight, after.get_input_embeddings().weight)
    # the fine-tuned model gives the trained answer more probability than before
    request = [ContinuationRequest("The cat sat on the", (" mat",))]
    tuned = tuned_engine.continuation_scores(request)[0].logprob[0]
    base = base_engine.continuation_scores(request)[0].logprob[0]
    assert tuned > base + 1.0


def test_sample_counts_drop_unusable_words() -> None:
    shard = pd.DataFrame(
        {
            "row_id": ["1-2"],
            "text_id": [1],
            "word_num": [2],
            "words": [json.dumps(["The", "the.", "?"])],
            "rejected": [1],
        }
    )
    counts, stats = sample_counts([shard])
    assert counts.to_dict("records") == [{"text_id": 1, "word_num": 2, "word": "the", "count": 2}]
    assert stats == {"positions": 1, "samples": 2, "rejected": 2, "positions_without_samples": 0}
    assert tvd(counts, counts).iloc[0] == 0.0

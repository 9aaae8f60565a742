"""The model side of nextword on tiny models: sampling, chat parsing, biased estimator, token level, fine-tuning."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from unsure.engine import ContinuationRequest, ContinuationScores, WordSamples, WordSamplingRequest
from unsure.engine.finetune import Example, FinetuneSettings, finetune, transformer_blocks
from unsure.engine.hf import HFEngine
from unsure.engine.shards import run_shard
from unsure.generate import provo
from unsure.nextword.data import (
    corpus_targets,
    read_norms,
    read_samples,
    read_surface_samples,
    typed_responses,
    write_samples,
)
from unsure.nextword.distributions import human_counts, oracle_splits, restrict
from unsure.nextword.inference import (
    biased_scorer,
    biased_table,
    parse_word_list,
    position_rows,
    sample_counts,
    sample_scorer,
    surface_counts,
    token_scorer,
)
from unsure.nextword.metrics import expected_calibration_error, tvd
from unsure.nextword.tables import table4, token_level_tvds
from unsure.nextword.words import normalize_word

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


def _surfaces(counts: pd.DataFrame) -> pd.DataFrame:
    return counts.rename(columns={"word": "surface"})


def test_biased_estimator_support_and_probabilities(
    engine: HFEngine, norms: dict[str, pd.DataFrame], tmp_path: Path
) -> None:
    rows = position_rows(norms["positions"]).head(2)
    samples = surface_counts([sample_scorer(engine, n=5, seed=1)(rows)])
    positions = norms["positions"]
    score = biased_scorer(
        engine,
        samples=_surfaces(samples),
        human=typed_responses(positions),
        corpus=positions[KEY].assign(surface=positions["corpus_word"]),
        nucleus=(0.7, 0.9),
        nucleus_samples=3,
    )
    scored = score(rows)
    table = biased_table([scored])
    sums = table.groupby(KEY)["prob"].sum()
    assert np.allclose(sums, 1.0)
    for (tid, num), g in table.groupby(KEY):
        words = set(g["word"])
        here = (norms["human"]["text_id"] == tid) & (norms["human"]["word_num"] == num)
        assert set(norms["human"].loc[here, "word"]) <= words
        corpus = norms["corpus"]
        assert set(corpus.loc[(corpus["text_id"] == tid) & (corpus["word_num"] == num), "word"]) <= words
        got = samples[(samples["text_id"] == tid) & (samples["word_num"] == num)]
        assert set(got["word"].map(normalize_word)) <= words
    # a word's probability is the summed probability of its surface forms as continuations, renormalised
    first = table[(table["text_id"] == rows["text_id"][0]) & (table["word_num"] == rows["word_num"][0])]
    forms = json.loads(scored["surfaces"].iloc[0])[first["word"].iloc[0]]
    direct = []
    for form in forms:
        ctx_ids, cont = engine.split_pair(rows["context"][0], " " + form)
        with torch.inference_mode():
            logits = engine.model(torch.tensor([ctx_ids + cont])).logits[0].double().log_softmax(-1)
        direct.append(sum(float(logits[len(ctx_ids) - 1 + i, t]) for i, t in enumerate(cont)))
    assert first["logprob"].iloc[0] == pytest.approx(float(np.logaddexp.reduce(direct)), abs=1e-4)
    lp = first["logprob"].to_numpy()
    assert np.allclose(first["prob"], np.exp(lp) / np.exp(lp).sum())


class _KnownEngine:
    """An engine with known answers: fixed sampled words and a log-probability per continuation string."""

    def __init__(self, logprobs: dict[str, float], words: list[str]) -> None:
        self.logprobs, self.words = logprobs, words
        self.asked: list[str] = []

    def sample_words(self, requests: list[WordSamplingRequest]) -> list[WordSamples]:
        return [WordSamples(words=list(self.words[: r.n])) for r in requests]

    def continuation_scores(self, requests: list[ContinuationRequest]) -> list[ContinuationScores]:
        out = []
        for r in requests:
            self.asked += list(r.continuations)
            lp = np.asarray([self.logprobs[c] for c in r.continuations])
            out.append(ContinuationScores(lp, np.ones(len(lp), dtype=np.int64), np.zeros(len(lp), dtype=bool)))
        return out


def test_biased_estimator_scores_surface_forms_and_sums_them_per_word() -> None:
    """ "Parker" is scored as the model writes it (" Parker", -3.6 nats), not as " parker" (-20.8); forms add up."""
    lps = {" Parker": -3.6, " parker": -20.8, " the": -1.0, " nationwide": -5.0, " The": -4.0}
    engine = _KnownEngine(lps, ["The"])
    rows = pd.DataFrame({"row_id": ["1-2"], "text_id": [1], "word_num": [2], "context": ["Ask"]})
    score = biased_scorer(
        engine,  # type: ignore[arg-type]
        samples=pd.DataFrame({"text_id": [1, 1], "word_num": [2, 2], "surface": ["Parker", "the"]}),
        human=pd.DataFrame({"text_id": [1], "word_num": [2], "surface": ["Parker"]}),
        corpus=pd.DataFrame({"text_id": [1], "word_num": [2], "surface": ["nationwide."]}),
        nucleus=(0.9,),
        nucleus_samples=1,
    )
    scored = score(rows)
    assert sorted(set(engine.asked)) == [" Parker", " The", " nationwide", " the"]  # never " parker"
    assert json.loads(scored["surfaces"][0]) == {
        "nationwide": ["nationwide"],
        "parker": ["Parker"],
        "the": ["The", "the"],
    }
    table = biased_table([scored]).set_index("word")
    assert table.loc["parker", "logprob"] == pytest.approx(-3.6)
    assert table.loc["the", "logprob"] == pytest.approx(np.logaddexp(-1.0, -4.0))
    z = np.exp([-5.0, -3.6, np.logaddexp(-1.0, -4.0)])
    assert table["prob"].to_numpy() == pytest.approx(z / z.sum())


def test_samples_file_keeps_surfaces_for_the_biased_estimator(tmp_path: Path) -> None:
    shard = pd.DataFrame(
        {"text_id": [1], "word_num": [2], "words": [json.dumps(["Parker", "parker", "Parker", "?"])], "rejected": [0]}
    )
    write_samples(tmp_path / "s.jsonl", surface_counts([shard]))
    surfaces = read_surface_samples(tmp_path / "s.jsonl")
    assert dict(zip(surfaces["surface"], surfaces["count"], strict=True)) == {"Parker": 2, "parker": 1}
    counts, stats = sample_counts([shard])
    pd.testing.assert_frame_equal(read_samples(tmp_path / "s.jsonl"), counts)
    assert stats["rejected"] == 1


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
        # Table 4: the modal token over the whole vocabulary, scored against the humans' majority first token
        here = scored[(scored["text_id"] == row.text_id) & (scored["word_num"] == row.word_num)].iloc[0]
        assert here["modal_token"] == int(p_model.argmax())
        assert np.exp(here["modal_logprob"]) == pytest.approx(p_model.max(), rel=1e-5)
        majority = np.flatnonzero(p_human == p_human.max())
        expected_correct = float(int(p_model.argmax()) in majority) / len(majority)
        assert out.loc[(row.text_id, row.word_num), "correct_model"] == pytest.approx(expected_correct)
    assert out["tvd_oracle"].between(0, 1).all()
    assert out[["confidence_oracle1", "confidence_oracle2"]].notna().all().all()
    t4 = table4(out.reset_index())
    items = out.reset_index()
    for name in ("model", "oracle1", "oracle2"):
        want = expected_calibration_error(items[f"confidence_{name}"], items[f"correct_{name}"])
        assert t4.loc[0, f"ece_human_majority_{name}"] == pytest.approx(want)
    assert t4.loc[0, "expected_tvd_model"] == pytest.approx(out["tvd_model"].mean())


def test_table4_ece_on_known_items() -> None:
    """The paper's Table 4 columns from known per-position items (confidence, correct)."""
    frame = pd.DataFrame(
        {
            "model": ["m"] * 4,
            "tvd_model": [0.5] * 4,
            "tvd_oracle": [0.25] * 4,
            "mass": [0.5] * 4,
            "confidence_model": [0.95, 0.95, 0.15, 0.15],
            "correct_model": [1.0, 0.0, 0.0, 0.0],
            "confidence_oracle1": [0.5, 0.5, 0.5, 0.5],
            "correct_oracle1": [1.0, 1.0, 0.0, 0.0],
            "confidence_oracle2": [1.0, 1.0, 1.0, 1.0],
            "correct_oracle2": [1.0, 1.0, 1.0, 0.5],
        }
    )
    row = table4(frame).iloc[0]
    # model: bin 0.9 has conf .95, acc .5 (2 of 4); bin 0.1 has conf .15, acc 0 (2 of 4)
    assert row["ece_human_majority_model"] == pytest.approx(0.5 * 0.45 + 0.5 * 0.15)
    assert row["ece_human_majority_oracle1"] == pytest.approx(0.0)
    assert row["ece_human_majority_oracle2"] == pytest.approx(0.125)  # 1.0 in the top bin, accuracy 0.875
    assert list(table4(frame).columns[:5]) == [
        "model",
        "positions",
        "ece_human_majority_model",
        "ece_human_majority_oracle1",
        "ece_human_majority_oracle2",
    ]


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

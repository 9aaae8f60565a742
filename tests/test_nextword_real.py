"""The study's data path on the real Provo corpus (../shared/data/provo; skipped when absent).

The shared copy is not in the OSF layout, so the test first writes it out as an
OSF norms CSV (Latin-1) in a temporary folder, then reads that back with the
project's reader: the real words and passages go through the same code as a
download would. Nothing of the real data is stored in the project.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from unsure.generate.provo import COLUMNS
from unsure.nextword.data import convert_reference_generations, corpus_targets, read_norms, read_samples
from unsure.nextword.distributions import human_counts, oracle_splits, to_probs
from unsure.nextword.metrics import evaluate, evaluate_oracle, oracle_tvd
from unsure.nextword.words import normalize_word

KEY = ["text_id", "word_num"]
N_POSITIONS = 2687
N_SEEDS = 20


def _write_osf_csv(records: list[dict[str, object]], path: Path) -> None:
    by_text: dict[int, list[dict[str, object]]] = {}
    for r in records:
        by_text.setdefault(int(r["text_id"]), []).append(r)  # type: ignore[call-overload]
    with open(path, "w", encoding="latin-1", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        qid = 0
        for tid, rows in sorted(by_text.items()):
            last = max(rows, key=lambda r: int(r["word_num"]))  # type: ignore[call-overload]
            passage = f"{last['context']} {last['target']}"
            for r in sorted(rows, key=lambda r: int(r["word_num"])):  # type: ignore[call-overload]
                qid += 1
                for resp in r["responses"]:  # type: ignore[attr-defined]
                    response = resp["response"] if isinstance(resp["response"], str) else ""
                    writer.writerow(
                        (
                            f"QID{qid}",
                            tid,
                            passage,
                            r["word_num"],
                            "",
                            "",
                            r["target"],
                            response,
                            resp["count"],
                            r["n_responses"],
                            resp["count"] / r["n_responses"],  # type: ignore[operator]
                        )
                    )


@pytest.fixture(scope="module")
def real(shared_data_module: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    source = shared_data_module / "provo" / "provo_human_cloze.jsonl"
    with open(source, encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    path = tmp_path_factory.mktemp("provo_real") / "Provo_Corpus-Predictability_Norms.csv"
    _write_osf_csv(records, path)
    positions = read_norms(path)
    human = human_counts(positions)
    corpus = corpus_targets(positions)
    splits = oracle_splits(human, range(N_SEEDS))
    return {
        "shared": shared_data_module,
        "records": records,
        "positions": positions,
        "human": human,
        "corpus": corpus,
        "splits": splits,
        "oracle": evaluate_oracle(human, corpus, splits),
    }


@pytest.fixture(scope="module")
def shared_data_module() -> Path:
    # The conftest's `shared_data` fixture is function-scoped; this is its module-scoped twin.
    shared = Path(__file__).resolve().parents[1].parent / "shared" / "data"
    if not (shared / "provo" / "provo_human_cloze.jsonl").is_file():
        pytest.skip(f"real data not available: {shared}/provo/provo_human_cloze.jsonl does not exist")
    return shared


def test_real_positions_table(real: dict[str, object], shared_data: Path) -> None:
    positions: pd.DataFrame = real["positions"]  # type: ignore[assignment]
    records: list[dict[str, object]] = real["records"]  # type: ignore[assignment]
    assert len(positions) == N_POSITIONS
    assert positions["text_id"].nunique() == 55
    by_key = {(r["text_id"], r["word_num"]): r for r in records}
    for row in positions.itertuples():
        record = by_key[(row.text_id, row.word_num)]
        assert row.context == record["context"]
        assert row.corpus_word == record["target"]
        assert row.n_responses == record["n_responses"]
    assert positions["n_responses"].between(32, 82).all()


def test_real_human_distributions(real: dict[str, object]) -> None:
    human: pd.DataFrame = real["human"]  # type: ignore[assignment]
    probs = to_probs(human)
    sums = probs.groupby(KEY)["prob"].sum()
    assert len(sums) == N_POSITIONS
    assert np.allclose(sums, 1.0, atol=1e-12)
    assert (probs["prob"] > 0).all() and (probs["prob"] <= 1).all()
    assert (probs["word"] == probs["word"].map(normalize_word)).all()
    # The corpus word and the cleaned responses are compared in one form: "it's" in the text is "its" typed.
    corpus: pd.DataFrame = real["corpus"]  # type: ignore[assignment]
    assert len(corpus) == N_POSITIONS
    hit = corpus.merge(human, on=["text_id", "word_num", "word"], how="left")["count"].fillna(0)
    assert 0.3 < (hit > 0).mean() < 0.7  # the corpus word is among the responses about half of the time


def test_real_oracle_splits_are_disjoint_halves(real: dict[str, object]) -> None:
    human: pd.DataFrame = real["human"]  # type: ignore[assignment]
    splits: pd.DataFrame = real["splits"]  # type: ignore[assignment]
    assert sorted(splits["seed"].unique()) == list(range(N_SEEDS))
    merged = splits.merge(human, on=["text_id", "word_num", "word"], how="left", validate="many_to_one")
    assert merged["count"].notna().all()
    assert (merged["target"] + merged["oracle"] <= merged["count"]).all()
    n = human.groupby(KEY)["count"].sum()
    sizes = splits.groupby(["seed", *KEY])[["target", "oracle"]].sum()
    for seed in range(N_SEEDS):
        assert (sizes.loc[seed, "target"] == n // 2).all()
        assert (sizes.loc[seed, "oracle"] == n // 2).all()


def test_real_oracle_results(real: dict[str, object]) -> None:
    splits: pd.DataFrame = real["splits"]  # type: ignore[assignment]
    per_position = oracle_tvd(splits)
    assert len(per_position) == N_SEEDS * N_POSITIONS
    assert per_position["tvd"].between(0, 1).all()
    rows: pd.DataFrame = real["oracle"]  # type: ignore[assignment]
    assert len(rows) == N_SEEDS and (rows["n_positions"] == N_POSITIONS).all()
    mean = rows.drop(columns=["estimator", "seed"]).mean()
    print("\nreal Provo oracle, mean over 20 splits:\n" + mean.round(4).to_string())
    # Measured: expected TVD 0.432 to the disjoint half, 0.219 to all responses;
    # ECE 0.118 (corpus word), 0.399 (human majority), 0.249 (oracle-half majority).
    assert 0.40 < mean["expected_tvd_target"] < 0.46
    assert 0.19 < mean["expected_tvd_human"] < 0.25
    assert mean["expected_tvd_human"] < mean["expected_tvd_target"]  # the full sample includes the oracle's half
    assert 0.08 < mean["ece_corpus_word"] < 0.16
    assert mean["ece_corpus_word"] < mean["ece_oracle_majority"] < mean["ece_human_majority"]
    assert rows["expected_tvd_target"].std() < 0.01  # 20 resamples agree closely


def test_real_precollected_gpt2_samples(real: dict[str, object], tmp_path: Path) -> None:
    """The paper's GPT-2 samples (40 per position, temperature 0.5) as a pre-collected samples file."""
    folder = real["shared"] / "provo" / "predict_next_word" / "GPT2_Temp_Generations"  # type: ignore[operator]
    if not folder.is_dir():
        pytest.skip(f"GPT-2 generations not available: {folder}")
    # through the converter: the 16 failure markers in these files are rejected samples, not words
    human: pd.DataFrame = real["human"]  # type: ignore[assignment]
    report = convert_reference_generations(sorted(folder.glob("*.json")), tmp_path / "gpt2.jsonl", known=human)
    assert report["failures_dropped"] == 29 and report["records"] == N_POSITIONS and report["missing_positions"] == []
    model = read_samples(tmp_path / "gpt2.jsonl")
    corpus: pd.DataFrame = real["corpus"]  # type: ignore[assignment]
    splits: pd.DataFrame = real["splits"]  # type: ignore[assignment]
    rows = evaluate(model, human, corpus, splits, name="gpt2-t0.5")
    oracle: pd.DataFrame = real["oracle"]  # type: ignore[assignment]
    assert (rows["n_positions"] == N_POSITIONS).all()
    values = rows[[c for c in rows.columns if c.startswith(("expected", "ece"))]].to_numpy()
    assert ((values >= 0) & (values <= 1)).all()
    print(f"\nGPT-2 (T=0.5): {rows.drop(columns=['estimator', 'seed']).mean().round(4).to_dict()}")
    # Far from humans: clearly worse than the oracle at the same target.
    assert rows["expected_tvd_target"].mean() > oracle["expected_tvd_target"].mean() + 0.1

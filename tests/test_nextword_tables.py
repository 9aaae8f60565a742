"""nextword study layer: config checks, pre-collected systems, the demo tagger, the DAG, real samples."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from workflow_helpers import jobs, snakemake

from unsure.config import ConfigError, load_config, parse_config
from unsure.generate import provo, text
from unsure.nextword.analysis import sample_size_study
from unsure.nextword.data import convert_reference_generations, read_samples
from unsure.nextword.distributions import restrict, sample_from
from unsure.nextword.finetuning import passage_folds, response_examples
from unsure.nextword.semantic import _lexicon_tag, tokenize, train_tagger
from unsure.nextword.tables import evaluate_systems, prepare, table1

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data" / "provo"


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pd.DataFrame]:
    path = tmp_path_factory.mktemp("provo") / provo.NORMS_FILENAME
    provo.write_norms(path, n_passages=3, seed=1)
    return prepare(path, passages=[1, 2], splits=3, seed=0)


def _demo_raw() -> dict[str, object]:
    raw: dict[str, object] = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    return raw


def test_config_checks_the_nextword_model_lists() -> None:
    raw = _demo_raw()
    nextword = raw["studies"]["nextword"]  # type: ignore[index]
    nextword["biased_models"] = ["tiny-llama"]
    nextword["finetune"] = {"model": "tiny-bert", "passages": [1, 2], "folds": 3}
    nextword["sample_files"] = {"tiny-gpt2": "x.jsonl"}
    with pytest.raises(ConfigError) as err:
        parse_config(raw)
    message = str(err.value)
    assert "biased_models[0]: 'tiny-llama' is not in studies.nextword.models" in message
    assert "finetune.model: 'tiny-bert' is not in studies.nextword.models" in message
    assert "fewer passages than folds" in message
    assert "sample_files: 'tiny-gpt2' is also a model name" in message
    assert load_config(REPO / "config" / "config.yaml").studies.nextword.finetune.model == "gpt2"


def test_prepare_keeps_the_chosen_passages(study: dict[str, pd.DataFrame], tmp_path: Path) -> None:
    assert set(study["positions"]["text_id"]) == {1, 2}
    assert sorted(study["splits"]["seed"].unique()) == [0, 1, 2]
    assert np.allclose(
        study["human"].groupby(["text_id", "word_num"])["count"].sum(),
        study["positions"].set_index(["text_id", "word_num"])["n_responses"],
        atol=3,
    )  # responses that normalise to nothing are dropped
    with pytest.raises(ValueError, match=r"studies.nextword.passages: passage\(s\) \[9\]"):
        provo.write_norms(tmp_path / "n.csv", n_passages=1, seed=0)
        prepare(tmp_path / "n.csv", passages=[9])


def test_a_precollected_file_is_one_more_system(study: dict[str, pd.DataFrame], tmp_path: Path) -> None:
    """A samples file written by hand goes through every metric like an engine's samples."""
    lines = [
        json.dumps({"text_id": int(t), "word_num": int(n), "samples": ["The", "a", "the."]})
        for t, n in study["positions"][["text_id", "word_num"]].itertuples(index=False)
    ]
    (tmp_path / "mine.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    systems = {"mine": read_samples(tmp_path / "mine.jsonl"), "copy": study["human"]}
    metrics, tvds = evaluate_systems(systems, study["human"], study["corpus"], study["splits"])
    table = table1(metrics, ["mine", "copy"])
    assert list(table.columns) == ["metric", "mine", "copy", "human", "oracle"]
    row = table.set_index("metric")
    assert row.loc["expected TVD (all responses)", "copy"] == 0.0
    assert row.loc["expected TVD (all responses)", "mine"] > 0.5
    assert tvds["tvd_target"].between(0, 1).all()
    lines.append(json.dumps({"text_id": 1, "word_num": 999, "samples": ["x"]}))
    lines.append(json.dumps({"text_id": 7, "word_num": 2, "samples": ["x"]}))  # a passage not studied: skipped
    (tmp_path / "more.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"more.jsonl, line {len(lines) - 1}: position \(text_id=1, word_num=999\)"):
        read_samples(tmp_path / "more.jsonl", known=study["human"])
    lines.pop(-2)
    (tmp_path / "more.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert set(read_samples(tmp_path / "more.jsonl", known=study["human"])["text_id"]) == {1, 2}
    (tmp_path / "bad.jsonl").write_text('{"text_id": 1, "word_num": 2, "samples": "the"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.jsonl, line 1: 'samples' must be a list of strings"):
        read_samples(tmp_path / "bad.jsonl")


def test_perfect_model_expected_tvd_approaches_the_oracle(study: dict[str, pd.DataFrame]) -> None:
    """A model whose distribution is exactly the human MLE: as n grows its TVD to the target half falls to the
    level of the human MLE itself (which includes the target half), far below a model seen through few samples."""
    metrics = {
        n: evaluate_systems(
            {"m": sample_from(study["human"], n, seed=5)}, study["human"], study["corpus"], study["splits"]
        )[0]
        for n in (5, 40, 2000)
    }
    tvd = {n: m[m["estimator"] == "m"]["expected_tvd_human"].mean() for n, m in metrics.items()}
    assert tvd[5] > tvd[40] > tvd[2000]
    assert tvd[2000] < 0.05


def test_demo_tagger_learns_the_generators_tags() -> None:
    tagger = train_tagger(600, seed=0)
    right = total = 0
    for sentence in text.sentences(200, seed=99):
        tokens = tokenize(sentence)
        for (_, tag), i in zip(tagger.perceptron.tag(tokens), range(len(tokens)), strict=True):
            right += tag == _lexicon_tag(tokens, i)
            total += 1
    assert right / total > 0.97
    assert tagger.universal("NOUN") == "NOUN"


def test_folds_and_weighted_examples(study: dict[str, pd.DataFrame]) -> None:
    assert passage_folds(1, 40, 4) == [
        list(range(1, 11)),
        list(range(11, 21)),
        list(range(21, 31)),
        list(range(31, 41)),
    ]
    examples = response_examples(study["positions"], study["human"], [2])
    weights: dict[str, float] = {}
    for ex in examples:
        weights[ex.context] = weights.get(ex.context, 0.0) + ex.weight
        assert ex.continuation.startswith(" ")
    assert np.allclose(list(weights.values()), 1.0)  # one distribution per position
    assert len(weights) == int((study["positions"]["text_id"] == 2).sum())


@pytest.mark.workflow
def test_demo_dag_has_every_nextword_job(checkout: Path) -> None:
    raw = _demo_raw()
    raw["studies"]["nextword"]["sample_files"] = {"collected": "collected.jsonl"}  # type: ignore[index]
    (checkout / "collected.jsonl").write_text('{"text_id": 1, "word_num": 2, "samples": ["the"]}\n')
    (checkout / "test.yaml").write_text(yaml.safe_dump(raw))
    result = snakemake("-n", "nextword_all", "--configfile", "test.yaml", cwd=checkout)
    assert result.returncode == 0, result.stderr
    counts = jobs(result.stdout)
    assert counts["nextword_sample"] == 4  # tiny-gpt2 at 2 temperatures, tiny-llama-chat in 2 chat modes
    assert counts["nextword_finetune"] == counts["nextword_finetune_sample"] == 2
    for rule in ("nextword_prepare", "nextword_biased", "nextword_tokens", "nextword_evaluate", "nextword_analysis"):
        assert counts[rule] >= 1
    assert "collected.jsonl" in result.stdout  # the pre-collected file is an input of the evaluation
    # GPT2_F: the fine-tuned model's held-out samples are one more system of the evaluation
    assert counts["nextword_finetune_merge"] == 1
    assert "results/nextword/samples/tiny-gpt2/finetuned.jsonl" in result.stdout


def test_the_papers_gpt2_samples(study: dict[str, pd.DataFrame], tmp_path: Path) -> None:
    """The reference code's 1,000 unbiased GPT-2 samples (15 passages) as a pre-collected file, on the real norms."""
    folder = SHARED / "predict_next_word" / "GPT2_Generations_partial"
    cloze = SHARED / "provo_human_cloze_long.csv"
    if not folder.is_dir() or not cloze.is_file():
        pytest.skip(f"real GPT-2 generations not available: {folder}")
    files = sorted(folder.glob("Paragraphs-[1-4]-*.json"))[:2]
    n = convert_reference_generations(files, tmp_path / "gpt2.jsonl")["records"]
    model = read_samples(tmp_path / "gpt2.jsonl")
    assert model["text_id"].nunique() == len(files) and n == len(model[["text_id", "word_num"]].drop_duplicates())
    per_position = model.groupby(["text_id", "word_num"])["count"].sum()
    assert per_position.between(900, 1000).all()  # 1,000 samples, a few failures left out
    long = pd.read_csv(cloze)
    human = long.rename(columns={"response": "word"})[["text_id", "word_num", "word", "count"]]
    human = human[human["word"].notna()].astype({"word": str})
    from unsure.nextword.distributions import counts_from_samples

    human = restrict(counts_from_samples(human), model)
    sizes = sample_size_study(model, human, sizes=[10, 100], seeds=[0])
    mse = sizes.set_index("n")["mse"]
    assert mse[100] < mse[10]  # more samples, closer to the 1,000-sample TVD

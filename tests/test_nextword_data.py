"""Reading the OSF norms into the positions table and the pre-collected samples format."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from unsure.generate import provo
from unsure.nextword.data import (
    convert_reference_generations,
    convert_released_lists,
    corpus_targets,
    merge_sample_files,
    read_norms,
    read_samples,
    read_surface_samples,
    write_samples,
)


@pytest.fixture(scope="module")
def norms(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("provo") / provo.NORMS_FILENAME
    provo.write_norms(path, n_passages=3, seed=0)
    return path


def _write(path: Path, rows: list[dict[str, object]], columns: tuple[str, ...] = provo.COLUMNS) -> Path:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    path.write_bytes(buf.getvalue().encode("latin-1"))
    return path


def _row(tid: int, num: int, text: str, word: str, response: str, count: int, total: int) -> dict[str, object]:
    return {
        "Word_Unique_ID": f"QID{num}",
        "Text_ID": tid,
        "Text": text,
        "Word_Number": num,
        "Sentence_Number": 1,
        "Word_In_Sentence_Number": num,
        "Word": word,
        "Response": response,
        "Response_Count": count,
        "Total_Response_Count": total,
        "Response_Proportion": count / total,
    }


TEXT = "The cat sat. It slept."


def _good_rows() -> list[dict[str, object]]:
    return [
        _row(1, 2, TEXT, "cat", "dog", 3, 5),
        _row(1, 2, TEXT, "cat", "cat", 2, 5),
        _row(1, 4, TEXT, "It", "The", 4, 4),
    ]


def test_positions_table_from_generated_norms(norms: Path) -> None:
    pos = read_norms(norms)
    with open(norms, encoding=provo.ENCODING, newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(pos) == len({(r["Text_ID"], r["Word_Number"]) for r in rows})
    assert list(pos.columns) == ["text_id", "word_num", "context", "corpus_word", "n_responses", "responses"]
    assert pos[["text_id", "word_num"]].equals(pos[["text_id", "word_num"]].sort_values(["text_id", "word_num"]))
    passages = provo.read_passages(norms)
    for r in pos.itertuples():
        words = passages[r.text_id].split()
        assert r.context == " ".join(words[: r.word_num - 1])
        assert r.corpus_word == words[r.word_num - 1]
        assert sum(r.responses.values()) == r.n_responses
    raw_rows = sum(len(r) for r in pos["responses"])
    assert raw_rows == len(rows)  # one dict entry per distinct raw response row


def test_hand_made_file(tmp_path: Path) -> None:
    pos = read_norms(_write(tmp_path / "n.csv", _good_rows()))
    assert pos["context"].tolist() == ["The", "The cat sat."]
    assert pos["corpus_word"].tolist() == ["cat", "It"]
    assert pos["responses"].tolist() == [{"dog": 3, "cat": 2}, {"The": 4}]
    assert pos["n_responses"].tolist() == [5, 4]
    targets = corpus_targets(pos)
    assert targets.to_dict("list") == {"text_id": [1, 1], "word_num": [2, 4], "word": ["cat", "it"]}


def test_latin1_and_cp1252_bytes(tmp_path: Path) -> None:
    text = "Caf\xe9 was the owner\x92s pride."  # é in Latin-1; 0x92 is a cp1252 right quote
    rows = [_row(7, 4, text, "owner\x92s", "owner\x92s", 1, 2), _row(7, 4, text, "owner\x92s", "caf\xe9", 1, 2)]
    pos = read_norms(_write(tmp_path / "n.csv", rows))
    assert pos.loc[0, "context"] == "Caf\xe9 was the"
    assert pos.loc[0, "corpus_word"] == "owner\u2019s"
    assert pos.loc[0, "responses"] == {"caf\xe9": 1, "owner\u2019s": 1}


def test_missing_column_is_named(tmp_path: Path) -> None:
    cols = tuple(c for c in provo.COLUMNS if c != "Response_Count")
    path = _write(tmp_path / "n.csv", _good_rows(), columns=cols)
    with pytest.raises(ValueError, match=r"n\.csv: missing column\(s\) Response_Count"):
        read_norms(path)


def test_bad_number_names_line_and_column(tmp_path: Path) -> None:
    rows = _good_rows()
    rows[1]["Response_Count"] = "two"
    with pytest.raises(ValueError, match=r"n\.csv, line 3, column Response_Count: 'two' is not a whole number"):
        read_norms(_write(tmp_path / "n.csv", rows))


def test_counts_must_add_up(tmp_path: Path) -> None:
    rows = _good_rows()
    rows[0]["Response_Count"] = 4
    with pytest.raises(ValueError, match=r"position \(text_id=1, word_num=2\): Response_Count adds up to 6 but .* 5"):
        read_norms(_write(tmp_path / "n.csv", rows))


def test_word_must_be_in_text(tmp_path: Path) -> None:
    rows = _good_rows()
    for r in rows[:2]:
        r["Word"] = "dog"
    with pytest.raises(ValueError, match=r"line 2: position \(text_id=1, word_num=2\): Word 'dog' is not .* 'cat'"):
        read_norms(_write(tmp_path / "n.csv", rows))


def test_word_must_agree_within_a_position(tmp_path: Path) -> None:
    rows = _good_rows()
    rows[1]["Word"] = "cat."
    with pytest.raises(ValueError, match=r"line 3, column Word: position \(text_id=1, word_num=2\) has 'cat\.'"):
        read_norms(_write(tmp_path / "n.csv", rows))


def test_text_must_agree_within_a_passage(tmp_path: Path) -> None:
    rows = _good_rows()
    rows[2]["Text"] = "Another text entirely."
    with pytest.raises(ValueError, match=r"line 4: Text of Text_ID 1 differs"):
        read_norms(_write(tmp_path / "n.csv", rows))


# ----------------------------------------------------------------------------- samples


def _jsonl(path: Path, records: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_read_samples_both_forms_normalised(tmp_path: Path) -> None:
    path = _jsonl(
        tmp_path / "s.jsonl",
        [
            {"text_id": 1, "word_num": 2, "samples": ["Cat", "cat.", "dog", "?"], "model": "x"},
            {"text_id": "1", "word_num": "4", "counts": {"The": 3, "the": 1, "A": 0}},
        ],
    )
    counts = read_samples(path)
    assert counts.to_dict("list") == {
        "text_id": [1, 1, 1],
        "word_num": [2, 2, 4],
        "word": ["cat", "dog", "the"],
        "count": [2, 1, 4],
    }


def test_samples_round_trip(tmp_path: Path) -> None:
    counts = pd.DataFrame(
        {"text_id": [1, 1, 2], "word_num": [2, 2, 5], "word": ["a", "caf\xe9", "b"], "count": [3, 1, 7]}
    )
    write_samples(tmp_path / "s.jsonl", counts)
    pd.testing.assert_frame_equal(read_samples(tmp_path / "s.jsonl"), counts, check_dtype=False)


@pytest.mark.parametrize(
    ("records", "message"),
    [
        (["{not json"], r"line 1: not valid JSON"),
        ([[1, 2]], r"line 1: expected a JSON object"),
        ([{"word_num": 2, "samples": []}], r"line 1: missing key 'text_id'"),
        ([{"text_id": 1, "word_num": 0, "samples": []}], r"line 1: 'word_num' must be at least 1"),
        ([{"text_id": True, "word_num": 2, "samples": []}], r"line 1: 'text_id' must be an integer"),
        ([{"text_id": 1, "word_num": 2}], r"line 1: give exactly one of 'samples'"),
        ([{"text_id": 1, "word_num": 2, "samples": ["a"], "counts": {}}], r"line 1: give exactly one"),
        ([{"text_id": 1, "word_num": 2, "samples": "abc"}], r"line 1: 'samples' must be a list of strings"),
        ([{"text_id": 1, "word_num": 2, "counts": {"a": -1}}], r"line 1: count of 'a' must be a non-negative"),
        ([{"text_id": 1, "word_num": 2, "counts": {"a": 1.5}}], r"line 1: count of 'a' must be a non-negative"),
        (
            [{"text_id": 1, "word_num": 2, "samples": []}, {"text_id": 1, "word_num": 2, "samples": []}],
            r"line 2: position \(text_id=1, word_num=2\) already given on line 1",
        ),
        ([], r"no records"),
    ],
)
def test_bad_samples_file(tmp_path: Path, records: list[object], message: str) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records), encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        read_samples(path)


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"samples": ["the", "to an attacked skunk"]}, r"line 2: 'to an attacked skunk' is not one word"),
        ({"counts": {"lyclocked\tpublic": 1}}, r"line 2: 'lyclocked\\tpublic' is not one word"),
        ({"samples": ["Failed to generate word"]}, "line 2: 'Failed to generate word' is the reference code's failure"),
    ],
)
def test_read_samples_rejects_what_is_not_one_word(tmp_path: Path, record: dict[str, object], message: str) -> None:
    path = tmp_path / "s.jsonl"
    good = {"text_id": 1, "word_num": 1, "samples": ["a"]}
    path.write_text(json.dumps(good) + "\n" + json.dumps({"text_id": 1, "word_num": 2, **record}) + "\n")
    with pytest.raises(ValueError, match=f"{path}, {message}"):
        read_samples(path)


def test_read_surface_samples_keeps_what_was_generated(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps({"text_id": 1, "word_num": 2, "samples": ["Parker", "parker.", "Parker", "?"]}) + "\n")
    surfaces = read_surface_samples(path)
    assert list(surfaces["surface"]) == ["Parker", "parker."] and list(surfaces["word"]) == ["parker", "parker"]
    assert list(surfaces["count"]) == [2, 1]
    assert read_samples(path)[["word", "count"]].values.tolist() == [["parker", 3]]


def test_convert_reference_generations_reports_damage_by_position(tmp_path: Path) -> None:
    def entry(context: str, word: str, preds: list[tuple[str, int]]) -> dict[str, object]:
        samples = [{"pred": p, "count": c} for p, c in preds]
        return {"context": {"text": context}, "original": {"pred": word}, "ancestral_samples": samples}

    data = {
        "3": {
            "2": entry("A", "b", [("b", 2), ("Failed to generate word", 1), ("two words", 1)]),
            "4": entry("A b c", "d", [("d", 1)]),
            "5": entry("A b c", "d", [("d", 1)]),  # the same position stored again under the next number
        }
    }
    (tmp_path / "p.json").write_text(json.dumps(data), encoding="utf-8")
    report = convert_reference_generations([tmp_path / "p.json"], tmp_path / "out.jsonl")
    assert report == {
        "records": 2,
        "failures_dropped": 1,
        "not_one_word_dropped": 1,
        "duplicate_entries": ["3-5"],
        "missing_positions": ["3-3"],
    }
    assert read_samples(tmp_path / "out.jsonl")[["word_num", "word", "count"]].values.tolist() == [
        [2, "b", 2],
        [4, "d", 1],
    ]
    known = pd.DataFrame({"text_id": [3, 3, 3], "word_num": [2, 4, 6]})  # the norms have no word 3 but a word 6
    report = convert_reference_generations([tmp_path / "p.json"], tmp_path / "out.jsonl", known=known)
    assert report["missing_positions"] == ["3-6"]


def test_convert_released_lists_drops_several_words(tmp_path: Path) -> None:
    data = [["ctx", {"text_id": "1", "word_num": "2"}, [" to an attacked skunk"], ["lyclocked\tpublic", "a"]]]
    (tmp_path / "in.json").write_text(json.dumps(data), encoding="utf-8")
    report = convert_released_lists(tmp_path / "in.json", tmp_path / "out.jsonl")
    assert report["not_one_word_dropped"] == 1 and report["samples"] == 1
    assert read_samples(tmp_path / "out.jsonl")["word"].tolist() == ["a"]


def test_the_papers_damaged_passage_converts_with_a_report(tmp_path: Path) -> None:
    """The released 1,000-sample file of passage 3: word 45 missing, entry 59 a copy of 58 (not in the norms)."""
    path = Path(__file__).resolve().parents[2] / "shared/data/provo/predict_next_word/GPT2_Generations_partial"
    if not (path / "Paragraphs-3-3.json").is_file():
        pytest.skip(f"real data not available: {path}")
    report = convert_reference_generations([path / "Paragraphs-3-3.json"], tmp_path / "p3.jsonl")
    assert report["duplicate_entries"] == ["3-59"] and report["missing_positions"] == ["3-45"]
    assert report["failures_dropped"] > 0 and report["records"] == 56
    samples = read_samples(tmp_path / "p3.jsonl")
    assert samples["word_num"].max() == 58 and 45 not in set(samples["word_num"])


def test_merge_sample_files_of_disjoint_folds(tmp_path: Path) -> None:
    """GPT2_F: the held-out folds' samples of the fine-tuned model become one system's file."""
    (tmp_path / "a.jsonl").write_text(json.dumps({"text_id": 1, "word_num": 2, "counts": {"The": 2}}) + "\n")
    (tmp_path / "b.jsonl").write_text(json.dumps({"text_id": 3, "word_num": 2, "samples": ["a", "a"]}) + "\n")
    assert merge_sample_files([tmp_path / "a.jsonl", tmp_path / "b.jsonl"], tmp_path / "ft.jsonl") == 2
    merged = read_samples(tmp_path / "ft.jsonl")
    assert merged[["text_id", "word", "count"]].values.tolist() == [[1, "the", 2], [3, "a", 2]]
    with pytest.raises(ValueError, match=r"b.jsonl: position \(text_id=3, word_num=2\) is also in .*b.jsonl"):
        merge_sample_files([tmp_path / "b.jsonl", tmp_path / "b.jsonl"], tmp_path / "bad.jsonl")


def test_finetuned_system_name_must_be_free() -> None:
    from unsure.config import ConfigError, parse_config

    raw = yaml.safe_load((Path(__file__).resolve().parents[1] / "config" / "demo.yaml").read_text())
    raw["studies"]["nextword"]["sample_files"] = {"tiny-gpt2-ft": "x.jsonl"}
    with pytest.raises(ConfigError, match="tiny-gpt2-ft is the fine-tuned model's system"):
        parse_config(raw)


def test_a_utf8_copy_of_the_norms_reads_as_the_latin1_original(tmp_path: Path) -> None:
    """A re-saved UTF-8 copy was read as Latin-1: 'café' became 'cafÃ©' without a word of warning."""
    text = "The café sat. It slept."
    rows = [_row(1, 2, text, "café", "café", 3, 5), _row(1, 2, text, "café", "bar", 2, 5)]
    original = read_norms(_write(tmp_path / "latin1.csv", rows))
    utf8 = tmp_path / "utf8.csv"
    utf8.write_text((tmp_path / "latin1.csv").read_bytes().decode("latin-1"), encoding="utf-8")
    pd.testing.assert_frame_equal(read_norms(utf8), original)
    assert original.loc[0, "corpus_word"] == "café"

"""``protocol: paper``: Table 1 as the authors' code computes it, on the real Provo norms and released samples.

Skipped cleanly when ../shared/data/provo is absent. The human responses go
through the norms reader (written out as an OSF CSV first, as in
test_nextword_real), the paper's released samples through the documented
sample-files route (converted, then read back), and the metrics are the
library functions. Every printed Table 1 cell of the Human, Oracle, GPT-2
(T=0.5), BLOOM, ChatGPT and ChatGPT-D columns is checked within 0.01, except
the Human x oracle-majority cell, a copy of GPT-2's value (documented).
The tables script (the ``nextword_tables`` rule's) is run on generated norms
without the real data: the reproduction ledger and Table 1 under each protocol.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from unsure.nextword import paper, reproduction
from unsure.nextword.data import convert_reference_generations, convert_released_lists, read_norms, read_samples
from unsure.nextword.distributions import human_counts
from unsure.nextword.metrics import expected_tvd

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "provo"
RELEASED = SHARED / "predict_next_word"
METRICS = ("ece_corpus_word", "ece_human_majority", "ece_oracle_majority", "expected_tvd")


def test_paper_ece_puts_one_in_no_bin() -> None:
    items = [(1.0, 1), (1.0, 1), (0.55, 0)]
    # Ours: 1.0 is in the top bin (gap 0); the authors' loop drops it from every bin but keeps N = 3.
    assert paper.ece(items) == pytest.approx(0.55 / 3)


def test_paper_ties_go_to_first_in_list_and_split_mutates() -> None:
    words, probs = paper.estimator(["b", "A", "a", "b", paper.FAILURE, ""])
    assert words == ["b", "a"] and probs.dtype == np.float32
    assert paper.mode_hit(words, probs, ["a", "b"], np.asarray([0.5, 0.5], dtype=np.float32)) == (0.5, 0)
    responses = [f"w{i}" for i in range(41)]
    first, rest = paper.oracle_split(responses, 3)
    assert len(responses) == 40 and len(first) == 20 and len(rest) == 20
    assert set(first).isdisjoint(rest)
    assert rest == [w for w in responses if w not in first]  # the rest keeps the list's own order


def test_convert_released_lists_merges_repeats_and_drops_marker(tmp_path: Path) -> None:
    data = [
        ["ctx", {"text_id": "1", "word_num": "2"}, [], ["a", paper.FAILURE]],
        ["ctx", {"text_id": "1", "word_num": "2"}, [], ["b"]],
        ["ctx", {"text_id": "1", "word_num": "3"}, [], ["c"]],
    ]
    (tmp_path / "in.json").write_text(json.dumps(data), encoding="utf-8")
    report = convert_released_lists(tmp_path / "in.json", tmp_path / "out.jsonl")
    assert report == {
        "positions": 2,
        "entries": 3,
        "repeated_positions": 1,
        "failures_dropped": 1,
        "not_one_word_dropped": 0,
        "samples": 3,
    }
    # corrected reads the merged samples; paper visits the release entry by entry, words as released
    assert read_samples(tmp_path / "out.jsonl")[["word_num", "word", "count"]].values.tolist() == [
        [2, "a", 1],
        [2, "b", 1],
        [3, "c", 1],
    ]
    assert paper.read_raw_samples(tmp_path / "out.jsonl") == [
        ((1, 2), ["a", paper.FAILURE]),
        ((1, 2), ["b"]),
        ((1, 3), ["c"]),
    ]
    with pytest.raises(ValueError, match="entry 0"):
        (tmp_path / "bad.json").write_text(json.dumps([["ctx", {"text_id": "x", "word_num": 1}, [], []]]))
        convert_released_lists(tmp_path / "bad.json", tmp_path / "bad.jsonl")


def test_convert_reference_generations_keeps_sample_order(tmp_path: Path) -> None:
    # The authors' ties go to the first word seen, so the converted file must keep the released order.
    entry = {"ancestral_samples": [{"pred": "b", "count": 2}, {"pred": "a", "count": 2}]}
    (tmp_path / "p.json").write_text(json.dumps({"1": {"2": entry}}), encoding="utf-8")
    convert_reference_generations([tmp_path / "p.json"], tmp_path / "out.jsonl")
    assert paper.read_raw_samples(tmp_path / "out.jsonl") == [((1, 2), ["b", "b", "a", "a"])]


def test_paper_visits_the_release_in_file_order_and_drops_its_last_entry(tmp_path: Path) -> None:
    """The authors' loop: every released entry once, a repeated position twice, the file's last entry unscored."""
    data = [
        ["ctx", {"text_id": "1", "word_num": "3"}, [], ["x"] * 4],
        ["ctx", {"text_id": "1", "word_num": "2"}, [], ["a"] * 4],
        ["ctx", {"text_id": "1", "word_num": "3"}, [], ["c"] * 4],
        ["ctx", {"text_id": "1", "word_num": "2"}, [], ["b"] * 4],
    ]
    (tmp_path / "in.json").write_text(json.dumps(data), encoding="utf-8")
    convert_released_lists(tmp_path / "in.json", tmp_path / "out.jsonl")
    visits = paper.read_raw_samples(tmp_path / "out.jsonl")
    assert visits == [((1, 3), ["x"] * 4), ((1, 2), ["a"] * 4), ((1, 3), ["c"] * 4), ((1, 2), ["b"] * 4)]
    human = {(1, 2): ["a"] * 22, (1, 3): ["c"] * 22}
    corpus = {(1, 2): "a", (1, 3): "c"}
    col = paper.model_column("m", visits, human, corpus)
    # Three visits scored (x against c: TVD 1; a and c: TVD 0); b, the file's last entry, is not.
    assert col.n_positions == 3 and col.expected_tvd_human == pytest.approx(1 / 3)
    # Merged and sorted instead, 1-3 would be dropped and 1-2 scored once on a and b: another column.
    merged = paper.model_column("m", [((1, 2), ["a"] * 4 + ["b"] * 4), ((1, 3), ["x"] * 4 + ["c"] * 4)], human, corpus)
    assert merged.n_positions == 1 and merged.expected_tvd_human == pytest.approx(0.5)


def test_read_raw_samples_checks_the_released_key(tmp_path: Path) -> None:
    rows = [
        {"text_id": 1, "word_num": 2, "samples": ["a"], "released": [{"entry": 0, "words": ["a"]}]},
        {"text_id": 1, "word_num": 3, "samples": ["b"]},
    ]
    (tmp_path / "some.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(ValueError, match="line 2: 'released' is on some records only"):
        paper.read_raw_samples(tmp_path / "some.jsonl")
    rows[1]["released"] = [{"entry": 0, "words": ["b"]}]
    (tmp_path / "twice.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 2: released entry 0 is also given at position \(1, 2\)"):
        paper.read_raw_samples(tmp_path / "twice.jsonl")


def _authors_response_order() -> dict[tuple[int, int], list[str]]:
    """Each position's responses in the order of the authors' own files (their ``human`` lists)."""
    order: dict[tuple[int, int], list[str]] = {}
    for path in sorted((RELEASED / "GPT2_Temp_Generations").glob("*.json")):
        for tid, words in json.loads(path.read_text(encoding="utf-8")).items():
            for num, record in words.items():
                order[(int(tid), int(num))] = [h["pred"] for h in record["human"] if isinstance(h["pred"], str)]
    return order


def _in_the_authors_order(records: list[dict[str, object]]) -> list[dict[str, object]]:
    """The norms records with each position's responses in the authors' order, as the OSF file gives them.

    ``provo_human_cloze.jsonl`` lists responses by descending count; the
    authors' lists (``Response.unique()`` over the OSF rows) are not in that
    order at 434 positions, and their ties and oracle draws follow it.
    """
    order = _authors_response_order()
    out = []
    for r in records:
        rank = {w: i for i, w in enumerate(order[(int(r["text_id"]), int(r["word_num"]))])}  # type: ignore[call-overload]
        responses: list[dict[str, object]] = r["responses"]  # type: ignore[assignment]
        out.append({**r, "responses": sorted(responses, key=lambda x: rank.get(x["response"], len(rank)))})
    return out


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    if not (SHARED / "provo_human_cloze.jsonl").is_file() or not RELEASED.is_dir():
        pytest.skip(f"real data not available: {SHARED} (provo_human_cloze.jsonl, predict_next_word/)")
    from test_nextword_real import _write_osf_csv

    tmp = tmp_path_factory.mktemp("paper")
    records = [json.loads(line) for line in (SHARED / "provo_human_cloze.jsonl").open(encoding="utf-8")]
    _write_osf_csv(_in_the_authors_order(records), tmp / "norms.csv")
    positions = read_norms(tmp / "norms.csv")
    files = {"gpt2-t0.5": tmp / "gpt2-t0.5.jsonl", "bloom": tmp / "bloom.jsonl"}
    files.update({"chatgpt": tmp / "chatgpt.jsonl", "chatgpt-d": tmp / "chatgpt-d.jsonl"})
    convert_reference_generations(sorted((RELEASED / "GPT2_Temp_Generations").glob("*.json")), files["gpt2-t0.5"])
    other = RELEASED / "other_model_generations"
    reports = {
        "bloom": convert_released_lists(other / "processed_bloom.json", files["bloom"]),
        "chatgpt": convert_released_lists(other / "processed_chatgpt.json", files["chatgpt"], key="unbiased_temp_1"),
        "chatgpt-d": convert_released_lists(other / "processed_chatgpt.json", files["chatgpt-d"], key="diverse"),
    }
    print(f"\nconverted released samples: {reports}")
    assert reports["bloom"]["repeated_positions"] == 13 and reports["chatgpt"]["repeated_positions"] == 14
    assert (reports["bloom"]["entries"], reports["bloom"]["positions"]) == (670, 657)
    assert (reports["chatgpt"]["entries"], reports["chatgpt"]["positions"]) == (501, 487)
    human, corpus = paper.human_lists(positions)
    cols = [*paper.human_and_oracle_columns(human, corpus)]
    for name, path in files.items():
        cols.append(
            paper.model_column(name, paper.read_raw_samples(path), human, corpus, trimmed_human=name == "chatgpt-d")
        )
    counts = human_counts(positions)
    corrected = {
        name: {"expected_tvd": expected_tvd(read_samples(p), counts, missing="drop")} for name, p in files.items()
    }
    return {"cols": {c.system: c for c in cols}, "table": reproduction.reproduction_table(cols, corrected)}


def test_paper_protocol_scores_the_authors_positions(real: dict[str, object]) -> None:
    """The authors' loops: every released entry but the file's last (the paper's counts), GPT-2 all but one."""
    cols: dict[str, paper.PaperColumn] = real["cols"]  # type: ignore[assignment]
    scored = {name: cols[name].n_positions for name in ("gpt2-t0.5", "bloom", "chatgpt", "chatgpt-d")}
    assert scored == {"gpt2-t0.5": 2686, **reproduction.PRINTED_CONTEXTS}
    assert reproduction.PRINTED_CONTEXTS == {"bloom": 669, "chatgpt": 500, "chatgpt-d": 500}


def test_paper_protocol_equals_the_notebooks_stored_chatgpt_cells(real: dict[str, object]) -> None:
    """ChatGPT's corpus-word and oracle-majority ECE are the notebook's stored outputs to the last digit.

    ``TVD/ChatGPT/chatgpt_processing.ipynb`` prints 0.44516208785772327 and
    0.3726620878577232 (the mean over the 20 oracle draws, which follow the
    human lists' order). Its human-majority cell (0.3692) and expected TVD
    (0.76164) are not ours: the notebook ran on human lists that are not the
    released ones (the TVD involves no ties or draws).
    """
    col: paper.PaperColumn = real["cols"]["chatgpt"]  # type: ignore[index]
    assert col.ece_corpus_word == pytest.approx(0.44516208785772327, abs=1e-12)
    assert col.ece_oracle_majority == pytest.approx(0.3726620878577232, abs=1e-12)


@pytest.mark.parametrize("system", ["gpt2-t0.5", "bloom", "chatgpt", "chatgpt-d"])
def test_paper_protocol_rounds_to_the_printed_digits(real: dict[str, object], system: str) -> None:
    """Each printed cell of the released columns, rounded to two digits, except the cells the ledger explains."""
    col: paper.PaperColumn = real["cols"][system]  # type: ignore[index]
    for metric in METRICS:
        want = reproduction.PRINTED_TABLE1[system][metric]
        got = col.expected_tvd_human if metric == "expected_tvd" else getattr(col, metric)
        if (system, metric) in reproduction.UNMATCHED_CELLS:
            assert got == pytest.approx(0.0739, abs=5e-5) and want == 0.08  # one tied mode away (see the note)
            continue
        assert f"{got:.2f}" == f"{want:.2f}", f"{system} {metric}: ours {got:.4f}, printed {want}"
    assert set(reproduction.UNMATCHED_CELLS) == {("chatgpt-d", "ece_human_majority")}


@pytest.mark.parametrize("system", ["human", "oracle", "gpt2-t0.5", "bloom", "chatgpt", "chatgpt-d"])
def test_paper_protocol_reproduces_printed_table1(real: dict[str, object], system: str) -> None:
    col: paper.PaperColumn = real["cols"][system]  # type: ignore[index]
    printed = reproduction.PRINTED_TABLE1[system]
    for metric in METRICS:
        want = printed[metric]
        if want is None:
            continue
        got = col.expected_tvd_human if metric == "expected_tvd" else getattr(col, metric)
        if (system, metric) in reproduction.COPY_PASTE_CELLS:
            # The printed 0.19 is GPT-2's cell; the intended value (human MLE vs oracle majority) is far from it.
            assert want == reproduction.PRINTED_TABLE1["gpt2"][metric]
            assert got == pytest.approx(0.41, abs=0.01)
            continue
        assert got == pytest.approx(want, abs=0.01), f"{system} {metric}: ours {got:.4f}, printed {want}"


def test_reproduction_table_expected_tvd_under_both_protocols(real: dict[str, object]) -> None:
    table: pd.DataFrame = real["table"]  # type: ignore[assignment]
    models = ["gpt2-t0.5", "bloom", "chatgpt", "chatgpt-d"]
    tvd = table[(table["metric"] == "expected_tvd") & table["system"].isin(models)]
    print("\n" + table.drop(columns=["difference", "note"]).round(3).to_string())
    assert len(tvd) == 4
    assert np.allclose(tvd["paper"], tvd["printed"], atol=0.01)
    assert np.allclose(tvd["corrected"], tvd["printed"], atol=0.01)
    cells = table[table["metric"] != "n_positions"]
    assert (table["difference"] != "").all() and cells["printed"].notna().all()
    # The positions row: the paper's stated contexts, scored under paper; its note names both position rules.
    n = table[table["metric"] == "n_positions"].set_index("system")
    assert n.loc[["bloom", "chatgpt", "chatgpt-d"], "paper"].tolist() == [669, 500, 500]
    assert n.loc[["bloom", "chatgpt", "chatgpt-d"], "printed"].tolist() == [669, 500, 500]
    assert np.isnan(n.loc["gpt2-t0.5", "printed"]) and "released_entries" in n.loc["bloom", "difference"]


class _Named(list):  # type: ignore[type-arg]
    """A stand-in for Snakemake's named lists: positional items first, then the named ones, also as attributes."""

    def __init__(self, *items: object, **named: object) -> None:
        super().__init__([*items, *named.values()])
        self.__dict__.update(named)


def _run_tables_script(tmp: Path, protocol: str, inputs: dict[str, object], systems: list[str]) -> Path:
    """Run scripts/nextword/tables.py as the nextword_tables rule does (no biased or token models)."""
    import runpy
    from types import SimpleNamespace

    out = tmp / protocol
    smk = SimpleNamespace(
        input=_Named(**inputs, samples=[], biased=[], tokens=[]),
        output=_Named(
            table1=str(out / "table1.csv"),
            tokens=str(out / "token_tvd.parquet"),
            biased_tvd=str(out / "biased_tvd.parquet"),
        ),
        log=[str(out / "tables.log")],
        params=SimpleNamespace(
            systems=systems,
            biased_models=[],
            token_models=[],
            n_bins=10,
            protocol=protocol,
            passages=[1, 2],
            printed=protocol == "paper",  # the corrected run stands for generated norms: no printed values
        ),
    )
    runpy.run_path(str(Path(__file__).resolve().parents[1] / "scripts" / "nextword" / "tables.py"), {"snakemake": smk})
    return out


def test_tables_write_the_reproduction_ledger_and_table1_follows_the_protocol(tmp_path: Path) -> None:
    """Generated norms and two hand-written samples files through the tables script under both protocols."""
    from unsure.generate import provo
    from unsure.nextword.tables import evaluate_systems, prepare

    norms = tmp_path / provo.NORMS_FILENAME
    provo.write_norms(norms, n_passages=3, seed=1)
    study = prepare(norms, passages=[1, 2], splits=3, seed=0)
    rng = np.random.default_rng(0)
    files = {"gpt2-t0.5": tmp_path / "gpt2-t0.5.jsonl", "zoo": tmp_path / "zoo.jsonl"}
    vocab = ["the", "a", "The", "house", "nationwide."]
    for path in files.values():
        lines = [
            json.dumps({"text_id": int(t), "word_num": int(n), "samples": list(rng.choice(vocab, size=8))})
            for t, n in study["positions"][["text_id", "word_num"]].itertuples(index=False)
        ]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    systems = {name: read_samples(path, known=study["human"]) for name, path in files.items()}
    metrics, _ = evaluate_systems(systems, study["human"], study["corpus"], study["splits"])
    inputs: dict[str, object] = {}
    for name in ("human", "corpus", "splits"):
        study[name].to_parquet(tmp_path / f"{name}.parquet")
        inputs[name] = str(tmp_path / f"{name}.parquet")
    metrics.to_parquet(tmp_path / "metrics.parquet")
    ard = pd.DataFrame({"feature": ["x"], "coef": [0.1], "sd": [0.1], "lower": [0.0], "upper": [0.2], "pruned": [0]})
    ard.to_parquet(tmp_path / "ard.parquet")
    inputs.update(metrics=str(tmp_path / "metrics.parquet"), ard=str(tmp_path / "ard.parquet"), norms=str(norms))
    inputs["systems"] = [str(p) for p in files.values()]

    shown, ledgers = {}, {}
    for protocol in ("paper", "corrected"):
        out = _run_tables_script(tmp_path, protocol, inputs, list(files))
        assert all((out / f"reproduction.{ext}").is_file() for ext in ("csv", "md", "tex"))
        shown[protocol] = pd.read_csv(out / "table1.csv").set_index("metric")
        ledgers[protocol] = pd.read_csv(out / "reproduction.csv", keep_default_na=False, na_values=[""])
    ledger = ledgers["paper"]
    pd.testing.assert_frame_equal(
        ledger.drop(columns=["printed", "note"]), ledgers["corrected"].drop(columns=["printed", "note"])
    )  # both values whatever the protocol
    assert ledgers["corrected"]["printed"].isna().all() and (ledgers["corrected"]["note"].fillna("") == "").all()
    # One row per Table 1 cell: 4 per model, 3 for the human (no expected TVD), 4 for the oracle.
    cells = [
        (s, m)
        for s in [*files, "human", "oracle"]
        for m in reproduction.DIFFERENCES
        if (s, m) != ("human", "expected_tvd")
    ]
    assert list(zip(ledger["system"], ledger["metric"], strict=True)) == cells
    assert ledger[["paper", "corrected"]].notna().all().all() and (ledger["difference"] != "").all()
    printed = ledger.set_index(["system", "metric"])["printed"]
    assert printed["zoo"].isna().all()  # not one of the paper's columns
    assert printed[("gpt2-t0.5", "ece_corpus_word")] == 0.35 and printed[("oracle", "expected_tvd")] == 0.42
    # Table 1 shows the protocol's values: the ledger's paper column under paper, its corrected column otherwise.
    labels = {"ece_corpus_word": "ECE (corpus word)", "ece_human_majority": "ECE (human majority)"}
    labels.update(ece_oracle_majority="ECE (oracle majority)", n_positions="positions")
    for (system, metric), row in ledger.set_index(["system", "metric"]).iterrows():
        if metric == "expected_tvd":
            label = "expected TVD (target half)" if system == "oracle" else "expected TVD (all responses)"
        else:
            label = labels[metric]
        assert shown["paper"].loc[label, system] == pytest.approx(row["paper"]), (system, metric)
        assert shown["corrected"].loc[label, system] == pytest.approx(row["corrected"]), (system, metric)
    assert not np.allclose(ledger["paper"], ledger["corrected"])  # the protocols differ on these inputs
    assert np.isnan(shown["paper"].loc["expected TVD (all responses)", "oracle"])

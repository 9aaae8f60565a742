"""decisionrisk on the demo: the chat model's replies are ones the study can read.

The zoo's instruct model is trained to answer the room's confidence-per-option
prompt (:mod:`unsure.zoo.corpus.decisionrisk`); a randomly initialised one
writes text no parser accepts, and the study then records the reply as
unparseable and gives it uniform confidences (``parsed`` false), so the chat
panel of the figure is empty. The checks read how the study records this: the
``parsed`` flags of the confidence sets and the ``verbal_parse`` table, and
re-parse the raw replies with the study's own parser.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from unsure.decisionrisk.confidences import parse_verbal

MOST = 0.5
"""A share above which "most" replies parse."""


def _read(folder: Path) -> pd.DataFrame:
    files = sorted(folder.glob("*.parquet"))
    if not files:
        pytest.fail(f"{folder}: no parquet files (did the demo run the decisionrisk study?)")
    return pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)


@pytest.fixture(scope="module")
def study(demo_results: Path) -> Path:
    return demo_results / "decisionrisk"


@pytest.fixture(scope="module")
def verbal(study: Path) -> pd.DataFrame:
    """The chat models' verbal confidence sets on the validation rows, with each row's instance."""
    confidences = _read(study / "scores" / "confidences")
    instances = _read(study / "instances")[["row_id", "benchmark", "split", "injection", "choices", "label"]]
    rows = confidences[confidences["method"] == "verbal"].merge(instances, on="row_id", validate="many_to_one")
    if rows.empty:
        pytest.fail("the demo scored no chat model's verbal confidences")
    return rows


@pytest.fixture(scope="module")
def replies(study: Path, verbal: pd.DataFrame) -> pd.DataFrame:
    """The chat models' raw replies (the generative shards) with the number of choices of each row."""
    parts = []
    for model in sorted(verbal["model"].unique()):
        shards = _read(study / "scores" / "generative" / model)
        parts.append(shards[["row_id", "reply", "parsed"]].assign(model=model))
    choices = verbal[["row_id", "choices"]].drop_duplicates("row_id")
    return pd.concat(parts, ignore_index=True).merge(choices, on="row_id", validate="many_to_one")


def test_most_chat_replies_parse(verbal: pd.DataFrame) -> None:
    shares = verbal.groupby("model")["parsed"].mean()
    assert (shares > MOST).all(), f"share of parsed replies per chat model:\n{shares.to_string()}"


def test_every_benchmark_has_parsed_replies(verbal: pd.DataFrame) -> None:
    """Not only the two-option benchmarks: the three- and four-option ones parse too."""
    shares = verbal.groupby(["model", "benchmark"])["parsed"].mean()
    assert (shares > MOST).all(), f"share of parsed replies:\n{shares.to_string()}"


def test_parsed_flags_are_the_parsers_verdict(replies: pd.DataFrame) -> None:
    """The recorded flags are what the study's parser says of the raw replies."""
    verdict = [parse_verbal(r, len(c)) is not None for r, c in zip(replies["reply"], replies["choices"], strict=True)]
    assert np.array_equal(np.array(verdict), replies["parsed"].to_numpy(dtype=bool))


def test_parsed_confidences_are_distributions(verbal: pd.DataFrame) -> None:
    parsed = verbal[verbal["parsed"]]
    for conf, choices in zip(parsed["confidences"], parsed["choices"], strict=True):
        assert len(conf) == len(choices)
        assert np.all(np.asarray(conf) >= 0) and np.isclose(np.sum(conf), 1.0)


def test_verbal_parse_table_agrees(study: Path, verbal: pd.DataFrame) -> None:
    """The table the report shows counts the same unparseable replies, and they are a minority."""
    table = pd.read_csv(study / "tables" / "verbal_parse.csv")
    counted = verbal.groupby(["model", "benchmark"])["parsed"].agg(replies="size", parsed="sum").reset_index()
    merged = table.merge(counted, on=["model", "benchmark"], validate="one_to_one")
    assert len(merged) == len(table) == len(counted)
    assert (merged["replies_x"] == merged["replies_y"]).all()
    assert (merged["unparseable"] == merged["replies_y"] - merged["parsed"]).all()
    assert table["unparseable"].sum() / table["replies"].sum() < 1 - MOST, table.to_string()

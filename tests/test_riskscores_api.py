"""Risk scores of a chat API model (gpt-4o-mini's case): both promptings run through the
loopback OpenAI-compatible server, the answer prefix ending the user turn."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_engine_sampling import fixed_distribution_model

from openai_server import Server
from unsure.config import Model, ZooModel
from unsure.engine import ChoiceRequest, load_engine
from unsure.engine.hf import HFEngine
from unsure.riskscores.prompts import LETTERS, NUMERIC_PREFIX, build_prompt, positive_letter
from unsure.riskscores.scoring import make_scorer
from unsure.riskscores.tasks import FOLKTABLES
from unsure.zoo.build import build, training_texts

KEY = "sk-test-riskscores"
ENV = "UNSURE_TEST_RISKSCORES_KEY"
TASK = FOLKTABLES["ACSIncome"]
ROWS = pd.DataFrame({"row_id": ["r0", "r1"], "text": ["- Age is: 30 years old.", "- Age is: 61 years old."]})


@pytest.fixture(scope="module")
def fixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A chat model answering ``▁A`` 0.4, ``▁B`` 0.25, ``A`` 0.05 (and other tokens) after every context."""
    root = tmp_path_factory.mktemp("riskscores-api")
    spec = ZooModel(architecture="llama", vocab_size=2000, hidden_size=64, layers=2, heads=4, chat=True)
    build("llama-chat", spec, training_texts(seed=0, n_sentences=3000), root / "chat", zoo_seed=0)
    probs = {"▁A": 0.4, "▁B": 0.25, "A": 0.05, "▁the": 0.1, "▁cat": 0.1, ".": 0.05, "7": 0.03, "3": 0.02}
    return fixed_distribution_model(root / "chat", root / "fixed", probs)


@pytest.fixture(scope="module")
def server(fixed: Path) -> Iterator[Server]:
    running = Server(fixed, key=KEY)
    yield running
    running.close()


def test_the_scorer_runs_for_a_chat_api_model(server: Server, fixed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, KEY)
    entry = Model(id="gpt-4o-mini", backend="openai", base_url=server.base_url, api_key_env=ENV, instruct=True, gpus=0)
    engine = load_engine(entry, concurrency=1)  # one at a time: the canned replies go out in order

    def score(kind: str) -> pd.DataFrame:
        scorer = make_scorer(engine, TASK, kind, year=2018, instruct=True, both_orders=True, protocol="corrected")
        return scorer(ROWS)

    mc = score("multiple_choice")
    # order 0 shows the positive option as B, order 1 as A: (0.25 + 0.4) / 2 / 0.65
    np.testing.assert_allclose(mc["p_hat"], [0.5, 0.5], atol=1e-6)
    np.testing.assert_allclose(mc["mass"], [0.65, 0.65], atol=1e-6)
    sent = [r["body"]["messages"] for r in server.requests]
    want = [
        build_prompt(TASK, t, "multiple_choice", o, year=2018, protocol="corrected")
        for o in (0, 1)
        for t in ROWS["text"]
    ]
    assert sorted(m["content"] for (m,) in sent) == sorted(want)  # one user message, nothing else
    assert all(p.endswith("\nAnswer:") for p in want)
    # the transformers backend, given the same text as the user turn, reads the same letters
    local = HFEngine(str(fixed), device="cpu")
    theirs = local.choice_probs([ChoiceRequest(local.chat_prompt(p), LETTERS) for p in want])
    for o in (0, 1):
        expected = [a.probs[positive_letter(o, protocol="corrected")] for a in theirs[2 * o : 2 * o + 2]]
        np.testing.assert_allclose(mc[f"p_order{o}"], expected, atol=1e-6)

    server.requests.clear()
    server.replies.extend(["0.35", "I would say 62%."])
    numeric = score("numeric")
    np.testing.assert_allclose(numeric["p_hat"], [0.35, 0.62])
    for request, text in zip(server.requests, ROWS["text"], strict=True):
        (message,) = request["body"]["messages"]
        assert message["content"] == build_prompt(TASK, text, "numeric", 0, year=2018, protocol="corrected")
        assert message["content"].endswith(f"Question: {TASK.numeric_question}\n{NUMERIC_PREFIX}")

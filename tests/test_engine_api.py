"""The OpenAI-compatible API backend against a loopback server serving local models:
the same numbers as the transformers backend, retries, clear errors, and a key that
never leaves the environment."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from openai_server import Server
from test_engine_sampling import fixed_distribution_model

from unsure import zoo
from unsure.config import Model, ZooModel
from unsure.engine import ChoiceRequest, ContinuationRequest, Unsupported, WordSamplingRequest, load_engine
from unsure.engine.api import APIEngine, APIResponseError
from unsure.engine.hf import HFEngine

KEY = "sk-test-0123456789abcdef-never-logged"
ENV = "UNSURE_TEST_API_KEY"
FIXED = {"▁A": 0.4, "▁B": 0.25, "A": 0.05, "▁the": 0.1, "▁cat": 0.1, ".": 0.05, "7": 0.03, "3": 0.02}
"""The fixed model's next-token distribution after every context."""


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory, tiny_models: dict[str, Path]) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("api-models")
    spec = ZooModel(architecture="llama", vocab_size=2000, hidden_size=64, layers=2, heads=4, chat=True)
    zoo.build("llama-chat", spec, zoo.training_texts(seed=0, n_sentences=3000), root / "llama-chat", zoo_seed=0)
    fixed = fixed_distribution_model(root / "llama-chat", root / "fixed", FIXED)
    return {"fixed": fixed, "llama": tiny_models["llama"], "llama-chat": root / "llama-chat"}


@pytest.fixture(scope="module")
def servers(models: dict[str, Path]) -> Iterator[dict[str, Server]]:
    running = {name: Server(path, key=KEY) for name, path in models.items()}
    yield running
    for server in running.values():
        server.close()


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch, servers: dict[str, Server]) -> None:
    monkeypatch.setenv(ENV, KEY)
    for server in servers.values():
        server.fail.clear()
        server.with_logprobs = True
        server.requests.clear()


def api(server: Server, *, chat: bool, **kwargs: object) -> APIEngine:
    entry = Model(id="local", backend="openai", base_url=server.base_url, api_key_env=ENV, instruct=chat, gpus=0)
    engine = load_engine(entry, **kwargs)
    assert isinstance(engine, APIEngine)
    return engine


def hf(path: Path) -> HFEngine:
    return HFEngine(str(path), device="cpu")


@pytest.mark.parametrize("chat", [False, True])
def test_choice_probs_equal_the_transformers_backend(
    servers: dict[str, Server], models: dict[str, Path], chat: bool
) -> None:
    remote, local = api(servers["fixed"], chat=chat), hf(models["fixed"])
    users = ["Is the sky blue? A. yes B. no Answer:", "Pick one.\nA or B?"]
    for user in users:
        r_prompt = remote.chat_prompt(user) if chat else user
        l_prompt = local.chat_prompt(user) if chat else user
        (got,) = remote.choice_probs([ChoiceRequest(r_prompt, ("A", "B"))])
        (want,) = local.choice_probs([ChoiceRequest(l_prompt, ("A", "B"))])
        np.testing.assert_allclose(got.probs, want.probs, atol=1e-6)
        np.testing.assert_allclose(got.probs, [0.4 / 0.65, 0.25 / 0.65], atol=1e-6)
        assert got.mass == pytest.approx(want.mass, abs=1e-6)


def test_continuation_scores_equal_the_transformers_backend(
    servers: dict[str, Server], models: dict[str, Path]
) -> None:
    remote, local = api(servers["llama"], chat=False), hf(models["llama"])
    requests = [
        ContinuationRequest("The cat sat on the", (" mat", " dog house", " table.")),
        ContinuationRequest("Question: is water wet?\nAnswer:", (" yes", " no")),
    ]
    for got, want in zip(remote.continuation_scores(requests), local.continuation_scores(requests), strict=True):
        np.testing.assert_allclose(got.logprob, want.logprob, atol=1e-4)
        np.testing.assert_array_equal(got.n_tokens, want.n_tokens)
        np.testing.assert_array_equal(got.greedy, want.greedy)
    assert remote.tokens_processed() > 0


def test_numeric_is_folktexts_procedure_on_completions(servers: dict[str, Server], models: dict[str, Path]) -> None:
    remote, local = api(servers["fixed"], chat=False), hf(models["fixed"])
    prompt = "What is the probability? Answer (between 0 and 1): 0."
    assert remote.numeric([prompt]) == local.numeric([prompt]) == [0.77]


def test_chat_generation_equals_the_transformers_backend(servers: dict[str, Server], models: dict[str, Path]) -> None:
    remote, local = api(servers["llama-chat"], chat=True), hf(models["llama-chat"])
    users = ["Say something about cats.", "What is the probability of rain?"]
    # a random model's logits nearly tie, so long greedy runs may part on rounding: keep them short
    got = remote.generate([remote.chat_prompt(u) for u in users], max_new_tokens=6)
    assert got == local.generate([local.chat_prompt(u) for u in users], max_new_tokens=6)
    assert all(got)


def test_word_samples_come_from_the_model_and_large_n_is_split(servers: dict[str, Server]) -> None:
    remote = api(servers["fixed"], chat=False)
    (samples,) = remote.sample_words([WordSamplingRequest("Once upon a", n=150, seed=3, max_new_tokens=4)])
    assert len(samples.words) + samples.rejected == 150
    # a word is a word-start piece, then pieces without a space marker (A, 7, 3) until "." or a space
    assert all(re.fullmatch(r"(A|B|the|cat|7|3)(A|7|3)*", w) for w in samples.words), samples.words
    # the two requests run concurrently, so they may arrive in either order
    assert sorted(r["body"]["n"] for r in servers["fixed"].requests) == [22, 128]


def test_retries_429_and_5xx_then_succeeds(servers: dict[str, Server]) -> None:
    server = servers["fixed"]
    server.fail.extend([429, 503, 500])
    assert api(server, chat=True).generate(["hello"], max_new_tokens=2)
    assert len(server.requests) == 4


def test_gives_up_after_retries_with_a_clear_error(servers: dict[str, Server]) -> None:
    server = servers["fixed"]
    server.fail.extend([503] * 10)
    with pytest.raises(APIResponseError, match=r"HTTP 503 after 2 retries"):
        api(server, chat=True, max_retries=2).generate(["hello"])
    assert len(server.requests) == 3


def test_missing_logprobs_is_a_clear_error(servers: dict[str, Server]) -> None:
    server = servers["fixed"]
    server.with_logprobs = False
    for chat in (True, False):
        with pytest.raises(APIResponseError, match="returned no log-probabilities"):
            api(server, chat=chat).choice_probs([ChoiceRequest("Answer:", ("A", "B"))])


def test_chat_apis_cannot_score_given_text(servers: dict[str, Server]) -> None:
    remote = api(servers["fixed"], chat=True)
    with pytest.raises(Unsupported, match="no log-likelihoods"):
        remote.continuation_scores([ContinuationRequest("a", (" b",))])
    with pytest.raises(Unsupported, match="pre-fill"):
        remote.choice_probs([ChoiceRequest(remote.chat_prompt("q", prefill="Answer:"), ("A", "B"))])


def test_free_form_numeric_on_chat_models_parses_or_gives_nan(servers: dict[str, Server]) -> None:
    remote = api(servers["fixed"], chat=True)
    values = remote.numeric([remote.chat_prompt("What is the probability? Answer (between 0 and 1):", prefill="0.")])
    # the fixed model's greedy reply is " A A A ...": no probability in it
    assert np.isnan(values).all()


def test_the_key_comes_only_from_the_environment_and_is_never_logged(
    servers: dict[str, Server], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    server = servers["fixed"]
    caplog.set_level(logging.DEBUG)
    remote = api(server, chat=True)
    remote.choice_probs([ChoiceRequest(remote.chat_prompt("q"), ("A", "B"))])
    assert server.requests[-1]["headers"]["authorization"] == f"Bearer {KEY}"
    monkeypatch.setenv(ENV, "sk-wrong-key-also-secret")
    with pytest.raises(PermissionError, match=f"rejected the key.*{ENV}|rejected the key") as err:
        api(server, chat=True).generate(["hi"])
    assert "sk-wrong-key-also-secret" not in str(err.value)
    monkeypatch.delenv(ENV)
    with pytest.raises(ValueError, match=f"environment variable {ENV}, which is not set"):
        api(server, chat=True)
    assert KEY not in caplog.text and "sk-wrong-key-also-secret" not in caplog.text

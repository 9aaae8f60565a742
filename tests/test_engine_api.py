"""The OpenAI-compatible API backend against a loopback server serving local models:
the same numbers as the transformers backend, retries, clear errors, and a key that
never leaves the environment."""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from test_engine_sampling import fixed_distribution_model

from openai_server import Server
from unsure.config import Model, ZooModel
from unsure.engine import (
    ChoiceRequest,
    ContinuationRequest,
    NumericRequest,
    ReplyRequest,
    Unsupported,
    WordSamplingRequest,
    load_engine,
)
from unsure.engine.api import NUMERIC_REPLY_TOKENS, APIEngine, APIResponseError, letter_probs
from unsure.engine.hf import HFEngine
from unsure.engine.words import parse_probability
from unsure.zoo.build import build, training_texts

KEY = "sk-test-0123456789abcdef-never-logged"
ENV = "UNSURE_TEST_API_KEY"
FIXED = {"▁A": 0.4, "▁B": 0.25, "A": 0.05, "▁the": 0.1, "▁cat": 0.1, ".": 0.05, "7": 0.03, "3": 0.02}
"""The fixed model's next-token distribution after every context."""


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory, tiny_models: dict[str, Path]) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("api-models")
    spec = ZooModel(architecture="llama", vocab_size=2000, hidden_size=64, layers=2, heads=4, chat=True)
    build("llama-chat", spec, training_texts(seed=0, n_sentences=3000), root / "llama-chat", zoo_seed=0)
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
        server.replies.clear()
        server.requests.clear()
        server.raw.clear()
        server.delay_s = 0.0


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
    assert remote.numeric([NumericRequest(prompt)]) == local.numeric([NumericRequest(prompt)]) == [0.77]


def test_chat_generation_equals_the_transformers_backend(servers: dict[str, Server], models: dict[str, Path]) -> None:
    remote, local = api(servers["llama-chat"], chat=True), hf(models["llama-chat"])
    users = ["Say something about cats.", "What is the probability of rain?"]
    # a random model's logits nearly tie, so long greedy runs may part on rounding: keep them short
    got = remote.generate([ReplyRequest(remote.chat_prompt(u), max_new_tokens=6) for u in users])
    assert got == local.generate([ReplyRequest(local.chat_prompt(u), max_new_tokens=6) for u in users])
    assert all(got)


def test_a_server_of_several_models_answers_each_name_with_its_own_and_refuses_others(
    models: dict[str, Path],
) -> None:
    """The shadow serves each API model with its own model (one model taught every API model's
    prompts answered none of them): requests choose by the ``model`` they name."""
    server = Server({"fixed-api": models["fixed"], "chat-api": models["llama-chat"]}, key=KEY)
    try:

        def named(model_id: str, *, chat: bool = False) -> APIEngine:
            url = server.base_url
            entry = Model(id=model_id, backend="openai", base_url=url, api_key_env=ENV, instruct=chat, gpus=0)
            engine = load_engine(entry)
            assert isinstance(engine, APIEngine)
            return engine

        prompt = "What is the probability? Answer (between 0 and 1): 0."
        assert (
            named("fixed-api").numeric([NumericRequest(prompt)])
            == hf(models["fixed"]).numeric([NumericRequest(prompt)])
            == [0.77]
        )
        remote, local = named("chat-api", chat=True), hf(models["llama-chat"])
        user = "Say something about cats."
        got = remote.generate([ReplyRequest(remote.chat_prompt(user), max_new_tokens=6)])
        assert got == local.generate([ReplyRequest(local.chat_prompt(user), max_new_tokens=6)]) and all(got)
        with pytest.raises(APIResponseError, match="model `gpt-9` does not exist"):
            named("gpt-9").numeric([NumericRequest(prompt)])
    finally:
        server.close()


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
    assert api(server, chat=True).generate([ReplyRequest("hello", max_new_tokens=2)])
    assert len(server.requests) == 4


def test_gives_up_after_retries_with_a_clear_error(servers: dict[str, Server]) -> None:
    server = servers["fixed"]
    server.fail.extend([503] * 10)
    with pytest.raises(APIResponseError, match=r"HTTP 503 after 2 retries"):
        api(server, chat=True, max_retries=2).generate([ReplyRequest("hello")])
    assert len(server.requests) == 3


def test_a_status_that_is_not_retried_is_not_said_to_be(servers: dict[str, Server]) -> None:
    """A 403, sent once (the client retries 408, 409, 429 and 5xx only), was reported "after 4 retries"."""
    server = servers["fixed"]
    forbidden = json.dumps({"error": {"message": "not your model", "type": "forbidden"}}).encode()
    server.raw.append((403, forbidden))
    with pytest.raises(APIResponseError, match=r"HTTP 403 \(sent once, not retried\): .*not your model") as err:
        api(server, chat=True).generate([ReplyRequest("hello")])
    assert "retries" not in str(err.value) and len(server.requests) == 1
    server.requests.clear()
    server.raw.extend([(503, forbidden), (403, forbidden)])
    with pytest.raises(APIResponseError, match=r"HTTP 403 after 1 retry: .*not your model"):
        api(server, chat=True).generate([ReplyRequest("hello")])
    assert len(server.requests) == 2


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


def test_a_chat_prefill_ends_the_user_turn_and_letters_come_from_top_logprobs(
    servers: dict[str, Server], models: dict[str, Path]
) -> None:
    """No chat API pre-fills a reply: the prefill ends the user turn (folktexts' web-API prompt)."""
    server = servers["fixed"]
    remote, local = api(server, chat=True), hf(models["fixed"])
    user = "Is the sky blue?\nA. yes.\nB. no."
    (got,) = remote.choice_probs([ChoiceRequest(remote.chat_prompt(user, prefill="Answer:"), ("A", "B"))])
    (want,) = local.choice_probs([ChoiceRequest(local.chat_prompt(user + "\nAnswer:"), ("A", "B"))])
    body = server.requests[-1]["body"]
    assert body["messages"] == [{"role": "user", "content": user + "\nAnswer:"}]
    assert body["max_tokens"] == 1 and body["top_logprobs"] == 20
    np.testing.assert_allclose(got.probs, want.probs, atol=1e-6)
    assert got.mass == pytest.approx(want.mass, abs=1e-6)
    assert got.mass == pytest.approx(0.65, abs=1e-6) and got.prefix == " "


def test_options_missing_from_the_top_tokens_are_nan_with_one_warning_per_engine(
    servers: dict[str, Server], caplog: pytest.LogCaptureFixture
) -> None:
    """The shadow run of the paper config logged one warning per row (544 lines in one CI run,
    millions of requests at paper scale), then one per call, that is per chunk; now one per
    engine says how many prompts had none so far, and the totals come at the end."""
    remote = api(servers["fixed"], chat=True, top_logprobs=2)  # only A and B come back
    prompts = [remote.chat_prompt(f"Question {i}?", prefill="Answer:") for i in range(3)]
    with caplog.at_level(logging.WARNING, logger="unsure.engine.api"):
        got = remote.choice_probs([ChoiceRequest(p, ("C", "D")) for p in prompts])
        found = remote.choice_probs([ChoiceRequest(prompts[0], ("A", "B"))])
        for _ in range(3):  # three more chunks
            remote.choice_probs([ChoiceRequest(p, ("C", "D")) for p in prompts[:2]])
    assert all(np.isnan(g.probs).all() and g.mass == 0.0 for g in got)
    assert not np.isnan(found[0].probs).any()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "local: NaN for 3 of 3 prompts so far: none of the options ('C', 'D') among the top 2 reply tokens; "
        "further ones are counted, not logged (the totals come when the job ends)"
    ]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="unsure.engine.api"):
        remote.tally.summary()  # what the job's log gets when it ends
    assert caplog.messages == [
        "local: NaN for 9 of 9 prompts in all: none of the options ('C', 'D') among the top 2 reply tokens"
    ]


def test_a_job_logs_each_kind_of_nan_answer_once_with_its_count(
    servers: dict[str, Server], tmp_path: Path, restore_logging: None
) -> None:
    """A chat model whose replies carry no probability logged a warning per chunk (per prompt for a
    completions model without digits among its top tokens): 500 lines in one job. A job's log now
    says each once, with the count so far, and the totals when the job ends."""
    from unsure.logs import logged

    log = tmp_path / "job.log"
    with logged(log):  # as a rule script: the engines are made in the job
        chat = api(servers["fixed"], chat=True, concurrency=1)
        completions = api(servers["fixed"], chat=False, top_logprobs=2)
        asks = [chat.chat_prompt(f"Rain {i}?", prefill="Answer (between 0 and 1): 0.") for i in range(2)]
        for chunk in range(4):
            servers["fixed"].replies.extend(["I cannot tell.", "0.35" if chunk else "No idea."])
            chat.numeric([NumericRequest(q) for q in asks])
            completions.numeric(
                [NumericRequest(f"Probability {chunk}? Answer: 0."), NumericRequest(f"Chance {chunk}? Answer: 0.")]
            )
    warnings = [line.split(": ", 1)[1] for line in log.read_text().splitlines() if " WARNING " in line]
    assert warnings == [
        "local: NaN for 2 of 2 replies so far: no probability stated; "
        "further ones are counted, not logged (the totals come when the job ends)",
        "local: NaN for 2 of 2 prompts so far: no digit among the top 2 next tokens; "
        "further ones are counted, not logged (the totals come when the job ends)",
        "local: NaN for 5 of 8 replies in all: no probability stated",
        "local: NaN for 8 of 8 prompts in all: no digit among the top 2 next tokens",
    ]


def test_letters_under_every_space_marker_count_for_the_same_letter() -> None:
    top = [(" A", 0.3), ("\u2581A", 0.1), ("B", 0.05), ("\nB", 0.2), ("\u0120B ", 0.1), ("Answer", 0.2)]
    got = letter_probs(top, ("A", "B"))
    assert got is not None and got.prefix == " "
    np.testing.assert_allclose(got.probs, [0.8, 0.2])
    assert got.mass == pytest.approx(0.5)
    assert letter_probs([("Yes", 0.9)], ("A", "B")) is None


def test_numeric_on_chat_models_keeps_the_instruction_and_parses_the_reply(
    servers: dict[str, Server], caplog: pytest.LogCaptureFixture
) -> None:
    server = servers["fixed"]
    remote = api(server, chat=True, concurrency=1)  # one at a time: the canned replies go out in order
    user = "What is the probability of rain?"
    prompt = remote.chat_prompt(user, prefill="Answer (between 0 and 1): 0.")
    server.replies.extend(["0.35", "73", "The probability is about 40%.", "I cannot tell."])
    with caplog.at_level(logging.WARNING, logger="unsure"):
        values = remote.numeric([NumericRequest(prompt)] * 4)
    np.testing.assert_allclose(values, [0.35, 0.73, 0.40, np.nan])
    assert "NaN for 1 of 4 replies so far: no probability stated" in caplog.text
    for request in server.requests:
        assert request["body"]["messages"] == [{"role": "user", "content": user + "\nAnswer (between 0 and 1): 0."}]
        assert request["body"]["max_tokens"] == NUMERIC_REPLY_TOKENS > 24


def test_free_form_numeric_on_chat_models_parses_or_gives_nan(servers: dict[str, Server]) -> None:
    remote = api(servers["fixed"], chat=True)
    values = remote.numeric(
        [NumericRequest(remote.chat_prompt("What is the probability?", prefill="Answer (between 0 and 1): 0."))]
    )
    # the fixed model's greedy reply is " A A A ...": no probability in it
    assert np.isnan(values).all()


@pytest.mark.parametrize(
    ("reply", "lead", "want"),
    [("0.35", "0.", 0.35), ("73", "0.", 0.73), ("7.", "0.", 0.7), ("40%", "0.", 0.4), ("73", "", None),
     ("It is 73 in 100, so 0.73", "0.", 0.73), ("A", "0.", None)],
)  # fmt: skip
def test_a_reply_opening_with_bare_digits_continues_the_prompts_zero_point(
    reply: str, lead: str, want: float | None
) -> None:
    assert parse_probability(reply, lead=lead) == want


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
        api(server, chat=True).generate([ReplyRequest("hi")])
    assert "sk-wrong-key-also-secret" not in str(err.value)
    monkeypatch.delenv(ENV)
    with pytest.raises(ValueError, match=f"environment variable {ENV}, which is not set"):
        api(server, chat=True)
    assert KEY not in caplog.text and "sk-wrong-key-also-secret" not in caplog.text


def _envelope(choices: object) -> bytes:
    reply = {"id": "x", "object": "chat.completion", "created": 0, "model": "local", "choices": choices}
    return json.dumps(reply).encode()


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (_envelope([]), r"asked for 1 choices and got 0"),
        (b"<html>Bad gateway</html>", r"malformed reply|no list but str"),
        (b'{"choices": [{"index": 0', r"malformed reply to a reply request \(JSONDecodeError"),
        (_envelope([{"index": 0}]), r"malformed reply to a reply request \(AttributeError"),
        (
            _envelope([{"index": 0, "message": {"role": "assistant", "content": 7}, "finish_reason": "stop"}]),
            r"malformed reply to a reply request \(TypeError: reply text is a int",
        ),
        (_envelope("none"), r"no list but str"),
    ],
)
def test_a_malformed_or_short_reply_is_a_clear_error_naming_model_and_endpoint(
    servers: dict[str, Server], body: bytes, problem: str
) -> None:
    """Fault-tester cases: ``choices: []`` completed the job with 0 samples, and broken bodies raised
    TypeError/JSONDecodeError/AttributeError from deep inside the reply parsing."""
    server = servers["fixed"]
    server.raw.append((200, body))
    with pytest.raises(APIResponseError, match=problem) as err:
        api(server, chat=True).generate([ReplyRequest("hello")])
    assert f"'local' at {server.base_url}" in str(err.value)


NGINX = b"<!DOCTYPE html>\n<html><head><title>Welcome to nginx!</title></head><body>It works</body></html>\n"


@pytest.mark.parametrize("content_type", ["text/html; charset=utf-8", "application/json"])
def test_an_html_page_is_not_taken_for_a_reply_without_choices(servers: dict[str, Server], content_type: str) -> None:
    """An HTML page sent with HTTP 200 (a web server or proxy at a base_url that is not the API's) was
    reported as a reply without choices, as a JSON body that lacks them is; it is said to be no JSON."""
    server = servers["fixed"]
    server.raw.append((200, NGINX, content_type))
    with pytest.raises(APIResponseError) as err:
        api(server, chat=True).generate([ReplyRequest("hello")])
    message = str(err.value)
    assert f"'local' at {server.base_url}: malformed reply to a reply request" in message
    assert "the reply is not JSON but an HTML page titled 'Welcome to nginx!'" in message
    assert "is base_url the API's address" in message and "choices" not in message
    server.raw.append((200, json.dumps({"id": "x", "object": "chat.completion"}).encode()))
    with pytest.raises(APIResponseError, match="asked for 1 choices and got no list") as err:
        api(server, chat=True).generate([ReplyRequest("hello")])
    assert "not JSON" not in str(err.value)


def test_fewer_samples_than_asked_is_an_error_not_a_short_sample(servers: dict[str, Server]) -> None:
    server = servers["fixed"]
    one = {"index": 0, "message": {"role": "assistant", "content": "the cat"}, "finish_reason": "stop"}
    server.raw.append((200, _envelope([one] * 3)))
    with pytest.raises(APIResponseError, match="asked for 5 choices and got 3"):
        api(server, chat=True).sample_words([WordSamplingRequest("a", n=5, seed=0)])


def test_a_hanging_endpoint_fails_after_the_configured_timeout(servers: dict[str, Server]) -> None:
    """A hanging endpoint took 861 s per request to fail; the entry's ``timeout_s`` and
    ``max_retries`` now bound it."""
    server = servers["fixed"]
    server.delay_s = 2.0
    entry = Model(id="local", backend="openai", base_url=server.base_url, api_key_env=ENV, instruct=True, gpus=0,
                  timeout_s=0.3, max_retries=1)  # fmt: skip
    start = time.monotonic()
    with pytest.raises(APIResponseError, match=r"no reply within 0.3 s, 2 times.*timeout_s or max_retries"):
        load_engine(entry).generate([ReplyRequest("hello")])
    assert time.monotonic() - start < 10


def test_an_error_body_echoing_the_key_is_redacted(
    servers: dict[str, Server], caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    server = servers["fixed"]
    caplog.set_level(logging.DEBUG)
    echo = {"error": {"message": f"key Bearer {KEY} may not use model 'local'", "type": "forbidden"}}
    server.raw.append((403, json.dumps(echo).encode()))
    with pytest.raises(APIResponseError, match="HTTP 403") as err:
        api(server, chat=True).generate([ReplyRequest("hello")])
    assert KEY not in str(err.value) and "[API key redacted]" in str(err.value)
    out, errout = capfd.readouterr()
    assert KEY not in caplog.text + out + errout


def test_api_settings_are_only_for_api_models() -> None:
    with pytest.raises(ValueError, match="timeout_s: only for backend 'openai'"):
        Model(id="gpt2", timeout_s=5)
    entry = Model(id="gpt2")
    assert Model.model_validate(entry.model_dump()) == entry, "a dumped entry (a rule's params) loads again"

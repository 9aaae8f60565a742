"""A web-API model added by one config entry runs through a study's jobs, and its
key, set only in the environment, leaves no trace in any output or log."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from workflow_helpers import install_demo_zoo, snakemake, untrained

from openai_server import Server

pytestmark = pytest.mark.workflow

KEY = "sk-fake-4f1c9e2b7d0a-must-not-leak"
ENV = "UNSURE_FAKE_API_KEY"


def test_api_chat_model_samples_words_and_the_key_never_reaches_a_file(
    checkout: Path, monkeypatch: pytest.MonkeyPatch, demo_zoo: dict[str, Path]
) -> None:
    config = untrained(yaml.safe_load((checkout / "config" / "demo.yaml").read_text()))
    install_demo_zoo(checkout, demo_zoo, config)
    server = Server(checkout / "resources" / "models" / "tiny-llama-chat", key=KEY)
    try:
        config["models"]["api-chat"] = {
            "id": "tiny-llama-chat-served",
            "backend": "openai",
            "base_url": server.base_url,
            "api_key_env": ENV,
            "instruct": True,
            "gpus": 0,
        }
        study = config["studies"]["nextword"]
        study["models"] = [*study["models"], "api-chat"]
        study["large_models"] = [*study.get("large_models", []), "api-chat"]
        study["n_samples_large"] = 2  # two calls per context in single mode: every call is a request
        (checkout / "api.yaml").write_text(yaml.safe_dump(config))
        targets = [f"results/nextword/samples/api-chat/{mode}.jsonl" for mode in ("single", "list")]
        monkeypatch.setenv(ENV, KEY)  # the only place the key exists
        result = snakemake("-c2", *targets, "--configfile", "api.yaml", cwd=checkout)
        assert result.returncode == 0, result.stderr[-3000:]
    finally:
        server.close()
    assert all((checkout / t).stat().st_size > 0 for t in targets)
    assert any(r["path"] == "/v1/chat/completions" for r in server.requests), "the study never called the API"
    assert all(r["headers"]["authorization"] == f"Bearer {KEY}" for r in server.requests)
    leaks = [
        p
        for top in ("results", ".snakemake")
        for p in (checkout / top).rglob("*")
        if p.is_file() and KEY.encode() in p.read_bytes()
    ]
    assert not leaks, f"the API key was written to {leaks}"
    assert KEY not in result.stdout + result.stderr

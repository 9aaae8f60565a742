"""A small OpenAI-compatible server on the loopback interface, serving a local model.

It answers ``/v1/completions`` (``logprobs``, ``echo``, ``n``) and
``/v1/chat/completions`` (``logprobs``/``top_logprobs``, ``n``) in the
response layout of the OpenAI API, computing every number with
``transformers`` directly (independently of the engine), so the API backend's
tests can compare the two. The shadow run (``tools/shadow.py``) points the paper
config's API models at it. It binds 127.0.0.1 only and answers only requests
that carry its key, which the caller passes in (from the environment, never
a file).

Test knobs: a queue of HTTP errors to answer before serving (retries), a
switch that drops log-probabilities (the error path), a queue of canned chat
replies (what a real chat model might say, which a tiny model cannot), and a
log of the raw requests.

From a shell (the key from the environment variable ``--key-env`` names)::

    UNSURE_SHADOW_API_KEY=... python tools/openai_server.py MODEL_DIR --port 8765
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


class LocalModel:
    """A causal LM with the few operations the endpoints need."""

    def __init__(self, path: Path) -> None:
        self.tok = AutoTokenizer.from_pretrained(path)
        self.model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
        self.lock = threading.Lock()

    def text(self, token_id: int) -> str:
        """A token as decoded text, with the leading space its marker stands for."""
        piece = self.tok.convert_ids_to_tokens(token_id)
        out = self.tok.decode([token_id])
        if piece.startswith("\u2581") and not out.startswith(" "):
            out = " " + out
        return str(out)

    def logprobs(self, ids: list[int]) -> torch.Tensor:
        """Log-softmax of the next-token distribution after every prefix of ``ids``."""
        with self.lock, torch.inference_mode():
            logits = self.model(torch.tensor([ids])).logits[0].float()
        return torch.log_softmax(logits, dim=-1)

    def generate(self, ids: list[int], *, n: int, max_tokens: int, temperature: float, seed: int) -> list[list[int]]:
        with self.lock, torch.inference_mode():
            torch.manual_seed(seed)
            out = self.model.generate(
                torch.tensor([ids]),
                max_new_tokens=max_tokens,
                do_sample=temperature > 0,
                temperature=temperature if temperature > 0 else None,
                top_p=None,
                top_k=None,
                num_return_sequences=n,
                pad_token_id=self.tok.eos_token_id,
            )
        seqs = []
        for row in out[:, len(ids) :].tolist():
            if self.tok.eos_token_id in row:
                row = row[: row.index(self.tok.eos_token_id) + 1]
            seqs.append(row)
        return seqs


HOST = "127.0.0.1"
"""The only interface the server listens on."""


class Server:
    """Serve ``model_dir`` on loopback ``port`` (0: a free one) until :meth:`close`.

    ``model_dir`` answers every request, whatever model it names; a mapping of model
    names to folders answers each name with its own model and refuses other names (404,
    as the API does). With ``model_dir=None`` the port is bound at once and nothing is served until
    :meth:`start` names the model (so that a caller can learn the URL before the
    model exists); ``log_requests=False`` keeps no request log (long runs);
    ``max_reply_tokens`` ends every reply after that many tokens as a length-limited
    reply (``finish_reason: length``), so that a random model, which never stops by
    itself, does not spend a long run on replies nobody reads to the end.
    """

    def __init__(
        self,
        model_dir: str | Path | Mapping[str, str | Path] | None,
        *,
        key: str,
        port: int = 0,
        log_requests: bool = True,
        max_reply_tokens: int | None = None,
    ) -> None:
        if not key:
            raise ValueError("the server needs a key: requests without it are refused")
        self.key = key
        self.fail: deque[int] = deque()
        self.raw: deque[tuple[int, bytes] | tuple[int, bytes, str]] = deque()
        """Canned replies (status, body[, content type; JSON by default]) sent, one per request, before
        any other answer: faults to test."""
        self.delay_s = 0.0
        """Seconds every request waits before it is answered (a hanging endpoint)."""
        self.with_logprobs = True
        self.replies: deque[str] = deque()
        self.requests: list[dict[str, Any]] = []
        self.log_requests = log_requests
        self.max_reply_tokens = max_reply_tokens
        self.models: dict[str | None, LocalModel] = {}
        """Model per requested name; ``None``: the one model that answers every name."""
        self.httpd = ThreadingHTTPServer((HOST, port), self._handler())
        self.thread: threading.Thread | None = None
        if model_dir is not None:
            self.start(model_dir)

    def start(self, model_dir: str | Path | Mapping[str, str | Path]) -> None:
        """Load ``model_dir`` (or each folder of a mapping) and answer requests from a background thread."""
        if isinstance(model_dir, Mapping):
            self.models = {name: LocalModel(Path(folder)) for name, folder in model_dir.items()}
        else:
            self.models = {None: LocalModel(Path(model_dir))}
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}/v1"

    def close(self) -> None:
        if self.thread is not None:
            self.httpd.shutdown()
        self.httpd.server_close()

    # ------------------------------------------------------------------ endpoints

    def model(self, body: dict[str, Any]) -> LocalModel | None:
        """The model that answers ``body`` (``None`` for a name not served)."""
        return self.models.get(None) or self.models.get(str(body.get("model")))

    def completions(self, body: dict[str, Any], m: LocalModel) -> dict[str, Any]:
        prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
        n, k = int(body.get("n", 1)), body.get("logprobs")
        choices: list[dict[str, Any]] = []
        usage = [0, 0]
        for prompt in prompts:
            ids = m.tok(prompt)["input_ids"]
            for seq in m.generate(
                ids,
                n=n,
                max_tokens=self._reply_tokens(body.get("max_tokens") or 16),
                temperature=float(body.get("temperature", 1.0)),
                seed=int(body.get("seed", 0)),
            ):
                full = ids + seq if body.get("echo") else seq
                start = 0 if body.get("echo") else len(ids)
                lp = m.logprobs(ids + seq)
                choice: dict[str, Any] = {
                    "index": len(choices),
                    "text": (prompt if body.get("echo") else "") + m.tok.decode(seq, skip_special_tokens=True),
                    "finish_reason": "stop" if seq and seq[-1] == m.tok.eos_token_id else "length",
                    "logprobs": None,
                }
                if k is not None and self.with_logprobs:
                    # offsets and token texts by incremental decoding, as servers do
                    decoded = [m.tok.decode(full[:j], skip_special_tokens=True) for j in range(len(full) + 1)]
                    offsets = [len(d) for d in decoded[:-1]]
                    tokens = [decoded[j + 1][offsets[j] :] for j in range(len(full))]
                    token_lps: list[float | None] = []
                    tops: list[dict[str, float] | None] = []
                    for j in range(len(full)):
                        at = start + j
                        if at == 0:
                            token_lps.append(None)
                            tops.append(None)
                            continue
                        row = lp[at - 1]
                        token_lps.append(float(row[full[j]]))
                        best = torch.topk(row, max(int(k), 1))
                        tops.append({m.text(int(i)): float(v) for v, i in zip(best.values, best.indices, strict=True)})
                    choice["logprobs"] = {
                        "tokens": tokens,
                        "token_logprobs": token_lps,
                        "top_logprobs": tops,
                        "text_offset": offsets,
                    }
                choices.append(choice)
                usage[1] += len(seq)
            usage[0] += len(ids)
        return self._envelope("text_completion", choices, usage)

    def chat(self, body: dict[str, Any], m: LocalModel) -> dict[str, Any]:
        text = m.tok.apply_chat_template(body["messages"], tokenize=False, add_generation_prompt=True)
        ids = m.tok(text, add_special_tokens=False)["input_ids"]
        if self.replies:
            reply = {"role": "assistant", "content": self.replies.popleft()}
            canned = {"index": 0, "message": reply, "finish_reason": "stop", "logprobs": None}
            return self._envelope("chat.completion", [canned], [len(ids), 0])
        n = int(body.get("n", 1))
        max_tokens = self._reply_tokens(body.get("max_completion_tokens") or body.get("max_tokens") or 16)
        seqs = m.generate(
            ids,
            n=n,
            max_tokens=max_tokens,
            temperature=float(body.get("temperature", 1.0)),
            seed=int(body.get("seed", 0)),
        )
        choices: list[dict[str, Any]] = []
        for i, seq in enumerate(seqs):
            choice: dict[str, Any] = {
                "index": i,
                "message": {"role": "assistant", "content": m.tok.decode(seq, skip_special_tokens=True)},
                "finish_reason": "stop" if seq and seq[-1] == m.tok.eos_token_id else "length",
                "logprobs": None,
            }
            if body.get("logprobs") and self.with_logprobs:
                lp = m.logprobs(ids + seq)
                content = []
                for j, t in enumerate(seq):
                    row = lp[len(ids) + j - 1]
                    best = torch.topk(row, int(body.get("top_logprobs") or 1))
                    content.append(
                        {
                            "token": m.text(t),
                            "logprob": float(row[t]),
                            "bytes": None,
                            "top_logprobs": [
                                {"token": m.text(int(x)), "logprob": float(v), "bytes": None}
                                for v, x in zip(best.values, best.indices, strict=True)
                            ],
                        }
                    )
                choice["logprobs"] = {"content": content}
            choices.append(choice)
        return self._envelope("chat.completion", choices, [len(ids), sum(len(s) for s in seqs)])

    def _reply_tokens(self, asked: Any) -> int:
        """The reply length asked, capped at ``max_reply_tokens`` (then ``finish_reason: length``)."""
        return int(asked) if self.max_reply_tokens is None else min(int(asked), self.max_reply_tokens)

    def _envelope(self, kind: str, choices: list[dict[str, Any]], usage: list[int]) -> dict[str, Any]:
        return {
            "id": f"test-{time.monotonic_ns()}",
            "object": kind,
            "created": int(time.time()),
            "model": "local",
            "choices": choices,
            "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if server.log_requests:
                    server.requests.append(
                        {"path": self.path, "body": body, "headers": {k.lower(): v for k, v in self.headers.items()}}
                    )
                if self.headers.get("Authorization") != f"Bearer {server.key}":
                    return self._send(401, {"error": {"message": "Incorrect API key provided", "type": "auth"}})
                if server.delay_s:
                    time.sleep(server.delay_s)
                if server.raw:
                    return self._send_bytes(*server.raw.popleft())
                if server.fail:
                    return self._send(server.fail.popleft(), {"error": {"message": "try again", "type": "busy"}})
                model = server.model(body)
                if model is None:
                    served = sorted(map(str, server.models))
                    message = f"The model `{body.get('model')}` does not exist (served: {served})"
                    return self._send(404, {"error": {"message": message, "type": "invalid_request_error"}})
                if self.path == "/v1/completions":
                    return self._send(200, server.completions(body, model))
                if self.path == "/v1/chat/completions":
                    return self._send(200, server.chat(body, model))
                return self._send(404, {"error": {"message": f"no route {self.path}"}})

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                self._send_bytes(status, json.dumps(payload).encode())

            def _send_bytes(self, status: int, data: bytes, content_type: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                if status == 429 or status >= 500:
                    self.send_header("retry-after-ms", "10")
                self.end_headers()
                self.wfile.write(data)

        return Handler


def main(argv: list[str] | None = None) -> None:
    """Serve a model directory on the loopback interface until interrupted."""
    import argparse
    import os

    parser = argparse.ArgumentParser(prog="python tools/openai_server.py", description=main.__doc__)
    parser.add_argument("model_dir", help="a local model folder (weights and tokenizer)")
    parser.add_argument("--port", type=int, default=8765, help="port on 127.0.0.1 (0: a free one)")
    parser.add_argument(
        "--key-env",
        default="UNSURE_SHADOW_API_KEY",
        help="environment variable holding the key clients must send (never passed on the command line)",
    )
    args = parser.parse_args(argv)
    key = os.environ.get(args.key_env)
    if not key:
        parser.error(f"set the key in the environment variable {args.key_env}")
    server = Server(args.model_dir, key=key, port=args.port, log_requests=False)
    print(f"serving {args.model_dir} at {server.base_url} (Ctrl-C stops)", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.close()


if __name__ == "__main__":
    main()

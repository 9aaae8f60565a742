"""A small OpenAI-compatible server for the API-backend tests, serving a local model.

It answers ``/v1/completions`` (``logprobs``, ``echo``, ``n``) and
``/v1/chat/completions`` (``logprobs``/``top_logprobs``, ``n``) in the
response layout of the OpenAI API, computing every number with
``transformers`` directly (independently of the engine). Test knobs: a queue
of HTTP errors to answer before serving (retries), a switch that drops
log-probabilities (the error path), a queue of canned chat replies (what a
real chat model might say, which a tiny model cannot), and a log of the raw
requests.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
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


class Server:
    """Serve ``model_dir`` on a free loopback port until :meth:`close`."""

    def __init__(self, model_dir: Path, *, key: str) -> None:
        self.model = LocalModel(model_dir)
        self.key = key
        self.fail: deque[int] = deque()
        self.with_logprobs = True
        self.replies: deque[str] = deque()
        self.requests: list[dict[str, Any]] = []
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # ------------------------------------------------------------------ endpoints

    def completions(self, body: dict[str, Any]) -> dict[str, Any]:
        m = self.model
        prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
        n, k = int(body.get("n", 1)), body.get("logprobs")
        choices, usage = [], [0, 0]
        for prompt in prompts:
            ids = m.tok(prompt)["input_ids"]
            for seq in m.generate(
                ids,
                n=n,
                max_tokens=int(body.get("max_tokens", 16)),
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

    def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        m = self.model
        text = m.tok.apply_chat_template(body["messages"], tokenize=False, add_generation_prompt=True)
        ids = m.tok(text, add_special_tokens=False)["input_ids"]
        if self.replies:
            reply = {"role": "assistant", "content": self.replies.popleft()}
            choice = {"index": 0, "message": reply, "finish_reason": "stop", "logprobs": None}
            return self._envelope("chat.completion", [choice], [len(ids), 0])
        n = int(body.get("n", 1))
        max_tokens = int(body.get("max_completion_tokens") or body.get("max_tokens") or 16)
        seqs = m.generate(
            ids,
            n=n,
            max_tokens=max_tokens,
            temperature=float(body.get("temperature", 1.0)),
            seed=int(body.get("seed", 0)),
        )
        choices = []
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
                server.requests.append(
                    {"path": self.path, "body": body, "headers": {k.lower(): v for k, v in self.headers.items()}}
                )
                if self.headers.get("Authorization") != f"Bearer {server.key}":
                    return self._send(401, {"error": {"message": "Incorrect API key provided", "type": "auth"}})
                if server.fail:
                    return self._send(server.fail.popleft(), {"error": {"message": "try again", "type": "busy"}})
                if self.path == "/v1/completions":
                    return self._send(200, server.completions(body))
                if self.path == "/v1/chat/completions":
                    return self._send(200, server.chat(body))
                return self._send(404, {"error": {"message": f"no route {self.path}"}})

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if status == 429 or status >= 500:
                    self.send_header("retry-after-ms", "10")
                self.end_headers()
                self.wfile.write(data)

        return Handler

"""A local fake of an OpenAI-compatible HTTP API (``/v1/embeddings``), for tests through the real client.

Embeddings are deterministic bags of hashed words, so similar texts get similar vectors. The
server records the Authorization header of each request and can be told to fail.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson

DIM = 64
LLM_KEY_ENV = "TEST_MCP_MEMORY_LLM_KEY"
LLM_KEY = "sk-test-llm-key-0123456789abcdefghij"


def fake_vector(text: str) -> list[float]:
    vec = [0.0] * DIM
    for word in text.lower().split():
        digest = hashlib.sha256(word.strip(".,?!").encode()).digest()
        vec[digest[0] % DIM] += 1.0
        vec[digest[1] % DIM] += 0.5
    norm = math.sqrt(sum(v * v for v in vec)) or 1.0
    return [v / norm for v in vec]


@dataclass
class FakeOpenAI:
    """``chat_script`` is consumed one step per chat request: ("json", obj), ("text", str),
    ("status", code), ("error", (code, message)), ("sleep", seconds) or ("tool_call", (name,
    arguments)); when it is empty the reply is ``chat_default``. ``chat_requests`` keeps every chat request body."""

    base_url: str
    authorizations: list[str] = field(default_factory=list)
    fail_with: int | None = None
    chat_script: list[tuple[str, Any]] = field(default_factory=list)
    chat_default: tuple[str, Any] = ("json", {"summary": ""})
    chat_prompts: list[str] = field(default_factory=list)
    chat_requests: list[dict[str, Any]] = field(default_factory=list)
    chat_received: threading.Event = field(default_factory=threading.Event)  # set at each chat request


@contextmanager
def fake_openai_server() -> Iterator[FakeOpenAI]:
    state = FakeOpenAI(base_url="")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            body = orjson.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            state.authorizations.append(self.headers.get("Authorization", ""))
            if state.fail_with is not None:
                self._send(state.fail_with, {"error": {"message": "upstream is down", "type": "server_error"}})
                return
            if self.path == "/v1/chat/completions":
                self._chat(body)
                return
            if self.path != "/v1/embeddings":
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
            data = [{"object": "embedding", "index": i, "embedding": fake_vector(t)} for i, t in enumerate(inputs)]
            self._send(
                200,
                {
                    "object": "list",
                    "data": data,
                    "model": body["model"],
                    "usage": {"prompt_tokens": 1, "total_tokens": 1},
                },
            )

        def _chat(self, body: dict[str, Any]) -> None:
            state.chat_prompts.append(str(body["messages"][-1].get("content")))
            state.chat_requests.append(body)
            state.chat_received.set()
            step, value = state.chat_script.pop(0) if state.chat_script else state.chat_default
            if step == "sleep":
                time.sleep(float(value))
                step, value = state.chat_default
            if step == "status":
                self._send(int(value), {"error": {"message": "scripted failure", "type": "server_error"}})
                return
            if step == "error":  # (status, message): an upstream error that says something
                code, text = value
                self._send(int(code), {"error": {"message": str(text), "type": "invalid_request_error"}})
                return
            message: dict[str, Any] = {"role": "assistant", "content": None}
            finish = "tool_calls"
            if step == "tool_call":
                name, arguments = value
                n = len(state.chat_requests)
                message["tool_calls"] = [
                    {
                        "id": f"call_{n}",
                        "type": "function",
                        "function": {"name": name, "arguments": orjson.dumps(arguments).decode()},
                    }
                ]
            else:
                message["content"] = orjson.dumps(value).decode() if step == "json" else str(value)
                finish = "stop"
            self._send(
                200,
                {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body["model"],
                    "choices": [{"index": 0, "finish_reason": finish, "message": message}],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
                },
            )

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            raw = orjson.dumps(payload)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def llm_table(fake: FakeOpenAI, **overrides: Any) -> dict[str, Any]:
    """The `[llm]` settings that point at ``fake`` (its key in the environment as LLM_KEY_ENV)."""
    return {
        "enabled": True,
        "base_url": fake.base_url,
        "model": "fake-chat",
        "api_key_env": LLM_KEY_ENV,
        "timeout_seconds": 1.0,
        "max_retries": 0,
        **overrides,
    }

"""Bad requests over the network transports, raw: each gets the right HTTP status and JSON-RPC
error, and none of them reaches the store.

Every bad request but the unparsable one carries a `remember` call that would add a row if it
were let through; the row counts of the principal's file are compared before and after, and a
good request on the same session is the positive control.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from mcp_memory.core.nesting import MAX_NESTING
from tests.conftest import TABLES, deep_tree, row_counts
from tests.netserver import NetServer, answer, create_token, initialize, post, rpc, running, sse_session

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

LIMIT = 65_536
TARGETS = {"http": ("http",), "http-stateless": ("http", "--stateless"), "sse": ("sse",)}


def remember(content: str, ident: int = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": ident,
        "method": "tools/call",
        "params": {"name": "remember", "arguments": {"content": content}},
    }


def checkpoint(levels: int, ident: int = 1) -> dict[str, Any]:
    """A checkpoint whose tree is ``levels`` deep: the message nests 2 * levels + 2 levels."""
    arguments = {"task_id": "deep", "goal": "Climb", "tree": deep_tree(levels)}
    return {
        "jsonrpc": "2.0",
        "id": ident,
        "method": "tools/call",
        "params": {"name": "checkpoint", "arguments": arguments},
    }


def with_id(ident: Any) -> bytes:
    return orjson.dumps({**remember("an id that cannot be answered"), "id": ident})


@dataclass
class Case:
    name: str
    body: bytes
    headers: dict[str, str]  # over the session's own
    status: int
    code: int | None  # the JSON-RPC error code in the body, when the answer is JSON-RPC
    says: str  # a part of the message


GOOD = orjson.dumps(remember("The build cache lives on cache-3"))
CASES = [
    Case("malformed JSON", b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", ', {}, 400, -32700, "not JSON"),
    Case("JSON but not JSON-RPC", orjson.dumps({**remember("no version"), "jsonrpc": None}), {}, 400, -32600, '"2.0"'),
    Case("a JSON array", orjson.dumps([remember("a batch")]), {}, 400, -32600, "batches are not accepted"),
    Case("a bare value", b'"remember this"', {}, 400, -32600, "Invalid Request"),
    Case(
        "a body over the limit",
        orjson.dumps(remember("x" * (LIMIT + 10))),
        {},
        413,
        -32600,
        f"limits.max_http_body_bytes = {LIMIT}",
    ),
    # An id no answer can carry: the SDK took each for a notification, answered 202 and nothing more.
    Case("an object id", with_id({"n": 1}), {}, 400, -32600, "id must be a string or an integer, not an object"),
    Case("an array id", with_id([1]), {}, 400, -32600, "id must be a string or an integer, not an array"),
    Case("a boolean id", with_id(True), {}, 400, -32600, "id must be a string or an integer, not true"),
    Case("a decimal id", with_id(1.5), {}, 400, -32600, "id must be a string or an integer, not 1.5"),
    Case("a null id", with_id(None), {}, 400, -32600, "id must be a string or an integer, not null"),
    # A tree 100 levels deep nests the message 202 levels: refused by the limit's name, not the parser's.
    Case(
        "nested too deep", orjson.dumps(checkpoint(100)), {}, 400, -32600, f"nesting deeper than {MAX_NESTING} levels"
    ),
    Case("text/plain", GOOD, {"content-type": "text/plain"}, 415, -32600, "application/json"),
    Case("form-encoded", GOOD, {"content-type": "application/x-www-form-urlencoded"}, 415, -32600, "application/json"),
    Case("a wrong Host header", GOOD, {"host": "evil.example.com"}, 421, None, "Host"),
    Case("a foreign Origin", GOOD, {"origin": "http://evil.example.com"}, 403, None, "Origin"),
    Case("no token", GOOD, {"authorization": ""}, 401, None, "Bearer"),
]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bad") / "data"


@pytest.fixture(scope="module")
def token(data: Path) -> str:
    return create_token(data, "alice")


@pytest.fixture(scope="module", params=list(TARGETS))
def server(request: pytest.FixtureRequest, data: Path, token: str) -> Iterator[NetServer]:
    transport, *flags = TARGETS[request.param]
    with running(data, transport, *flags, env={"MCP_MEMORY_LIMITS__MAX_HTTP_BODY_BYTES": str(LIMIT)}) as srv:
        yield srv


@dataclass
class Session:
    path: str | None
    headers: dict[str, str]
    events: Any  # the SseSession on SSE, where answers arrive on the stream


@asynccontextmanager
async def session(server: NetServer, token: str) -> AsyncIterator[Session]:
    if server.transport == "sse":
        async with sse_session(server, token) as sse:
            yield Session(sse.path, sse.headers, sse)
        return
    yield Session(None, initialize(server, token), None)


async def test_bad_requests_get_the_right_error_and_leave_the_store_untouched(
    server: NetServer, data: Path, token: str
) -> None:
    async with session(server, token) as s:
        before = stored_rows(data)
        for case in CASES:
            headers = {k: v for k, v in {**s.headers, **case.headers}.items() if v}
            got = post(server, case.body, headers, s.path)
            assert got.status_code == case.status, (case.name, got.status_code, got.text)
            assert case.says in got.text, (case.name, got.text)
            if case.code is not None:
                assert got.headers["content-type"] == "application/json"
                error = got.json()["error"]
                assert (error["code"], got.json()["id"]) == (case.code, None), (case.name, got.text)
        # A body over the limit sent chunked, with no Content-Length to refuse it by.
        chunked = post(server, iter([GOOD[:-2], b" " * LIMIT, GOOD[-2:]]), s.headers, s.path)
        assert chunked.status_code == 413, chunked.text
        assert chunked.request.headers["transfer-encoding"] == "chunked"

        # An unknown method is a JSON-RPC error for that request id; the transport is fine.
        reply = await _reply(s, post(server, rpc("memory/export_everyone", {}, 41), s.headers, s.path))
        assert (reply["id"], reply["error"]["code"]) == (41, -32601)
        # A message exactly at the nesting limit reaches the tool, which names its own tree limit.
        at_limit = orjson.dumps(checkpoint(MAX_NESTING // 2 - 1, 43))
        reply = await _reply(s, post(server, at_limit, s.headers, s.path))
        assert reply["id"] == 43
        assert reply["result"]["isError"], reply
        assert "limits.max_tree_depth" in reply["result"]["content"][0]["text"]
        assert stored_rows(data) == before

        # The positive control: the same session, a good request, one more row.
        good = post(server, orjson.dumps(remember(f"The build cache moved, said {server.url}", 42)), s.headers, s.path)
        reply = await _reply(s, good)
        assert reply["id"] == 42
        assert not reply["result"].get("isError"), reply
        assert stored_rows(data)["memories"] == before["memories"] + 1


def stored_rows(data: Path) -> dict[str, int]:
    """Alice's rows, table by table; none before her file exists (a session opens no file until a
    call needs it), and the file's own meta rows are not data."""
    counts = row_counts(data, "alice")
    return {table: counts.get(table, 0) for table in TABLES if table != "meta"}


async def _reply(s: Session, response: Any) -> dict[str, Any]:
    """The JSON-RPC answer to a request, past the log notifications before it: in the response, or
    on SSE's stream (the POST gets 202)."""
    if s.events is not None:
        assert response.status_code == 202, response.text
        while "id" not in (message := await s.events.next_message()):
            pass
        return dict(message)
    assert response.status_code == 200, response.text
    if not response.headers.get("content-type", "").startswith("text/event-stream"):
        return answer(response)
    sent = [orjson.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
    return next(m for m in sent if "id" in m)

"""The body check of the HTTP face (see middlewares.py): a POST's body must be application/json, within
the body limit and the nesting limit, one JSON-RPC message with a usable id; a bad one gets one
JSON-RPC error, alike on SSE and HTTP."""

from __future__ import annotations

from typing import Any

import orjson
from mcp_types import INVALID_REQUEST, PARSE_ERROR
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_memory.config import Limits
from mcp_memory.core.nesting import NESTING_PROBLEM, too_deep


class BodyCheck:
    """A POST's body must be application/json, within the limits, one JSON-RPC message; a bad one
    gets one JSON-RPC error alike on SSE and HTTP, naming what to fix.

    The SDK answers these cases unevenly: over HTTP an object that is no JSON-RPC message gets
    -32602 and a pydantic dump, over SSE every case gets a line of plain text; a request whose id
    is an object, an array, a boolean, a decimal or null passes its checks as a notification, gets
    202 and is never answered.
    """

    def __init__(self, app: ASGIApp, limits: Limits) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("method") == "POST":
            checked = await self._checked(scope, receive, send)
            if checked is None:
                return
            receive = checked
        await self.app(scope, receive, send)

    async def _checked(self, scope: Scope, receive: Receive, send: Send) -> Receive | None:
        """The body replayed to the SDK, or None once a bad one has been answered."""
        headers = dict(scope.get("headers") or [])
        kind = headers.get(b"content-type", b"").decode("latin-1").split(";")[0].strip().lower()
        if kind != "application/json":
            await _rpc_error(send, 415, INVALID_REQUEST, f"Content-Type must be application/json, not {kind!r}")
            return None
        body = await read_within(receive, headers.get(b"content-length", b""), self.limits.max_http_body_bytes)
        if body is None:  # the client went away
            return None
        if isinstance(body, int):
            problem = f"the body exceeds limits.max_http_body_bytes = {body} bytes; send less per request"
            await _rpc_error(send, 413, INVALID_REQUEST, problem)
            return None
        if too_deep(body):  # before any parser recurses into it
            await _rpc_error(send, 400, INVALID_REQUEST, NESTING_PROBLEM)
            return None
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            await _rpc_error(send, 400, PARSE_ERROR, f"Parse error: the body is not JSON ({exc})")
            return None
        if not _is_jsonrpc(parsed):
            problem = (
                'Invalid Request: send one JSON-RPC 2.0 message, an object with "jsonrpc": "2.0" and a "method" '
                '(or the "result" or "error" for an "id"); batches are not accepted'
            )
            await _rpc_error(send, 400, INVALID_REQUEST, problem)
            return None
        if (unanswerable := _id_problem(parsed)) is not None:
            await _rpc_error(send, 400, INVALID_REQUEST, unanswerable)
            return None
        return replay(body, receive)


def replay(body: bytes, receive: Receive) -> Receive:
    """A receive that gives the body already read, then whatever the client sends next."""
    sent = False

    async def again() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return again


async def read_within(receive: Receive, declared: bytes, limit: int) -> bytes | int | None:
    """The whole body; the limit (an int) when it is over it (a declared excess is refused unread);
    None when the client disconnected."""
    chunks: list[bytes] = []
    size = int(declared) if declared.isdigit() else 0
    received = 0
    more = size <= limit
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        received += len(chunks[-1])
        size = max(size, received)
        more = message.get("more_body", False) and size <= limit
    return limit if size > limit else b"".join(chunks)


def _is_jsonrpc(message: Any) -> bool:
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return False
    return isinstance(message.get("method"), str) or ("id" in message and ("result" in message or "error" in message))


def _id_problem(message: dict[str, Any]) -> str | None:
    """Why the message's id cannot be answered to, if it cannot (MCP: a string or an integer; an
    error may answer with null a request it could not read)."""
    if "id" not in message:
        return None
    ident = message["id"]
    if isinstance(ident, str) or (isinstance(ident, int) and not isinstance(ident, bool)):
        return None
    if ident is None and "error" in message and "method" not in message:
        return None
    if isinstance(ident, dict | list):
        shown = "an object" if isinstance(ident, dict) else "an array"
    else:
        shown = orjson.dumps(ident).decode()  # true, 1.5, null
    return f"Invalid Request: id must be a string or an integer, not {shown}"


async def _rpc_error(send: Send, status: int, code: int, message: str) -> None:
    await _json(send, status, {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}})


async def _json(send: Send, status: int, body: Any) -> None:
    payload = orjson.dumps(body)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})

"""The stdio transport, answering every line it cannot read.

The SDK's stdio reader hands a line it cannot parse to the session as an exception, which logs it
at DEBUG and drops it: a client that sent malformed JSON, a lone surrogate or JSON nested deeper
than the parser allows then waits forever for an answer. ``Answering`` sits between the reader and
the session and answers such a line with a JSON-RPC error (parse error or invalid request) carrying
the request's id whenever the line reveals one, logs it, and reads on. Over HTTP the SDK already
answers the same bodies with a parse error; this makes stdio say as much. A line nested deeper
than the parser goes is answered in the HTTP body check's words, naming the limit (core/nesting.py).
"""

from __future__ import annotations

import json  # noqa: TID251 -- lenient where orjson is strict (lone surrogates): only to find an id
import logging
import re
from types import TracebackType
from typing import Any, Self

import anyio
import mcp_types as types
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from mcp_memory.core.nesting import NESTING_PROBLEM, too_deep

log = logging.getLogger(__name__)

# An id at the start of a line that no parser accepts: `{"jsonrpc": "2.0", "id": 7, ...`.
_LEADING_ID = re.compile(r'"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]|\\.){0,200}")')


def _request_id(raw: str) -> int | str | None:
    """The id of the request ``raw`` meant to be, if it can be told; JSON-RPC says null otherwise."""
    try:
        message = json.loads(raw)  # lenient where the SDK is strict: lone surrogates, deep nesting
    except (ValueError, RecursionError):
        found = _LEADING_ID.search(raw[:4096])
        if found is None:
            return None
        try:
            value = json.loads(found.group(1))
        except ValueError:
            return None
        return value if isinstance(value, int | str) else None
    if isinstance(message, dict):
        ident = message.get("id")
        if isinstance(ident, int | str) and not isinstance(ident, bool):
            return ident
    return None


def unreadable_answer(exc: Exception) -> types.JSONRPCError:
    """The JSON-RPC error that answers a line the transport could not turn into a message."""
    errors = exc.errors(include_url=False) if isinstance(exc, ValidationError) else []
    first: dict[str, Any] = dict(errors[0]) if errors else {}
    raw = first.get("input")
    if first.get("type") == "json_invalid" and isinstance(raw, str) and too_deep(raw):
        ident, code, message = _request_id(raw), types.INVALID_REQUEST, NESTING_PROBLEM  # as over HTTP
    elif first.get("type") == "json_invalid" and isinstance(raw, str):
        ident = _request_id(raw)
        code = types.PARSE_ERROR if ident is None else types.INVALID_REQUEST
        message = f"{first.get('msg', 'invalid JSON')} (a message is one JSON-RPC object on one line, UTF-8)"
    else:
        objects = [e["input"] for e in errors if isinstance(e.get("input"), dict)]  # the message as parsed
        ident = next((o["id"] for o in objects if isinstance(o.get("id"), int | str)), None)
        code = types.INVALID_REQUEST
        where = ".".join(str(part) for part in first.get("loc", ()))
        message = f"not a JSON-RPC request: {where + ': ' if where else ''}{first.get('msg', str(exc))}"
    return types.JSONRPCError(jsonrpc="2.0", id=ident, error=types.ErrorData(code=code, message=message[:500]))


class ForwardingReadStream:
    """A read stream around another: everything but ``receive`` is passed through."""

    def __init__(self, inner: ReadStream[SessionMessage | Exception]) -> None:
        self._inner = inner

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        return await self._inner.receive()

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


class Answering(ForwardingReadStream):
    """A read stream that answers the transport's parse failures instead of passing them on."""

    def __init__(self, inner: ReadStream[SessionMessage | Exception], replies: WriteStream[SessionMessage]) -> None:
        super().__init__(inner)
        self._replies = replies

    async def receive(self) -> SessionMessage | Exception:
        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item
            answer = unreadable_answer(item)
            log.warning(
                "answered an unreadable message (id %r) with JSON-RPC error %d: %s",
                answer.id,
                answer.error.code,
                answer.error.message,
            )
            await self._replies.send(SessionMessage(answer))


async def run_stdio(mcp: MCPServer) -> None:
    """``MCPServer.run_stdio_async``, with every unreadable line answered."""
    lowlevel = mcp._lowlevel_server  # the SDK offers no public way to run it on other streams
    async with stdio_server() as (read, write):
        await lowlevel.run(Answering(read, write), write, lowlevel.create_initialization_options())

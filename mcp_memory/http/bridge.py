"""`mcp-memory connect URL`: a stdio server that relays every message to a remote mcp-memory.

Claude Desktop (and any stdio-only client) starts this command; it forwards each JSON-RPC
message unchanged over streamable HTTP with the bearer token from an environment variable, and
relays the answers and notifications back. It holds no data and no model: the remote does
the work, so results are the remote's own.

The relay stamps the per-message HTTP headers that the SDK's client session would: the
protocol version (taken from a 2026-07-28 request's envelope, or from the `initialize` answer
of a handshake-era session), the method and the name a call is about.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
from mcp.client.streamable_http import streamable_http_client
from mcp.server.stdio import stdio_server
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.inbound import (
    MCP_METHOD_HEADER,
    MCP_NAME_HEADER,
    MCP_PROTOCOL_VERSION_HEADER,
    NAME_BEARING_METHODS,
    encode_header_value,
)
from mcp.shared.message import ClientMessageMetadata, SessionMessage
from mcp_types import PROTOCOL_VERSION_META_KEY, ErrorData, JSONRPCError, JSONRPCRequest, JSONRPCResponse

from mcp_memory.config import secret_from_environment
from mcp_memory.core.errors import InvalidInputError, UpstreamError
from mcp_memory.logs import scrub
from mcp_memory.mcp.stdio import Answering

log = logging.getLogger(__name__)


class _Stamper:
    """The headers one outbound message needs; remembers a handshake's negotiated version."""

    def __init__(self) -> None:
        self.negotiated: str | None = None
        self.initialize_ids: set[Any] = set()
        self.pending: set[Any] = set()  # requests relayed and not yet answered
        self.answered = anyio.Event()

    def outbound(self, message: SessionMessage) -> SessionMessage:
        inner = message.message
        headers: dict[str, str] = {}
        if isinstance(inner, JSONRPCRequest):
            self.pending.add(inner.id)
            params = inner.params or {}
            meta = params.get("_meta") or {}
            version = meta.get(PROTOCOL_VERSION_META_KEY) if isinstance(meta, dict) else None
            if inner.method == "initialize":
                self.initialize_ids.add(inner.id)
                self.negotiated = None
            if isinstance(version, str):
                headers[MCP_PROTOCOL_VERSION_HEADER] = version
                headers[MCP_METHOD_HEADER] = inner.method
                key = NAME_BEARING_METHODS.get(inner.method)
                name = params.get(key) if key else None
                if isinstance(name, str):
                    headers[MCP_NAME_HEADER] = encode_header_value(name)
            elif self.negotiated is not None:
                headers[MCP_PROTOCOL_VERSION_HEADER] = self.negotiated
        elif self.negotiated is not None:
            headers[MCP_PROTOCOL_VERSION_HEADER] = self.negotiated
        return SessionMessage(inner, ClientMessageMetadata(headers=headers or None))

    def delivered(self, message: SessionMessage) -> None:
        """An answer reached the client: one request fewer to wait for at the end."""
        inner = message.message
        if isinstance(inner, JSONRPCResponse | JSONRPCError) and inner.id in self.pending:
            self.pending.discard(inner.id)
            self.answered.set()
            self.answered = anyio.Event()

    def inbound(self, message: SessionMessage) -> None:
        inner = message.message
        if isinstance(inner, JSONRPCResponse) and inner.id in self.initialize_ids:
            self.initialize_ids.discard(inner.id)
            version = (inner.result or {}).get("protocolVersion")
            if isinstance(version, str):
                self.negotiated = version


class _Refusals:
    """Turns the SDK's bare "Server returned an error response" for a 401 or 403 into what happened.

    The remote's refusal is an HTTP status with a `WWW-Authenticate` header, not a JSON-RPC
    error, so the client would otherwise learn nothing about the token; the user needs to hear
    that the token in their environment variable was refused, and why.
    """

    def __init__(self, token_env: str) -> None:
        self.token_env = token_env
        self.last: str | None = None

    async def observe(self, response: httpx2.Response) -> None:
        if (
            response.status_code == 404
            and response.request.method == "POST"
            and "mcp-session-id" not in response.request.headers
        ):
            self.last = (
                f"the remote has no streamable HTTP endpoint at {scrub(str(response.request.url))} (HTTP 404); "
                "check the path (`serve --transport http` uses /mcp); the bridge does not speak SSE"
            )
            log.error("%s", self.last)
        if response.status_code in (401, 403):
            challenge = response.headers.get("www-authenticate", "")
            why = (
                challenge.split('error_description="', 1)[1].split('"', 1)[0]
                if "error_description=" in challenge
                else ""
            )
            self.last = f"the remote refused the token in {self.token_env} (HTTP {response.status_code})" + (
                f": {why}" if why else "; set it to a token from `mcp-memory token create`"
            )
            log.error("%s", self.last)

    def explain(self, message: SessionMessage) -> SessionMessage:
        inner = message.message
        if self.last is None or not isinstance(inner, JSONRPCError):
            return message
        if inner.error.message not in ("Server returned an error response", "Not Found"):
            return message
        error = ErrorData(code=inner.error.code, message=self.last, data=inner.error.data)
        return SessionMessage(JSONRPCError(jsonrpc="2.0", id=inner.id, error=error))


def _check_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InvalidInputError("url", f"{url!r} is not an http(s) URL; give e.g. https://memory.example.com/mcp")
    if parts.username or parts.password:
        raise InvalidInputError("url", "carries credentials; put the token in the environment variable instead")


async def run_bridge(url: str, token_env: str) -> int:
    _check_url(url)
    secret = secret_from_environment(token_env)
    if secret is None:
        raise InvalidInputError(
            "token",
            f"environment variable {token_env} is not set (or empty); set it to a token from `mcp-memory token create`",
        )
    token = secret.get_secret_value()
    if threading.current_thread() is threading.main_thread():
        # The relay holds no data, and a read of stdin blocked in a worker thread would keep an
        # orderly shutdown waiting for input that never comes: Ctrl-C ends the process at once.
        signal.signal(signal.SIGINT, lambda _signum, _frame: os._exit(130))
    stamper = _Stamper()
    refusals = _Refusals(token_env)
    log.info("relaying stdio to %s", scrub(url))
    # The SDK's client tells each reconnection of the GET stream at INFO, a clean close by the server
    # too: ordinary for a relay that runs all day; its warnings and errors still come through.
    client_log = logging.getLogger("mcp.client.streamable_http")
    client_log.setLevel(max(logging.WARNING, logging.getLogger().getEffectiveLevel()))
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    http.event_hooks["response"].append(refusals.observe)
    try:
        await _relay(url, http, stamper, refusals)
    except BaseExceptionGroup as group:
        unreachable = group.subgroup(lambda exc: isinstance(exc, httpx2.TransportError))
        if unreachable is None:
            raise
        first = unreachable.exceptions[0]
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        raise UpstreamError(
            f"cannot reach {scrub(url)} ({type(first).__name__}: {first}); is `mcp-memory serve --transport "
            "http` running there? The bridge speaks streamable HTTP (the URL ends in /mcp by default), not SSE"
        ) from None
    return 0


async def _relay(url: str, http: httpx2.AsyncClient, stamper: _Stamper, refusals: _Refusals) -> None:
    async with (
        http,
        streamable_http_client(url, http_client=http) as (remote_read, remote_write),
        stdio_server() as (local_read, local_write),
        # Closing the write ends lets the stdio writer and the HTTP poster finish, so the relay
        # exits when the client closes stdin (or on Ctrl-C) instead of waiting forever.
        local_write,
        remote_write,
        anyio.create_task_group() as group,
    ):

        async def upstream() -> None:
            await _pump(Answering(local_read, local_write), remote_write, stamper.outbound)
            # The client closed stdin: answers still on their way are delivered first (30 s at most).
            with anyio.move_on_after(30):
                while stamper.pending:
                    await stamper.answered.wait()
            group.cancel_scope.cancel()

        async def downstream() -> None:
            def observe(message: SessionMessage) -> SessionMessage:
                stamper.inbound(message)
                return refusals.explain(SessionMessage(message.message))

            await _pump(remote_read, local_write, observe, stamper.delivered)
            group.cancel_scope.cancel()

        group.start_soon(upstream)
        group.start_soon(downstream)


async def _pump(
    source: ReadStream[SessionMessage | Exception],
    sink: WriteStream[SessionMessage],
    convert: Callable[[SessionMessage], SessionMessage],
    sent: Callable[[SessionMessage], None] = lambda _message: None,
) -> None:
    async for item in source:
        if isinstance(item, Exception):  # a frame that could not be parsed: say so, keep going
            log.warning("dropped a message that could not be relayed: %s", scrub(str(item)))
            continue
        await sink.send(convert(item))
        sent(item)

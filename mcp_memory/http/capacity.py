"""Capacity: the outermost HTTP middleware, which keeps the requests in flight within the share of
file descriptors the gateway has (``descriptors.budget``).

Each request in flight holds its connection's descriptor, and a streaming one (an SSE stream, a
GET held open for notifications) holds it for as long as the client listens. Past the share, a
request is answered at once with 503 and Retry-After instead of taking a descriptor the principal
files need; the refusals are logged once per interval with their count, never a line each.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_memory import descriptors, metrics

log = logging.getLogger("mcp_memory.http")

RETRY_AFTER_SECONDS = 2


class Capacity:
    def __init__(
        self, app: ASGIApp, limit: int | None, *, interval: float = 30.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.app = app
        self.limit = limit
        self.in_flight = 0
        self.refused = 0
        self.interval = interval
        self.clock = clock
        self._unlogged = 0
        self._last: float | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.limit is None:
            await self.app(scope, receive, send)
            return
        if self.in_flight >= self.limit:
            await self._refuse(send)
            return
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1

    async def _refuse(self, send: Send) -> None:
        self.refused += 1
        self._unlogged += 1
        metrics.REFUSED_BUSY.inc()
        now = self.clock()
        if self._last is None or now - self._last >= self.interval:
            self._last = now
            log.warning(
                "at capacity: %d requests in flight, the share of file descriptors for connections; "
                "refused %d with 503 since the last report (raise ulimit -n to serve more at once)",
                self.limit,
                self._unlogged,
            )
            self._unlogged = 0
        body = orjson.dumps(
            {
                "jsonrpc": "2.0",
                "id": None,
                "error": {
                    "code": descriptors.BUSY_CODE,
                    "message": f"the server is at capacity ({self.limit} requests in flight, bounded by its "
                    f"file descriptor limit); retry in {RETRY_AFTER_SECONDS} seconds",
                },
            }
        )
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"retry-after", str(RETRY_AFTER_SECONDS).encode()),
        ]
        await send({"type": "http.response.start", "status": 503, "headers": headers})
        await send({"type": "http.response.body", "body": body})

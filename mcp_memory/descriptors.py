"""File descriptors: the budget a crowd of principals and connections shares, and what the server
does when it runs out anyway.

A process may hold ``ulimit -n`` descriptors. Each open principal holds about five (two
connections to its file, its WAL and shared memory), each client connection one, and the rest of
the process (the model, the control files, the listening socket, worker threads' pipes) a fixed
reserve. The pool and the gateway divide what is left, so that neither can starve the other.

Running out is a state, not a crash: asyncio's accept loop, on EMFILE, logs one line per queued
connection (up to the listen backlog, 2,048 under uvicorn) every second until descriptors come
back, which filled a 497 MB log in five minutes. ``AcceptGuard`` counts those and writes one line
per interval instead; the loop's own one-second pause before it accepts again is the back-off.
"""

from __future__ import annotations

import errno
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

# Each open principal: two connections to its file and to its WAL, one shared-memory file, and
# during the migration check of a file being opened three more (FDS_PER_PRINCIPAL keeps the margin).
FDS_PER_PRINCIPAL = 8
# The rest of the process: the model's files, the control, token and session stores, the listening
# socket, the event loop's own, the worker threads' and a log file; measured at 40-50 here.
FD_RESERVE = 64
# Raising the soft limit to the hard one costs nothing; past this, select-based code in libraries
# could misbehave and the kernel's tables grow for nothing.
SOFT_LIMIT_CEILING = 1 << 16
EXHAUSTED = frozenset({errno.EMFILE, errno.ENFILE})
# The JSON-RPC error for "busy, retry shortly", from the range left to implementations: the SDK's
# own codes there (-32000 closed, -32001 timeout, -32020..-32042) mean other things.
BUSY_CODE = -32003


def limits() -> tuple[int | None, int | None]:
    """(soft, hard) ``ulimit -n`` of this process; None where unlimited or unknown (Windows)."""
    try:
        import resource
    except ImportError:
        return None, None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    unlimited = resource.RLIM_INFINITY
    return (None if soft == unlimited else soft), (None if hard == unlimited else hard)


def raise_soft_limit() -> int | None:
    """Lift the soft descriptor limit to the hard one (a service manager's 1,024 soft often sits under
    a hard limit hundreds of times larger); the limit in force after, None when unlimited."""
    soft, hard = limits()
    if soft is None:
        return None
    wanted = min(hard or SOFT_LIMIT_CEILING, SOFT_LIMIT_CEILING)
    if wanted > soft:
        import resource

        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard if hard is not None else resource.RLIM_INFINITY))
        except (ValueError, OSError) as exc:  # a sandbox may refuse: the old limit stands
            log.debug("could not raise the descriptor limit from %d to %d: %s", soft, wanted, exc)
            return soft
        log.debug("descriptor limit raised from %d to %d (the hard limit)", soft, wanted)
        return wanted
    return soft


@dataclass(frozen=True)
class Budget:
    """How the descriptors the process may open are shared: ``principals`` open at once in the pool,
    ``connections`` client connections at once in the gateway (None: no limit to fit)."""

    limit: int | None
    principals: int
    connections: int | None

    def describe(self, max_open: int) -> str:
        if self.limit is None:
            return f"no descriptor limit (ulimit -n unlimited); pool.max_open {max_open}"
        lowered = "" if self.principals >= max_open else f", lowered from pool.max_open {max_open}"
        return (
            f"ulimit -n {self.limit}: up to {self.principals} principal files open at once{lowered}, "
            f"{self.connections} client connections"
        )


def budget(max_open: int, limit: int | None) -> Budget:
    """Share ``limit`` descriptors: the reserve first, then half of the rest at most to the pool
    (``max_open`` at most), the remainder to client connections. With ``ulimit -n 256`` that is 12
    principals and 96 connections; with 1,024, 60 and 480."""
    if limit is None:
        return Budget(None, max_open, None)
    spare = max(limit - FD_RESERVE, 2 * FDS_PER_PRINCIPAL)
    principals = max(1, min(max_open, spare // 2 // FDS_PER_PRINCIPAL))
    connections = max(1, spare - principals * FDS_PER_PRINCIPAL)
    return Budget(limit, principals, connections)


def open_count() -> int | None:
    """Descriptors this process holds now (Linux; None elsewhere). Listing them takes one more: when
    none is left, the count is the limit itself."""
    try:
        return len(list(Path("/proc/self/fd").iterdir()))
    except OSError as exc:
        return limits()[0] if exc.errno in EXHAUSTED else None


def exhausted(exc: BaseException) -> bool:
    """Whether opening a file failed for want of descriptors: EMFILE or ENFILE in ``exc``'s chain, or
    (SQLite reports EMFILE as "unable to open database file", without the errno) a process within a
    principal's worth of its limit."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in EXHAUSTED:
            return True
        seen = seen.__cause__ or seen.__context__
    soft, _ = limits()
    count = open_count()
    return soft is not None and count is not None and count >= soft - FDS_PER_PRINCIPAL


def out_of_files_message() -> str:
    soft, _ = limits()
    return (
        f"the server has no file descriptor left right now (ulimit -n {soft if soft is not None else 'unlimited'}, "
        f"{open_count()} open); retry in a few seconds. Operator: raise the limit (`ulimit -n 4096` before "
        "starting, or LimitNOFILE= in a systemd unit); `mcp-memory doctor` shows the budget"
    )


class AcceptGuard:
    """An event loop exception handler: "out of system resource" reports from the accept loop are
    counted and logged once per ``interval`` seconds with the count; everything else goes to the
    loop's default handler as before."""

    def __init__(self, interval: float = 30.0, clock: Any = time.monotonic) -> None:
        self.interval = interval
        self.clock = clock
        self.count = 0  # reports since start
        self._unlogged = 0
        self._last: float | None = None

    def __call__(self, loop: Any, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if not (isinstance(exc, OSError) and "out of system resource" in str(context.get("message", ""))):
            loop.default_exception_handler(context)
            return
        self.count += 1
        self._unlogged += 1
        now = self.clock()
        if self._last is not None and now - self._last < self.interval:
            return
        self._last = now
        soft, _ = limits()
        log.error(
            "out of file descriptors (%s, ulimit -n %s): new connections wait (%d refused accept(s) since the "
            "last report); they are accepted again as soon as descriptors free up. Raise the limit "
            "(`ulimit -n 4096` before starting, or LimitNOFILE= in a systemd unit) or lower pool.max_open",
            errno.errorcode.get(exc.errno or 0, exc.errno),
            soft if soft is not None else "unlimited",
            self._unlogged,
        )
        self._unlogged = 0

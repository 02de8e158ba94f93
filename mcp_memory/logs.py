"""Where log records go and what they may say: one handler, through the redactor, no user content.

Memories, queries and checkpoints are the person's words: no log line carries them, at any level.
Our own lines name ids, counts, sizes and timings. Several libraries log content at DEBUG, and
``log_level = "DEBUG"`` must not turn the log into a copy of the store, so the handler holds each
of them at a floor (``LIBRARY_FLOORS``) whatever the root level is.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from typing import Any

import orjson

from mcp_memory.config import Settings
from mcp_memory.redact import redact
from mcp_memory.scope import GATEWAY_REQUEST_ID, current_request_id
from mcp_memory.storage.permissions import private_dir

# The least level let through from each library logger (and its children), and what its lower
# lines would carry. A floor at the handler, not Logger.setLevel: uvicorn sets its loggers' levels
# as it starts, a library may set its own, and a test's or a caller's level change would undo a
# level; every record of the process passes the handler.
LIBRARY_FLOORS: dict[str, int] = {
    "aiosqlite": logging.INFO,  # each statement with its parameters: memory text, keyword index bodies, queries
    "psycopg": logging.INFO,  # connection strings, statements in rollback tracebacks (psycopg.pool included)
    "mcp": logging.WARNING,  # JSON-RPC messages with their arguments (sse); INFO: a tool error's text
    "sse_starlette": logging.INFO,  # every event sent, that is every response
    "uvicorn": logging.INFO,  # ASGI messages with their bodies at TRACE/DEBUG
    "httpx": logging.WARNING,  # request lines (the LLM, Qdrant); the gateway logs ours, with an id
    "httpx2": logging.WARNING,
    "httpcore": logging.WARNING,  # headers and body events
    "httpcore2": logging.WARNING,
    "hpack": logging.WARNING,  # decoded HTTP/2 headers, Authorization among them
    "urllib3": logging.WARNING,
    "openai": logging.INFO,  # the request options: the prompt, with the memories in it
    "qdrant_client": logging.INFO,
}


@functools.lru_cache(maxsize=512)
def library_floor(name: str) -> int:
    """The floor of logger ``name``: its own, or its nearest listed parent's; 0 for ours and others."""
    while name:
        if name in LIBRARY_FLOORS:
            return LIBRARY_FLOORS[name]
        name = name.rpartition(".")[0]
    return logging.NOTSET


def scrub(text: str) -> str:
    """What we say, redacted: a log record, a log notification to the client (`client_log`), a tool
    error's message (the face's error mapping) and the bridge's errors. An error may quote the
    caller's own value or an upstream's reply, and agent hosts keep transcripts (ADR 24)."""
    return redact(text)


class RedactingFilter(logging.Filter):
    """Applies `scrub` to every log record before any handler formats it."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = scrub(message)
        if cleaned != message or record.args:
            record.msg = cleaned
            record.args = None
        if record.exc_info and record.exc_info[1] is not None:
            # Tracebacks carry exception text; format once, redact, and drop the raw info.
            formatted = logging.Formatter().formatException(record.exc_info)
            record.msg = f"{record.msg}\n{scrub(formatted)}"
            record.exc_info = None
            record.exc_text = None
        return True


class LibraryFloorFilter(logging.Filter):
    """Drops a library's record below its floor (before the redactor formats it)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= library_floor(record.name)


class RequestIdFilter(logging.Filter):
    """Stamps each record with the id of the HTTP request it belongs to ("-" outside one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = GATEWAY_REQUEST_ID.get() or current_request_id() or "-"
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, request id, message (already redacted)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}",
            "level": record.levelname,
            "logger": record.name,
            "request_id": getattr(record, "request_id", "-"),
            "message": record.getMessage(),
        }
        if isinstance(http := getattr(record, "http", None), dict):
            entry.update(http)
        return orjson.dumps(entry).decode()


def guard(handler: logging.Handler) -> logging.Handler:
    """The filters every handler of ours has: the library floors first (a dropped record is never
    formatted), then the redactor."""
    handler.addFilter(LibraryFloorFilter())
    handler.addFilter(RedactingFilter())
    return handler


def configure_logging(settings: Settings, transport: str = "stdio") -> None:
    """Logs go to stderr (stdout is the stdio wire) or a file, always through the redactor.

    JSON lines with the request id on the network transports (`log_format = "auto"`), text otherwise.
    """
    handler: logging.Handler
    if settings.log_file is not None:
        # Born owner-only, as the data files: a folder or file made here is ours; one that exists
        # keeps its mode (the store tightens the log when it lies in the data directory).
        if settings.log_file.is_relative_to(settings.data_dir):  # made here, the data directory is ours
            private_dir(settings.data_dir)
        private_dir(settings.log_file.parent)
        os.close(os.open(settings.log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
        handler = logging.FileHandler(settings.log_file, encoding="utf-8")
    else:
        handler = logging.StreamHandler(sys.stderr)
    structured = settings.log_format == "json" or (settings.log_format == "auto" and transport != "stdio")
    if structured:
        handler.setFormatter(JsonFormatter())
    elif transport == "stdio":  # one client, no requests to tell apart
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s [%(request_id)s]: %(message)s"))
    guard(handler).addFilter(RequestIdFilter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
        if isinstance(old, logging.FileHandler):  # an earlier call's log file: nothing writes it now
            old.close()
    root.addHandler(handler)
    root.setLevel(settings.log_level)

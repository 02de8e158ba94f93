"""What the MCP face's functions take, and the wire helpers they share.

A tool, resource, prompt or completion is ``async def name(face: Face, ...)``: the registration
table (``table``) gives it the server's ``Face``; a test gives it one it built, without a server.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import orjson
from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from mcp_memory.mcp.notify import ResourceNotifier
from mcp_memory.scope import ScopeResolver
from mcp_memory.services.browse import BrowseService
from mcp_memory.services.erasure import ErasureService
from mcp_memory.services.golden import GoldenService
from mcp_memory.services.memory import MemoryService
from mcp_memory.services.stats import StatsService
from mcp_memory.services.tasks import TaskService


async def _at_once() -> None:
    return None


@dataclass(frozen=True)
class Face:
    """The services the MCP functions call, the resolver that says who is calling (``scopes``), and
    the notifier that tells the caller's subscribers what a call changed."""

    memory: MemoryService
    tasks: TaskService
    stats: StatsService
    browse: BrowseService
    erasure: ErasureService
    golden: GoldenService
    scopes: ScopeResolver
    notifier: ResourceNotifier
    settled: Callable[[], Awaitable[None]] = _at_once  # a server's first calls wait for its memory file


def compact(result: BaseModel, text: str | None = None) -> CallToolResult:
    """A result as compact JSON without unset fields in the structured content, and in the text block
    too unless ``text`` renders it for reading (recall's lines: a client showing both pays once)."""
    data = result.model_dump(mode="json", exclude_none=True)
    shown = orjson.dumps(data).decode() if text is None else text
    return CallToolResult(content=[TextContent(type="text", text=shown)], structured_content=data)


def shown(result: BaseModel, text: str) -> CallToolResult:
    """A result whole in the structured content (every field, null ones too, as the SDK sends a
    returned model) and ``text``, its rendering for reading, in the text block."""
    data = result.model_dump(mode="json", by_alias=True)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


def problems(field: str, exc: ValidationError) -> str:
    """Each failure as "where: what", without pydantic's "Value error, " prefix or link."""
    return "; ".join(_problem(field, err) for err in exc.errors(include_url=False))


def _problem(field: str, err: ErrorDetails) -> str:
    where = ".".join(str(p) for p in err["loc"]) or field
    if err["type"] == "model_type" and isinstance(err.get("input"), list):
        # A model wants one object; a list is the likely slip (a tree sent as its list of steps),
        # and pydantic's "valid dictionary or instance of TaskNode" does not say that.
        return f"{where}: is a list; send one JSON object ({err.get('ctx', {}).get('class_name', 'object')})"
    return f"{where}: {err['msg'].removeprefix('Value error, ')}"

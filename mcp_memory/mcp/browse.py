"""The tools that browse and correct memories: list_memories, get_memory, correct_memory."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult
from pydantic import Field

from mcp_memory.core.models import MemorySort
from mcp_memory.core.numbers import Bool, Float, Int
from mcp_memory.core.recalled import Detail
from mcp_memory.mcp import lines, wire_memory
from mcp_memory.mcp.face import Face, compact
from mcp_memory.mcp.notify import pin_uris
from mcp_memory.mcp.schemas import CorrectResult, ListFilters, MemoryDetail, MemoryPage
from mcp_memory.services.intake import CallContext

LIST_DOC = """List memories page by page, newest first by default: to browse what is stored, not to answer a
question (recall ranks by meaning). Filters as recall's, plus pinned, level and conflicts; sort by
time (when it happened), created, importance or last_used. Pass next_cursor back as cursor to page
on. Current memories only unless the filters include superseded, archived or expired ones."""

GET_DOC = """One memory with its whole history: the full record (in any state: current, replaced, archived,
expired), every earlier version it replaced and every later one that replaced it (current_id is the
one that holds now), each time it was stated, the summaries holding it and the memories recall
follows from it."""

CORRECT_DOC = """Correct a memory's text, kind, tags or importance. Writes a new version that supersedes it:
the old one stays in history (get_memory shows the chain) and recall returns the new one. Fields you
omit keep their value; pinning, task, namespace and time carry over. Only a current, raw memory can
be corrected: a replaced one names its successor, a summary must be taken apart first."""


async def list_memories(
    face: Face,
    ctx: Context,
    filters: ListFilters | None = None,
    sort: MemorySort = "time",
    descending: Annotated[Bool, Field(description="newest (or highest) first; false for oldest first")] = True,
    cursor: Annotated[str | None, Field(description="next_cursor of the previous page")] = None,
    limit: Annotated[Int, Field(description="memories per page, 1 to 200")] = 20,
    detail: Annotated[Detail, Field(description="listed entries (default) or full records")] = "lean",
) -> Annotated[CallToolResult, MemoryPage]:
    page = await face.browse.list_memories(
        face.scopes.scope(ctx),
        wire_memory.memory_filter(filters),
        sort=sort,
        descending=descending,
        cursor=cursor,
        limit=limit,
    )
    result = wire_memory.memory_page(page, sort, descending, detail)
    # Asked for whole records: the text block carries them too, as JSON (as recall does).
    return compact(result, None if detail == "full" else lines.memory_page_lines(result))


async def get_memory(face: Face, ctx: Context, id: str) -> Annotated[CallToolResult, MemoryDetail]:
    detail = wire_memory.memory_detail(await face.browse.get_memory(face.scopes.scope(ctx), id))
    return compact(detail, lines.memory_detail_lines(detail))


async def correct_memory(
    face: Face,
    ctx: Context,
    id: Annotated[str, Field(description="the memory to correct")],
    text: Annotated[str | None, Field(description="the corrected text")] = None,
    kind: Annotated[str | None, Field(description="the corrected kind")] = None,
    tags: Annotated[list[str] | None, Field(description="the tags it should carry (replaces them all)")] = None,
    importance: Annotated[Float | None, Field(description="0..1")] = None,
) -> CorrectResult:
    result = await face.browse.correct_memory(
        face.scopes.scope(ctx),
        id,
        CallContext(face.scopes.provenance(ctx)),
        text=text,
        kind=kind,
        tags=tags,
        importance=importance,
    )
    await face.notifier.changed(pin_uris())
    return wire_memory.correct_result(result)

"""The golden_queries tool: the person's queries that every lifecycle pass must keep answering."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult
from pydantic import Field

from mcp_memory.core.numbers import Bool
from mcp_memory.mcp.face import Face, shown
from mcp_memory.mcp.lines import golden_lines
from mcp_memory.mcp.schemas import GoldenQueriesResult
from mcp_memory.mcp.wire_upkeep import golden_result

GOLDEN_DOC = """Golden queries: questions with the memory each must find. Every lifecycle pass (decay,
consolidation, summaries) is checked against them: what answers them is never evicted, and a pass
after which recall finds fewer of them is rolled back (its summaries taken apart, its archives
restored). Besides these, queries are sampled from pinned and important memories. Add one with
query and memory_id, delete one with remove=<id>; check=true asks them all now (reinforcement off)."""


async def golden_queries(
    face: Face,
    ctx: Context,
    query: Annotated[str | None, Field(description="a question to add; memory_id names its answer")] = None,
    memory_id: Annotated[str | None, Field(description="the memory the new query must find")] = None,
    remove: Annotated[str | None, Field(description="the id of a golden query to delete")] = None,
    check: Annotated[Bool, Field(description="ask every golden query now and say which are found")] = False,
) -> Annotated[CallToolResult, GoldenQueriesResult]:
    golden = face.golden
    scope = face.scopes.scope(ctx)
    if remove is not None:
        await golden.remove(scope, remove)
    if query is not None or memory_id is not None:
        await golden.add(scope, query or "", memory_id or "")
    rows = await golden.queries(scope)
    measure = await golden.check_now(scope) if check else None
    result = golden_result(golden.settings.golden_k, rows, measure, await golden.checks(scope))
    return shown(result, golden_lines(result))

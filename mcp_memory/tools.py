"""Thin MCP adapters: arguments -> Scope -> service call -> pydantic result.

Errors from our tree become ``is_error`` results carrying the message (the model can fix the
call); anything else is a crash the SDK reports without its text.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Annotated, Any, ParamSpec, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field, ValidationError

from mcp_memory.errors import InvalidInputError, MemoryServerError
from mcp_memory.models import (
    ForgetFilter,
    ForgetResult,
    MemoryInput,
    RecallFilters,
    RecallResult,
    RememberResult,
)
from mcp_memory.scope import ScopeResolver
from mcp_memory.services.memory import CallContext, MemoryService

P = ParamSpec("P")
R = TypeVar("R")


def _as_tool_errors(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await fn(*args, **kwargs)
        except MemoryServerError as exc:
            raise ToolError(str(exc)) from None

    return wrapper


def _validation_message(field: str, exc: ValidationError) -> InvalidInputError:
    problems = "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or field}: {err['msg']}" for err in exc.errors(include_input=False)
    )
    return InvalidInputError(field, problems)


REMEMBER_DOC = """Store one memory (content, kind, ...) or several (memories=[...]) for later recall.

Per item the result says stored, merged (an equivalent memory exists; this occurrence was
recorded on it) or rejected (with the reason, e.g. an acknowledgement such as "ok").
Give `key` to keep one current value of a fact (a later memory with the same key supersedes the
earlier, history kept) or `supersedes` with the ids it replaces. Secrets are redacted."""

RECALL_DOC = """Find the memories that matter for a question, within k and a token budget.

Hybrid search (meaning + keywords) ranked by relevance, recency, use and importance. Each hit
carries its id, text, kind, timestamps, tags, provenance and occurrence ids; explain=true adds
every signal's score. Pinned memories come back in `pinned` and do not count against k.
Recall strengthens what it returns unless reinforce=false. Quotes, brackets, * and AND/OR/NOT
in the question are searched as words."""

FORGET_DOC = """Delete memories by ids or by a filter (tags, kinds, time range, task).

A dry run by default: it lists what would go. Call again with dry_run=false to delete; the
text is then removed from every table and index and cannot be recovered."""


def register_tools(mcp: MCPServer[Any], memory: MemoryService, scopes: ScopeResolver) -> None:
    @mcp.tool(
        description=REMEMBER_DOC,
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False),
    )
    @_as_tool_errors
    async def remember(
        ctx: Context,
        content: Annotated[str | None, Field(description="the text of one memory")] = None,
        kind: str = "fact",
        importance: Annotated[float | None, Field(description="0..1; estimated when absent")] = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        occurred_at: Annotated[datetime | None, Field(description="when it happened, ISO 8601")] = None,
        task_id: str | None = None,
        session_id: str | None = None,
        ttl_seconds: int | None = None,
        supersedes: list[str] | None = None,
        key: str | None = None,
        memories: Annotated[
            list[dict[str, Any]] | None,
            Field(description="several memories at once, each with the fields above (content required)"),
        ] = None,
    ) -> RememberResult:
        if memories is not None and content is not None:
            raise InvalidInputError("memories", "give either content (one memory) or memories (a batch), not both")
        if memories is None and content is None:
            raise InvalidInputError("content", "is missing; give the text to remember (or memories=[...])")
        try:
            if memories is not None:
                items = [MemoryInput.model_validate(m) for m in memories]
            else:
                items = [
                    MemoryInput(
                        content=content or "",
                        kind=kind,
                        importance=importance,
                        tags=tags or [],
                        metadata=metadata or {},
                        occurred_at=occurred_at,
                        task_id=task_id,
                        session_id=session_id,
                        ttl_seconds=ttl_seconds,
                        supersedes=supersedes or [],
                        key=key,
                    )
                ]
        except ValidationError as exc:
            raise _validation_message("memories", exc) from None
        return await memory.remember(scopes.scope(ctx), items, CallContext(scopes.provenance(ctx)))

    @mcp.tool(
        description=RECALL_DOC,
        annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=False),
    )
    @_as_tool_errors
    async def recall(
        ctx: Context,
        query: Annotated[str, Field(description="the question or topic, in any language")],
        k: Annotated[int | None, Field(description="how many memories at most (default 10)")] = None,
        budget_tokens: Annotated[int | None, Field(description="token budget for the hits (default 2000)")] = None,
        filters: RecallFilters | None = None,
        explain: bool = False,
        reinforce: bool = True,
        preset: Annotated[str | None, Field(description="assistant (default), chat or medical")] = None,
    ) -> RecallResult:
        return await memory.recall(
            scopes.scope(ctx),
            query,
            k=k,
            budget_tokens=budget_tokens,
            filters=filters,
            explain=explain,
            reinforce=reinforce,
            preset=preset,
        )

    @mcp.tool(
        description=FORGET_DOC,
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True),
    )
    @_as_tool_errors
    async def forget(
        ctx: Context,
        ids: list[str] | None = None,
        filter: ForgetFilter | None = None,
        dry_run: bool = True,
    ) -> ForgetResult:
        return await memory.forget(scopes.scope(ctx), ids=ids, where=filter, dry_run=dry_run)

"""Thin MCP adapters: arguments -> Scope -> service call -> pydantic result.

Errors from our tree become ``is_error`` results carrying the message (the model can fix the
call); anything else is a crash the SDK reports without its text.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Annotated, Any, ParamSpec, TypeVar

import orjson
from mcp.server.context import ServerMiddleware, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

from mcp_memory import client_log
from mcp_memory.errors import InvalidInputError, MemoryServerError
from mcp_memory.metrics import REMEMBERED, TOOL_CALLS, TOOL_SECONDS
from mcp_memory.redact import redact
from mcp_memory.resources import ResourceNotifier, pin_uris, task_uris
from mcp_memory.schemas import (
    Bool,
    Detail,
    Float,
    ForgetFilter,
    ForgetResult,
    Int,
    MemoryInput,
    PinResult,
    RecallFilters,
    RecallResult,
    RememberResult,
    StatsResult,
    UndoSummaryResult,
)
from mcp_memory.scope import ScopeResolver
from mcp_memory.services.memory import CallContext, MemoryService
from mcp_memory.services.stats import StatsService
from mcp_memory.services.tasks import TaskService
from mcp_memory.task_schemas import (
    CheckpointPage,
    CheckpointReason,
    CheckpointResult,
    PendingAction,
    ResumePacket,
    TaskEdit,
    TaskNode,
    TaskPage,
    TaskUpdateResult,
    TokenUsage,
    ToolCallRecord,
)
from mcp_memory.templates import recall_lines

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")


def as_tool_errors(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Our errors become is_error results; every call is counted and timed for /metrics."""
    name = fn.__name__

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        started = time.perf_counter()
        outcome = "crash"
        try:
            result = await fn(*args, **kwargs)
            outcome = "ok"
            return result
        except MemoryServerError as exc:
            outcome = "error"
            # A message may quote the caller's own value; agent hosts keep transcripts, so redact it too.
            await client_log.tell(kwargs.get("ctx"), "warning", f"{name} refused: {exc}")
            raise ToolError(redact(str(exc))) from None
        except Exception as exc:
            # A bug of ours: the caller gets what failed and an id to find the traceback in the log by.
            request = _request_id(kwargs.get("ctx"))
            log.exception("internal error in %s (request %s)", name, request)
            raise ToolError(
                redact(
                    f"internal error in {name}: {type(exc).__name__}: {exc} (request {request}); this is a bug in "
                    "mcp-memory, not in the call: the server log has the details under that request id"
                )
            ) from None
        finally:
            TOOL_CALLS.inc(tool=name, outcome=outcome)
            TOOL_SECONDS.observe(time.perf_counter() - started, tool=name)

    return wrapper


def compact(result: BaseModel, text: str | None = None) -> CallToolResult:
    """A result as compact JSON without unset fields in the structured content, and in the text block
    too unless ``text`` renders it for reading (recall's lines: a client showing both pays once)."""
    data = result.model_dump(mode="json", exclude_none=True)
    shown = orjson.dumps(data).decode() if text is None else text
    return CallToolResult(content=[TextContent(type="text", text=shown)], structured_content=data)


def _request_id(ctx: object) -> str:
    try:
        return str(ctx.request_id) if isinstance(ctx, Context) else "unknown"
    except ValueError:  # no request in progress
        return "unknown"


def _problems(field: str, exc: ValidationError) -> str:
    """Each failure as "where: what", without pydantic's "Value error, " prefix or link."""
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or field}: {err['msg'].removeprefix('Value error, ')}"
        for err in exc.errors(include_input=False, include_url=False)
    )


def _doc(field: str) -> str:
    """The description a MemoryInput field carries, for the same parameter of the flat form."""
    return MemoryInput.model_fields[field].description or ""


REMEMBER_DOC = """Store one memory (content, kind, ...) or several (memories=[...]) for later recall.

Per item the result says stored, merged (an equivalent memory exists; this occurrence was
recorded on it) or rejected (with the reason, e.g. an acknowledgement such as "ok").
Give `key` to keep one current value of a fact (a later memory with the same key supersedes the
earlier, history kept) or `supersedes` with the ids it replaces. Secrets are redacted."""

RECALL_DOC = """Find the memories that matter for a question, within k and a token budget.

Hybrid search (meaning + keywords) ranked by relevance, recency, use and importance. Each hit
carries its id, text, kind, when it happened, a score and why it was recalled (plus conflicts,
replacements and summary sources when set); the text block gives each hit one line (text, date,
why, id). detail="full" returns whole records, explain=true adds every signal's score (both as
JSON in the text block too). Pinned memories come back in `pinned` and do not count against k.
Recall strengthens what it returns unless reinforce=false. Quotes, brackets, * and AND/OR/NOT
in the question are searched as words."""

FORGET_DOC = """Delete memories by ids or by a filter (tags, kinds, time range, task).

A dry run by default: it lists what would go. Call again with dry_run=false to delete; the
text is then removed from every table and index and cannot be recovered."""


def _argument_problem(mcp: MCPServer[Any], name: str, arguments: dict[str, Any]) -> str | None:
    """What is wrong with a tool call's arguments, field by field in plain words, or None. The SDK
    checks them too, but its answer is pydantic's whole report, with a link to pydantic's site."""
    # The SDK keeps each tool's argument model in its tool manager, which is not public API: if a
    # later SDK moves it, the SDK's own (wordier) validation answers instead.
    manager = getattr(mcp, "_tool_manager", None)
    tool = manager.get_tool(name) if manager is not None and hasattr(manager, "get_tool") else None
    metadata = getattr(tool, "fn_metadata", None)
    if metadata is None:
        return None
    try:
        metadata.validate_arguments(arguments)
    except ValidationError as exc:
        return _problems("arguments", exc)
    return None


def unknown_argument_guard(mcp: MCPServer[Any]) -> ServerMiddleware[Any]:
    """Server middleware: a tool call with an argument the tool does not take is an error, not ignored.

    A model that writes `filter` for `filters` or `limit` for `k` must hear about it, or it will
    trust results its argument never shaped.
    """
    known: dict[str, frozenset[str]] = {}

    async def guard(
        ctx: ServerRequestContext[Any, Any],
        call_next: Callable[[ServerRequestContext[Any, Any]], Awaitable[BaseModel | dict[str, Any] | None]],
    ) -> BaseModel | dict[str, Any] | None:
        params = ctx.params if isinstance(ctx.params, Mapping) else None
        if ctx.method == "tools/call" and params is not None:
            if not known:
                for tool in await mcp.list_tools():
                    known[tool.name] = frozenset(tool.input_schema.get("properties", {}))
            name, arguments = params.get("name"), params.get("arguments") or {}
            allowed = known.get(str(name))
            unknown = sorted(set(arguments) - allowed) if allowed is not None and isinstance(arguments, Mapping) else []
            problem = None
            if unknown:
                takes = ", ".join(sorted(allowed or ()))
                problem = f"unknown argument(s) {', '.join(map(repr, unknown))}; {name} takes {takes}"
            elif allowed is not None and isinstance(arguments, Mapping):
                problem = _argument_problem(mcp, str(name), dict(arguments))
            if problem is not None:
                await client_log.tell(ctx, "warning", f"{name} refused: {problem}")
                text = redact(f"Error executing tool {name}: {problem}")
                return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
        return await call_next(ctx)

    return guard


def register_tools(
    mcp: MCPServer[Any], memory: MemoryService, scopes: ScopeResolver, notifier: ResourceNotifier
) -> None:
    @mcp.tool(
        description=REMEMBER_DOC,
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False),
    )
    @as_tool_errors
    async def remember(
        ctx: Context,
        content: Annotated[str | None, Field(description="the text of one memory")] = None,
        kind: Annotated[str, Field(description=_doc("kind"))] = "fact",
        importance: Annotated[Float | None, Field(description="0..1; estimated when absent")] = None,
        tags: Annotated[list[str] | None, Field(description="labels to filter by later")] = None,
        metadata: Annotated[dict[str, Any] | None, Field(description=_doc("metadata"))] = None,
        occurred_at: Annotated[datetime | None, Field(description="when it happened, ISO 8601")] = None,
        task_id: Annotated[str | None, Field(description="the task this memory belongs to")] = None,
        session_id: Annotated[str | None, Field(description=_doc("session_id"))] = None,
        ttl_seconds: Annotated[Int | None, Field(description=_doc("ttl_seconds"))] = None,
        supersedes: Annotated[list[str] | None, Field(description=_doc("supersedes"))] = None,
        key: Annotated[str | None, Field(description=_doc("key"))] = None,
        pinned: Annotated[Bool, Field(description="always return it with recall and resume")] = False,
        memories: Annotated[
            list[MemoryInput] | None,
            Field(description="several memories at once, each with the fields above (content required)"),
        ] = None,
    ) -> RememberResult:
        if memories is not None and content is not None:
            raise InvalidInputError("memories", "give either content (one memory) or memories (a batch), not both")
        if memories is None and content is None:
            raise InvalidInputError("content", "is missing; give the text to remember (or memories=[...])")
        try:
            if memories is not None:
                items = list(memories)
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
                        pinned=pinned,
                    )
                ]
        except ValidationError as exc:
            raise InvalidInputError("memories", _problems("memories", exc)) from None

        async def progress(done: int, total: int, what: str) -> None:
            await ctx.report_progress(done, total, f"{done} of {total} memories {what}")

        result = await memory.remember(scopes.scope(ctx), items, CallContext(scopes.provenance(ctx), progress))
        for outcome in ("stored", "merged", "rejected"):
            REMEMBERED.inc(getattr(result, outcome), result=outcome)
        if any(item.pinned for item in items):
            await notifier.changed(pin_uris())
        return result

    @mcp.tool(
        description=RECALL_DOC,
        annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=False),
    )
    @as_tool_errors
    async def recall(
        ctx: Context,
        query: Annotated[str, Field(description="the question or topic, any language (limits.max_query_chars: 2000)")],
        k: Annotated[Int | None, Field(description="how many memories at most (default 10; limits.max_k: 50)")] = None,
        budget_tokens: Annotated[
            Int | None,
            Field(description="token budget for the hits (default 2000; limits.max_recall_budget_tokens: 32000)"),
        ] = None,
        filters: RecallFilters | None = None,
        explain: Bool = False,
        reinforce: Bool = True,
        preset: Annotated[str | None, Field(description="assistant (default), chat or medical")] = None,
        detail: Annotated[Detail, Field(description="lean hits (default) or full records")] = "lean",
        as_of: Annotated[
            datetime | None,
            Field(
                description='the moment "last week" or "yesterday" in the question count from (default now); '
                "its UTC offset says whose days they are (without one: a UTC time, in the days of the server's "
                "recall.timezone)"
            ),
        ] = None,
        floor: Annotated[
            Bool, Field(description="leave out memories no closer to the question than the ordinary (default true)")
        ] = True,
    ) -> Annotated[CallToolResult, RecallResult]:
        result = await memory.recall(
            scopes.scope(ctx),
            query,
            k=k,
            budget_tokens=budget_tokens,
            filters=filters,
            explain=explain,
            reinforce=reinforce,
            preset=preset,
            detail=detail,
            as_of=as_of,
            floor=floor,
        )
        # Asked for whole records or every signal: the text block carries them too, as JSON.
        return compact(result, None if explain or detail == "full" else recall_lines(result))

    @mcp.tool(
        description=FORGET_DOC,
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False),
    )
    @as_tool_errors
    async def forget(
        ctx: Context,
        ids: list[str] | None = None,
        filters: Annotated[ForgetFilter | None, Field(description="tags, kinds, time range, task")] = None,
        dry_run: Bool = True,
    ) -> ForgetResult:
        result = await memory.forget(scopes.scope(ctx), ids=ids, where=filters, dry_run=dry_run)
        if result.deleted:
            await notifier.changed(pin_uris())
        return result


CHECKPOINT_DOC = """Save a long task's state so it can be resumed exactly, later, from any session or client.

Creates the task on first use (give `goal`). Fields you pass replace those of the head; fields you
omit keep their value. Pass `expected_head` (the head_seq you last saw) to be told, instead of
silently forking, when another client moved the task meanwhile. Checkpoint after each finished
step, at phase changes, before a costly or irreversible action, and before pausing."""

RESUME_DOC = """Pick a task up where it stood: goal, constraints, the tree with statuses, the current node,
pending actions, time since the last change, what to verify first, the task's memories and the
pinned memories, within a token budget. Give `checkpoint_id` to roll back to that checkpoint (a
new checkpoint copies it; history is kept). The full checkpoint (snapshot included) is at
`full_checkpoint_uri`."""


def register_summary_tool(mcp: MCPServer[Any], memory: MemoryService, scopes: ScopeResolver) -> None:
    @mcp.tool(
        description="Undo a summary the lifecycle made (a hit with level >= 1 and source_ids): its sources come "
        "back to normal recall and the summary is deleted.",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False),
    )
    @as_tool_errors
    async def undo_summary(ctx: Context, id: str) -> UndoSummaryResult:
        restored = await memory.undo_summary(scopes.scope(ctx), id)
        return UndoSummaryResult(summary_id=id, restored=restored)


def register_stats_tool(mcp: MCPServer[Any], stats_service: StatsService, scopes: ScopeResolver) -> None:
    @mcp.tool(
        description="How much this server holds for you (memories by tier, level and state; tasks; checkpoints), "
        "whether memory is switched off, the memories' events, the lifecycle's pending work and last passes, "
        "the golden queries' last check and rollbacks, and how the process is doing (model, index size, uptime).",
        annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True),
    )
    @as_tool_errors
    async def stats(ctx: Context) -> StatsResult:
        return await stats_service.stats(scopes.scope(ctx))


def register_task_tools(
    mcp: MCPServer[Any], tasks: TaskService, memory: MemoryService, scopes: ScopeResolver, notifier: ResourceNotifier
) -> None:
    @mcp.tool(
        description=CHECKPOINT_DOC,
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False),
    )
    @as_tool_errors
    async def checkpoint(
        ctx: Context,
        task_id: Annotated[str | None, Field(description="your id for the task; generated when absent")] = None,
        goal: Annotated[str | None, Field(description="what the task is for (required on creation)")] = None,
        title: str | None = None,
        constraints: list[str] | None = None,
        tree: Annotated[TaskNode | None, Field(description="the whole task tree (one root)")] = None,
        current_node: str | None = None,
        variables: dict[str, Any] | None = None,
        pending_actions: list[PendingAction] | None = None,
        last_tool_calls: list[ToolCallRecord] | None = None,
        snapshot: Annotated[str | None, Field(description="working-memory snapshot, free text")] = None,
        token_usage: TokenUsage | None = None,
        iterations: Int | None = None,
        reason: CheckpointReason = "manual",
        expected_head: Annotated[Int | None, Field(description="the head_seq you last saw")] = None,
        namespaced: Annotated[Bool, Field(description="create the task in this connection's namespace only")] = False,
    ) -> CheckpointResult:
        given = {
            "tree": tree,
            "current_node": current_node,
            "variables": variables,
            "pending_actions": pending_actions,
            "last_tool_calls": last_tool_calls,
            "snapshot": snapshot,
            "token_usage": token_usage,
            "iterations": iterations,
        }
        changes = {
            k: (
                v.model_dump(mode="json")
                if isinstance(v, BaseModel)
                else [x.model_dump(mode="json") for x in v]
                if isinstance(v, list) and v and isinstance(v[0], BaseModel)
                else v
            )
            for k, v in given.items()
            if v is not None
        }
        result = await tasks.checkpoint(
            scopes.scope(ctx),
            task_id,
            changes=changes,
            title=title,
            goal=goal,
            constraints=constraints,
            reason=reason,
            expected_head=expected_head,
            in_namespace=namespaced,
        )
        await notifier.changed(task_uris(result.checkpoint.task_id, checkpoint=True))
        return result

    @mcp.tool(
        description=RESUME_DOC,
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False),
    )
    @as_tool_errors
    async def resume(
        ctx: Context,
        task_id: str,
        checkpoint_id: Annotated[str | None, Field(description="roll back to this checkpoint")] = None,
        budget_tokens: Annotated[Int | None, Field(description="token budget (default 4000)")] = None,
    ) -> ResumePacket:
        packet = await tasks.resume(
            scopes.scope(ctx), task_id, checkpoint_id=checkpoint_id, budget_tokens=budget_tokens
        )
        if packet.rolled_back_to is not None:
            await notifier.changed(task_uris(task_id, checkpoint=True))
        return packet

    @mcp.tool(
        description="Edit a task's tree all-or-nothing: add nodes, move them, set status/notes/title, set the "
        "current node. An unknown node, a cycle or a second root is an error and changes nothing.",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False),
    )
    @as_tool_errors
    async def update_task(
        ctx: Context, task_id: str, edits: list[TaskEdit], expected_head: Int | None = None
    ) -> TaskUpdateResult:
        result = await tasks.update_task(scopes.scope(ctx), task_id, edits, expected_head)
        await notifier.changed(task_uris(task_id, checkpoint=False))
        return result

    @mcp.tool(
        description="Pin a memory (a goal, rule, identity or safety constraint): it then always comes back with "
        "recall and resume, in their `pinned` field, and is never compressed or decayed. Pins share a token cap.",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True),
    )
    @as_tool_errors
    async def pin(ctx: Context, id: str) -> PinResult:
        result = await memory.pin(scopes.scope(ctx), id, True)
        await notifier.changed(pin_uris())
        return result

    @mcp.tool(
        description="Unpin a memory: it goes back to being recalled by relevance only.",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True),
    )
    @as_tool_errors
    async def unpin(ctx: Context, id: str) -> PinResult:
        result = await memory.pin(scopes.scope(ctx), id, False)
        await notifier.changed(pin_uris())
        return result

    @mcp.tool(
        description="List your tasks, most recently changed first; pass next_cursor to page on.",
        annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True),
    )
    @as_tool_errors
    async def list_tasks(ctx: Context, cursor: str | None = None, limit: Int = 20) -> TaskPage:
        return await tasks.list_tasks(scopes.scope(ctx), cursor, limit)

    @mcp.tool(
        description="List a task's checkpoints (id, sequence, time, reason, size), newest first; pass next_cursor "
        "to page on.",
        annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True),
    )
    @as_tool_errors
    async def list_checkpoints(
        ctx: Context, task_id: str, cursor: str | None = None, limit: Int = 20
    ) -> CheckpointPage:
        return await tasks.list_checkpoints(scopes.scope(ctx), task_id, cursor, limit)

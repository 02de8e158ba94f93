"""The one registration table: every tool, resource and prompt the server serves, in the order
the lists show them, and ``register``, which gives each function the server's ``Face``.

A function of the face is ``async def name(face: Face, ...)``. ``register`` hands the SDK a
function with the same name, parameters (``face`` left out) and annotations, which calls it with
the face: the SDK derives the schemas from that signature as from the function itself. Around the
call, each kind answers errors as MCP expects: a tool's become ``is_error`` results (and every call
is counted and timed for /metrics), a resource's become resource errors, a prompt's invalid params.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp.server.mcpserver.resolve import Resolve
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, ToolAnnotations

from mcp_memory.core.errors import MemoryServerError, NotFoundError
from mcp_memory.logs import scrub
from mcp_memory.mcp import (
    browse,
    client_log,
    completions,
    erasure,
    golden,
    memory_tools,
    prompts,
    resources,
    task_tools,
)
from mcp_memory.mcp.face import Face
from mcp_memory.metrics import TOOL_CALLS, TOOL_SECONDS

log = logging.getLogger(__name__)

Function = Callable[..., Awaitable[Any]]
Answer = Callable[[str, Awaitable[Any], Mapping[str, Any]], Awaitable[Any]]


@dataclass(frozen=True)
class Tool:
    fn: Function
    description: str
    read_only: bool
    destructive: bool
    idempotent: bool
    resolved: Mapping[str, Function] = field(default_factory=dict)  # parameter -> the resolver that fills it


@dataclass(frozen=True)
class Resource:
    uri: str
    name: str
    mime_type: str
    description: str
    fn: Function


@dataclass(frozen=True)
class Prompt:
    name: str
    description: str
    fn: Function


TOOLS = (
    Tool(memory_tools.remember, memory_tools.REMEMBER_DOC, read_only=False, destructive=False, idempotent=False),
    Tool(memory_tools.recall, memory_tools.RECALL_DOC, read_only=True, destructive=False, idempotent=False),
    Tool(memory_tools.forget, memory_tools.FORGET_DOC, read_only=False, destructive=True, idempotent=False),
    Tool(task_tools.checkpoint, task_tools.CHECKPOINT_DOC, read_only=False, destructive=False, idempotent=False),
    Tool(task_tools.resume, task_tools.RESUME_DOC, read_only=False, destructive=False, idempotent=False),
    Tool(task_tools.update_task, task_tools.UPDATE_TASK_DOC, read_only=False, destructive=False, idempotent=False),
    Tool(memory_tools.pin, memory_tools.PIN_DOC, read_only=False, destructive=False, idempotent=True),
    Tool(memory_tools.unpin, memory_tools.UNPIN_DOC, read_only=False, destructive=False, idempotent=True),
    Tool(task_tools.list_tasks, task_tools.LIST_TASKS_DOC, read_only=True, destructive=False, idempotent=True),
    Tool(
        task_tools.list_checkpoints, task_tools.LIST_CHECKPOINTS_DOC, read_only=True, destructive=False, idempotent=True
    ),
    Tool(
        erasure.forget_user,
        erasure.FORGET_USER_DOC,
        read_only=False,
        destructive=True,
        idempotent=False,
        resolved={"person": erasure.ask_the_person},
    ),
    Tool(memory_tools.stats, memory_tools.STATS_DOC, read_only=True, destructive=False, idempotent=True),
    Tool(memory_tools.undo_summary, memory_tools.UNDO_SUMMARY_DOC, read_only=False, destructive=True, idempotent=False),
    Tool(browse.list_memories, browse.LIST_DOC, read_only=True, destructive=False, idempotent=True),
    Tool(browse.get_memory, browse.GET_DOC, read_only=True, destructive=False, idempotent=True),
    Tool(browse.correct_memory, browse.CORRECT_DOC, read_only=False, destructive=False, idempotent=False),
    Tool(golden.golden_queries, golden.GOLDEN_DOC, read_only=False, destructive=False, idempotent=False),
)

_JSON, _MARKDOWN = "application/json", "text/markdown"
RESOURCES = (
    Resource(
        "memory://stats",
        "stats",
        _JSON,
        "What the server holds for you and how the process is doing",
        resources.stats_json,
    ),
    Resource(
        "memory://pinned",
        "pinned",
        _MARKDOWN,
        "Pinned memories (goals, rules, identity), as Markdown",
        resources.pinned_md,
    ),
    Resource("memory://pinned.json", "pinned-json", _JSON, "Pinned memories, as JSON", resources.pinned_json),
    Resource(
        "memory://tasks",
        "tasks",
        _JSON,
        "Your tasks, most recently changed first (100 at most; the list_tasks tool pages on)",
        resources.task_list,
    ),
    Resource(
        "memory://tasks/{task_id}",
        "task",
        _MARKDOWN,
        "A task's head: goal, constraints, tree, pending actions, variables, snapshot",
        resources.task,
    ),
    Resource(
        "memory://tasks/{task_id}/checkpoints",
        "task-checkpoints",
        _JSON,
        "A task's checkpoints, newest first (200 at most; list_checkpoints pages on)",
        resources.checkpoint_list,
    ),
    Resource(
        "memory://tasks/{task_id}/checkpoints/{checkpoint_id}",
        "checkpoint",
        _JSON,
        "One complete checkpoint, snapshot included",
        resources.checkpoint,
    ),
)

PROMPTS = (
    Prompt("resume_task", prompts.RESUME_TASK_DOC, prompts.resume_task),
    Prompt("recall_context", prompts.RECALL_CONTEXT_DOC, prompts.recall_context),
)


def register(mcp: MCPServer[Any], face: Face) -> None:
    """Every entry of the tables (and the completions) on ``mcp``, each function given ``face``."""
    for tool in TOOLS:
        mcp.add_tool(
            given(face, tool.fn, _tool_answer, tool.resolved),
            description=tool.description,
            annotations=ToolAnnotations(
                read_only_hint=tool.read_only, destructive_hint=tool.destructive, idempotent_hint=tool.idempotent
            ),
        )
    for res in RESOURCES:
        read = given(face, res.fn, _resource_answer)
        mcp.resource(res.uri, name=res.name, mime_type=res.mime_type, description=res.description)(read)
    for prompt in PROMPTS:
        mcp.prompt(name=prompt.name, description=prompt.description)(given(face, prompt.fn, _prompt_answer))
    mcp.completion()(given(face, completions.complete, _plain))  # type: ignore[no-untyped-call]  # the SDK leaves it untyped


def given(face: Face, fn: Function, answer: Answer, resolved: Mapping[str, Function] | None = None) -> Function:
    """``fn`` with ``face`` given, as the SDK reads it: fn's name and signature without ``face``,
    each parameter of ``resolved`` annotated with its resolver (itself given the face)."""
    signature = inspect.signature(fn, eval_str=True)
    parameters = list(signature.parameters.values())[1:]  # the first is the face
    for name, resolver in (resolved or {}).items():
        at = next(i for i, p in enumerate(parameters) if p.name == name)
        resolve = Resolve(given(face, resolver, _plain))
        parameters[at] = parameters[at].replace(annotation=Annotated[parameters[at].annotation, resolve])

    async def call(*args: Any, **kwargs: Any) -> Any:
        await face.settled()  # the pins of the memory file, looked at once after a start
        return await answer(fn.__name__, fn(face, *args, **kwargs), kwargs)

    call.__name__, call.__qualname__, call.__module__, call.__doc__ = (
        fn.__name__,
        fn.__qualname__,
        fn.__module__,
        fn.__doc__,
    )
    call.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": signature.return_annotation}
    vars(call)["__signature__"] = signature.replace(parameters=parameters)
    return call


async def _plain(name: str, result: Awaitable[Any], kwargs: Mapping[str, Any]) -> Any:
    return await result


async def _tool_answer(name: str, result: Awaitable[Any], kwargs: Mapping[str, Any]) -> Any:
    """Our errors become is_error results; every call is counted and timed for /metrics."""
    started = time.perf_counter()
    outcome = "crash"
    try:
        answer = await result
        outcome = "ok"
        return answer
    except MemoryServerError as exc:
        outcome = "error"
        # A message may quote the caller's own value; agent hosts keep transcripts: the log filter's scrub (ADR 24).
        await client_log.tell(kwargs.get("ctx"), "warning", f"{name} refused: {exc}")
        raise ToolError(scrub(str(exc))) from None
    except Exception as exc:
        # A bug of ours: the caller gets what failed and an id to find the traceback in the log by.
        request = _request_id(kwargs.get("ctx"))
        log.exception("internal error in %s (request %s)", name, request)
        raise ToolError(
            scrub(
                f"internal error in {name}: {type(exc).__name__}: {exc} (request {request}); this is a bug in "
                "mcp-memory, not in the call: the server log has the details under that request id"
            )
        ) from None
    finally:
        TOOL_CALLS.inc(tool=name, outcome=outcome)
        TOOL_SECONDS.observe(time.perf_counter() - started, tool=name)


async def _resource_answer(name: str, result: Awaitable[Any], kwargs: Mapping[str, Any]) -> Any:
    try:
        return await result
    except NotFoundError as exc:
        raise ResourceNotFoundError(str(exc)) from None
    except MemoryServerError as exc:
        raise ResourceError(str(exc)) from None


async def _prompt_answer(name: str, result: Awaitable[Any], kwargs: Mapping[str, Any]) -> Any:
    try:
        return await result
    except MemoryServerError as exc:
        raise MCPError(INVALID_PARAMS, str(exc)) from None


def _request_id(ctx: object) -> str:
    try:
        return str(ctx.request_id) if isinstance(ctx, Context) else "unknown"
    except ValueError:  # no request in progress
        return "unknown"

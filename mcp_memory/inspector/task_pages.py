"""The task pages: the list, one task's tree (statuses, the current node, pending and
irreversible actions), its checkpoint timeline with each reason, a diff between two checkpoints,
and a rollback that asks first."""

from __future__ import annotations

import difflib
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from mcp_memory.inspector.auth import Visitor
from mcp_memory.inspector.base import ROOT, Inspector, form_text, html, notice_of, page, redirect, url_segment
from mcp_memory.mcp import wire_tasks

MAX_DIFF_LINES = 2_000


@page
async def tasks(request: Request, visitor: Visitor, inspector: Inspector) -> Response:
    found = await inspector.tasks.list_tasks(visitor.scope, request.query_params.get("cursor") or None, limit=50)
    return html("tasks.html", visitor=visitor, page=wire_tasks.task_page(found))


def _lines(checkpoint: dict[str, Any]) -> list[str]:
    shown = {k: v for k, v in checkpoint.items() if k != "checkpoint"}
    return orjson.dumps(shown, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode().splitlines()


async def _diff(inspector: Inspector, visitor: Visitor, task_id: str, older: str, newer: str) -> list[tuple[str, str]]:
    """The lines that differ between two checkpoints (with context), each marked +, - or blank."""
    before = wire_tasks.checkpoint_document(*await inspector.tasks.read_checkpoint(visitor.scope, task_id, older))
    after = wire_tasks.checkpoint_document(*await inspector.tasks.read_checkpoint(visitor.scope, task_id, newer))
    lines = difflib.unified_diff(_lines(before), _lines(after), older, newer, lineterm="", n=2)
    marked = [(line[:1] if line[:1] in "+-@" else " ", line) for line in list(lines)[2:]]
    return marked[:MAX_DIFF_LINES]


@page
async def task(request: Request, visitor: Visitor, inspector: Inspector) -> Response:
    task_id = request.path_params["task_id"]
    state = wire_tasks.task_state(await inspector.tasks.state(visitor.scope, task_id))
    timeline = await inspector.tasks.list_checkpoints(visitor.scope, task_id, limit=200)
    older, newer = request.query_params.get("a", ""), request.query_params.get("b", "")
    diff = await _diff(inspector, visitor, task_id, older, newer) if older and newer else None
    problem = "Choose two checkpoints: one to diff from and one to diff to." if bool(older) != bool(newer) else None
    return html(
        "task.html",
        visitor=visitor,
        state=state,
        checkpoints=wire_tasks.checkpoint_page(timeline).checkpoints,
        older=older,
        newer=newer,
        diff=diff,
        problem=problem,
        notice=notice_of(request, visitor),
    )


@page
async def rollback(request: Request, visitor: Visitor, inspector: Inspector) -> Response:
    task_id, checkpoint_id = await form_text(request, "task_id"), await form_text(request, "checkpoint_id")
    if await form_text(request, "confirm") != "yes":
        state = wire_tasks.task_state(await inspector.tasks.state(visitor.scope, task_id))
        await inspector.tasks.read_checkpoint(visitor.scope, task_id, checkpoint_id)  # it exists, or "not found"
        return html("rollback.html", visitor=visitor, state=state, checkpoint_id=checkpoint_id)
    row, _head, copied, warnings = await inspector.tasks.rollback(visitor.scope, task_id, checkpoint_id)
    said = " ".join([f"Rolled back to {copied}: the head is now a copy of it (head {row.head_seq}).", *warnings])
    return redirect(f"{ROOT}/tasks/{url_segment(task_id)}", said, visitor)


ROUTES = [
    Route("/tasks", tasks),
    Route("/tasks/{task_id:path}", task),  # a task id may hold any character, "/" too
    Route("/rollback", rollback, methods=["POST"]),
]

"""MCP resources: pinned memory and the task trees, rendered for people and for programs.

memory://pinned                                      pinned memories, Markdown
memory://pinned.json                                 the same, JSON
memory://tasks                                       the caller's tasks, JSON (newest first)
memory://tasks/{task_id}                             the head, rendered readably (snapshot included)
memory://tasks/{task_id}/checkpoints                 the task's checkpoints, JSON
memory://tasks/{task_id}/checkpoints/{checkpoint_id} one full checkpoint, JSON
"""

from __future__ import annotations

import functools
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

import anyio
import orjson
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.server.subscriptions import InMemorySubscriptionBus
from mcp.shared.subscriptions import ResourceUpdated, ServerEvent
from mcp_types import EmptyResult, SubscribeRequestParams, UnsubscribeRequestParams

from mcp_memory.errors import MemoryServerError, NotFoundError
from mcp_memory.models import Scope
from mcp_memory.schemas import MemoryOut
from mcp_memory.scope import ScopeResolver
from mcp_memory.services import task_tree
from mcp_memory.services.memory import MemoryService
from mcp_memory.services.stats import StatsService
from mcp_memory.services.tasks import TaskService
from mcp_memory.task_schemas import TaskState
from mcp_memory.text import task_uri

log = logging.getLogger(__name__)
P = ParamSpec("P")
R = TypeVar("R")


def _as_resource_errors(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await fn(*args, **kwargs)
        except NotFoundError as exc:
            raise ResourceNotFoundError(str(exc)) from None
        except MemoryServerError as exc:
            raise ResourceError(str(exc)) from None

    return wrapper


def _json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()


def pinned_markdown(pinned: list[MemoryOut]) -> str:
    if not pinned:
        return "# Pinned memory\n\nNothing is pinned. Pin goals, rules and identity with the `pin` tool.\n"
    lines = ["# Pinned memory", ""]
    lines += [
        f"- **{m.kind}**: {m.text} _(id {m.id}, since {m.created_at:%Y-%m-%d}{_origin(m)})_"
        + (f" **[caution: {m.caution}]**" if m.caution else "")
        for m in pinned
    ]
    return "\n".join(lines) + "\n"


def _origin(memory: MemoryOut) -> str:
    """Where a pin from the memory file comes from: edit it there, not with the tools."""
    key = memory.key or ""
    if not key.startswith("file:"):
        return ""
    return "; from the memory file" + ("" if key.startswith("file:t-") else f", {{#{key[5:]}}}")


def task_markdown(state: TaskState) -> str:
    head = state.head
    parts = [
        f"# {state.title}",
        "",
        f"- task id: `{state.task_id}`",
        f"- head: {state.head_seq}",
        f"- updated: {state.updated_at:%Y-%m-%d %H:%M:%S} UTC",
        f"- current node: {head.current_node or '(none)'}",
        "",
        "## Goal",
        "",
        state.goal,
        "",
        "## Constraints",
        "",
        *([f"- {c}" for c in state.constraints] or ["(none)"]),
        "",
        "## Tree",
        "",
        "```",
        task_tree.outline(head.tree, head.current_node),
        "```",
        "",
        "## Pending actions",
        "",
        *(
            [
                f"- {a.text}" + (" (external)" if a.external else "") + (" (irreversible)" if a.irreversible else "")
                for a in head.pending_actions
            ]
            or ["(none)"]
        ),
        "",
        "## Variables",
        "",
        "```json",
        _json(head.variables),
        "```",
        "",
        "## Last tool calls",
        "",
        "```json",
        _json([c.model_dump(mode="json") for c in head.last_tool_calls]),
        "```",
        "",
        f"## Usage\n\n{head.iterations} iterations, {head.token_usage.input} input and "
        f"{head.token_usage.output} output tokens",
        "",
        "## Snapshot",
        "",
        head.snapshot or "(empty)",
        "",
    ]
    return "\n".join(parts)


def register_resources(
    mcp: MCPServer[Any], memory: MemoryService, tasks: TaskService, stats: StatsService, scopes: ScopeResolver
) -> None:
    @mcp.resource(
        "memory://stats",
        name="stats",
        mime_type="application/json",
        description="What the server holds for you and how the process is doing",
    )
    @_as_resource_errors
    async def stats_json() -> str:
        return _json((await stats.stats(scopes.scope())).model_dump(mode="json"))

    async def pinned() -> list[MemoryOut]:
        return await memory.pinned(scopes.scope())

    @mcp.resource(
        "memory://pinned",
        name="pinned",
        mime_type="text/markdown",
        description="Pinned memories (goals, rules, identity), as Markdown",
    )
    @_as_resource_errors
    async def pinned_md() -> str:
        return pinned_markdown(await pinned())

    @mcp.resource(
        "memory://pinned.json", name="pinned-json", mime_type="application/json", description="Pinned memories, as JSON"
    )
    @_as_resource_errors
    async def pinned_json() -> str:
        return _json([m.model_dump(mode="json") for m in await pinned()])

    @mcp.resource(
        "memory://tasks",
        name="tasks",
        mime_type="application/json",
        description="Your tasks, most recently changed first (100 at most; the list_tasks tool pages on)",
    )
    @_as_resource_errors
    async def task_list() -> str:
        return _json((await tasks.list_tasks(scopes.scope(), limit=100)).model_dump(mode="json"))

    @mcp.resource(
        "memory://tasks/{task_id}",
        name="task",
        mime_type="text/markdown",
        description="A task's head: goal, constraints, tree, pending actions, variables, snapshot",
    )
    @_as_resource_errors
    async def task(task_id: str) -> str:
        return task_markdown(await tasks.state(scopes.scope(), task_id))

    @mcp.resource(
        "memory://tasks/{task_id}/checkpoints",
        name="task-checkpoints",
        mime_type="application/json",
        description="A task's checkpoints, newest first (200 at most; list_checkpoints pages on)",
    )
    @_as_resource_errors
    async def checkpoint_list(task_id: str) -> str:
        return _json((await tasks.list_checkpoints(scopes.scope(), task_id, limit=200)).model_dump(mode="json"))

    @mcp.resource(
        "memory://tasks/{task_id}/checkpoints/{checkpoint_id}",
        name="checkpoint",
        mime_type="application/json",
        description="One complete checkpoint, snapshot included",
    )
    @_as_resource_errors
    async def checkpoint(task_id: str, checkpoint_id: str) -> str:
        return _json(await tasks.read_checkpoint(scopes.scope(), task_id, checkpoint_id))


class _PrincipalBus:
    """The SDK's in-process subscription bus, with events kept inside the principal that caused them.

    A listener remembers the principal of the connection that opened it; an event is delivered
    only to listeners of the principal whose change published it. Two principals may both have a
    task called "deploy": neither learns when the other's changes.
    """

    def __init__(self, scopes: ScopeResolver) -> None:
        self._scopes = scopes
        self._inner = InMemorySubscriptionBus()
        self._publisher: ContextVar[str | None] = ContextVar("mcp_memory_publisher", default=None)
        self.owners: Counter[str] = Counter()  # principals with a listener open, and how many

    async def publish(self, event: ServerEvent) -> None:
        await self._inner.publish(event)

    async def publish_for(self, principal: str, event: ServerEvent) -> None:
        token = self._publisher.set(principal)
        try:
            await self._inner.publish(event)
        finally:
            self._publisher.reset(token)

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        owner = self._scopes.scope().principal

        def deliver(event: ServerEvent) -> None:
            publisher = self._publisher.get()
            if publisher is None or publisher == owner:
                listener(event)

        unsubscribe = self._inner.subscribe(deliver)
        self.owners[owner] += 1

        def leave() -> None:
            unsubscribe()
            self.owners[owner] -= 1
            if self.owners[owner] <= 0:
                del self.owners[owner]

        return leave


class ResourceNotifier:
    """Notifies subscribed clients of the same principal when a pin or a task head changes.

    Both protocol generations: ``subscriptions/listen`` streams (2026-07-28) through the bus, and
    ``resources/subscribe`` (earlier versions) through each subscribed session. Only changes made
    by this process are announced here at once; ``ChangeWatcher`` announces what other processes and
    the lifecycle passes changed. Stateless HTTP has no connection to notify.
    """

    def __init__(self, scopes: ScopeResolver) -> None:
        self.scopes = scopes
        self.bus = _PrincipalBus(scopes)
        self._legacy: dict[str, list[tuple[Any, str]]] = {}

    def install(self, mcp: MCPServer[Any]) -> None:
        # MCPServer serves subscriptions/listen itself; resources/subscribe needs a handler.
        lowlevel = mcp._lowlevel_server
        lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, self._subscribe)
        lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, self._unsubscribe)

    async def _subscribe(self, ctx: ServerRequestContext[Any, Any], params: SubscribeRequestParams) -> EmptyResult:
        principal = self.scopes.scope().principal
        subscribers = self._legacy.setdefault(str(params.uri), [])
        if not any(s is ctx.session and p == principal for s, p in subscribers):
            subscribers.append((ctx.session, principal))
        return EmptyResult()

    async def _unsubscribe(self, ctx: ServerRequestContext[Any, Any], params: UnsubscribeRequestParams) -> EmptyResult:
        subscribers = self._legacy.get(str(params.uri), [])
        subscribers[:] = [(s, p) for s, p in subscribers if s is not ctx.session]
        return EmptyResult()

    def watched(self) -> set[str]:
        """The principals someone in this process listens for."""
        return set(self.bus.owners) | {p for subscribers in self._legacy.values() for _, p in subscribers}

    async def changed(self, uris: list[str]) -> None:
        await self.changed_for(self.scopes.scope().principal, uris)

    async def changed_for(self, principal: str, uris: list[str]) -> None:
        for uri in uris:
            await self.bus.publish_for(principal, ResourceUpdated(uri=uri))
            alive = []
            for session, owner in self._legacy.get(uri, []):
                if owner != principal:
                    alive.append((session, owner))
                    continue
                try:
                    await session.send_resource_updated(uri)
                    alive.append((session, owner))
                except Exception as exc:  # a closed connection: drop its subscriptions
                    # the kind only: an exception's text may quote the message it failed to send
                    log.debug("dropping a subscription to %s: %s", uri, type(exc).__name__)
            if uri in self._legacy:
                self._legacy[uri] = alive


def pin_uris() -> list[str]:
    return ["memory://pinned", "memory://pinned.json"]


def task_uris(task_id: str, checkpoint: bool) -> list[str]:
    """The resources a change to the task touches, as the server hands them out (the id encoded as a
    path segment) and as written raw, for a subscriber who typed the id as it is."""
    uris = ["memory://tasks"]
    for head in dict.fromkeys([task_uri(task_id), task_uri(task_id, encoded=False)]):
        uris.append(head)
        if checkpoint:
            uris.append(f"{head}/checkpoints")
    return uris


@dataclass(frozen=True)
class _Seen:
    mark: int  # the change log's last entry
    pinned: tuple[tuple[str, str], ...]  # (id, text) of each pinned memory
    heads: dict[str, int]  # task id -> head sequence number


class ChangeWatcher:
    """Announces to this process's subscribers what changed in the store from elsewhere: another
    process on the same data directory, or a lifecycle pass (``mcp-memory maintain``). Every
    ``interval`` seconds, for each principal someone here listens for, it compares the change log's
    mark and the task heads with what it saw last, and the pinned memories when the mark moved
    (every write to a memory, a pin included, moves it)."""

    def __init__(
        self, notifier: ResourceNotifier, memory: MemoryService, tasks: TaskService, interval: float = 1.0
    ) -> None:
        self.notifier = notifier
        self.memory = memory
        self.tasks = tasks
        self.interval = interval
        self._seen: dict[str, _Seen] = {}

    async def run(self, stop: anyio.Event) -> None:
        while not stop.is_set():
            with anyio.move_on_after(self.interval):
                await stop.wait()
            for principal in sorted(self.notifier.watched()):
                try:
                    await self.look(principal)
                except Exception as exc:  # the next round looks again
                    log.warning("watching %s's changes failed: %s", principal, exc)
            for gone in set(self._seen) - self.notifier.watched():
                del self._seen[gone]

    async def look(self, principal: str) -> None:
        """Compare ``principal``'s store with the last look and announce what moved."""
        scope = Scope(principal)
        before = self._seen.get(principal)
        mark = await self.memory.change_mark(scope)
        if before is not None and mark == before.mark:
            pinned = before.pinned
        else:
            pinned = tuple((m.id, m.text) for m in await self.memory.pinned(scope))
        now = _Seen(mark, pinned, await self.tasks.heads(scope))
        self._seen[principal] = now
        if before is None:
            return
        uris: list[str] = []
        if now.mark != before.mark:
            uris.append("memory://stats")
        if now.pinned != before.pinned:
            uris.extend(pin_uris())
        for task_id in sorted(set(now.heads) | set(before.heads)):
            if now.heads.get(task_id) != before.heads.get(task_id):
                uris.extend(task_uris(task_id, checkpoint=True))
        if uris:
            await self.notifier.changed_for(principal, list(dict.fromkeys(uris)))

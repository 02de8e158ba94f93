"""Resource subscriptions: who listens for which resource, and the notices a change sends them.

``ResourceNotifier`` tells the subscribers of the caller's principal at once what a call of this
process changed; ``ChangeWatcher`` tells them what other processes and the lifecycle passes changed.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Hashable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import anyio
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.subscriptions import InMemorySubscriptionBus
from mcp.shared.subscriptions import ResourceUpdated, ServerEvent
from mcp_types import EmptyResult, SubscribeRequestParams, UnsubscribeRequestParams

from mcp_memory.core.models import Scope
from mcp_memory.core.text import task_uri
from mcp_memory.scope import ScopeResolver
from mcp_memory.services.memory import MemoryService
from mcp_memory.services.tasks import TaskService

log = logging.getLogger(__name__)


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
    rest: Hashable | None = None  # the store described without opening it, when it was at rest


class ChangeWatcher:
    """Announces to this process's subscribers what changed in the store from elsewhere: another
    process on the same data directory, or a lifecycle pass (``mcp-memory maintain``). Every
    ``interval`` seconds, for each principal someone here listens for, it compares the change log's
    mark and the task heads with what it saw last, and the pinned memories when the mark moved
    (every write to a memory, a pin included, moves it). A principal whose files have not moved
    since the last look is not opened: a crowd of idle subscribers keeps no file open (ADR 21).
    ``clock`` is the wall clock the files' times are compared with."""

    def __init__(
        self,
        notifier: ResourceNotifier,
        memory: MemoryService,
        tasks: TaskService,
        at_rest: Callable[[Scope, float], Hashable | None],
        interval: float = 1.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.notifier = notifier
        self.memory = memory
        self.tasks = tasks
        self.at_rest = at_rest  # the backend's description of a principal's files, None when not at rest
        self.interval = interval
        self.clock = clock
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
        rest = self.at_rest(scope, self.clock())  # taken before the reads it vouches for
        if before is not None and rest is not None and rest == before.rest:
            return
        mark = await self.memory.change_mark(scope)
        if before is not None and mark == before.mark:
            pinned = before.pinned
        else:
            pinned = tuple((m.id, m.content) for m in await self.memory.pinned(scope))
        now = _Seen(mark, pinned, await self.tasks.heads(scope), rest)
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

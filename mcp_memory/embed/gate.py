"""Who runs on the model's engines, and when.

One engine embeds one call at a time. Engine 0 embeds passages; a twin (a second instance of the
same model) is kept for questions, so a recall never waits behind someone's batch of long
memories. Calls that wait for an engine at the same time and are small (questions, a memory or
two) run as one model call: the answer is bit-identical to embedding each alone, and the engine
stays busy with model work instead of handing itself from caller to caller.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

if TYPE_CHECKING:
    from mcp_memory.core.models import Vector


# A passage call of at most this many tokens (a memory or two, about 40 ms of e5) may run on a
# question's engine while no question waits: questions wait at most that long for it.
SHORT_CALL_TOKENS = 64
# One passage call holds an engine: calls are cut to about this many tokens so a large
# `remember` cannot keep every other request waiting for seconds.
TOKENS_PER_CALL = 512


@dataclass(eq=False)
class _Waiter:
    short: bool = False
    event: anyio.Event = field(default_factory=anyio.Event)
    engine: int | None = None


class ModelGate:
    """The model's engines, handed out fairly. Engine 0 embeds passages; the others (twins) embed
    questions, and a short passage call (SHORT_CALL_TOKENS) when no question waits, so a question
    waits at most one short call for a twin. A waiting question takes the first engine that frees,
    except that engine 0 serves waiting passage calls first once a twin exists. Passage calls take
    turns by owner (the principal), so one principal's batch of long memories holds an engine for
    one call at a time and never starves another's recall."""

    def __init__(self, engines: int = 1) -> None:
        self._engines = engines
        self._free = set(range(engines))
        self._queries: deque[_Waiter] = deque()
        self._passages: dict[str, deque[_Waiter]] = {}  # in turn order: served owners go last
        self._last_owner: str | None = None

    @property
    def engines(self) -> int:
        return self._engines

    def add_engine(self) -> None:
        """One more query engine (a twin that finished loading): index ``engines`` before the call."""
        self._engines += 1
        self._hand_on(self._engines - 1)

    @asynccontextmanager
    async def turn(self, owner: str | None, short: bool = False) -> AsyncIterator[int]:
        """Hold an engine for one call and yield its index; ``owner`` None is a query, ``short`` a
        passage call a twin may take."""
        engine = self._take(owner, short)
        if engine is None:
            waiter = _Waiter(short)
            queue = self._queries if owner is None else self._passages.setdefault(owner, deque())
            queue.append(waiter)
            try:
                await waiter.event.wait()
            except BaseException:
                if waiter.engine is not None:  # handed an engine just as the wait was cancelled: pass it on
                    self._hand_on(waiter.engine)
                else:
                    queue.remove(waiter)
                raise
            engine = waiter.engine
            assert engine is not None
        if owner is not None:
            self._last_owner = owner
        try:
            yield engine
        finally:
            self._hand_on(engine)

    def _take(self, owner: str | None, short: bool) -> int | None:
        # A question takes the highest free engine: a twin before engine 0, which memories need.
        engine = max(self._free, default=None) if owner is None else 0 if 0 in self._free else None
        if engine is None and short:
            engine = max(self._free, default=None)
        if engine is not None:
            self._free.remove(engine)
        return engine

    def _hand_on(self, engine: int) -> None:
        waiter = self._next_waiter(engine)
        if waiter is None:
            self._free.add(engine)
            return
        waiter.engine = engine
        waiter.event.set()

    def _next_waiter(self, engine: int) -> _Waiter | None:
        # Questions go first, except that engine 0 serves waiting memories first once questions
        # have an engine of their own: the twin is never more than one short call from free.
        passages_first = engine == 0 and self._engines > 1 and any(self._passages.values())
        if self._queries and not passages_first:
            return self._queries.popleft()
        owners = [o for o, waiting in self._passages.items() if waiting and (engine == 0 or waiting[0].short)]
        if not owners:
            if not any(self._passages.values()):
                self._passages.clear()
            return None
        # The owner who had the last turn waits behind every other owner.
        owner = next((o for o in owners if o != self._last_owner), owners[0])
        waiting = self._passages.pop(owner)
        first = waiting.popleft()
        if waiting:
            self._passages[owner] = waiting
        return first


@dataclass(frozen=True)
class Lane:
    """Calls that may share one model call, and how large the shared call may grow."""

    name: str
    owner: str | None  # whom the gate serves the shared call as (None: a question)
    max_texts: int
    max_tokens: int


# Questions that arrive while every engine is busy: a call of 16 short questions costs e5 about
# what 16 calls cost, minus the hand-overs between them.
QUESTIONS = Lane("questions", owner=None, max_texts=16, max_tokens=16 * 512)
# Short passage calls (one memory each, mostly) from every principal take one turn together.
SHORT_PASSAGES = Lane("short passages", owner="\x00short", max_texts=32, max_tokens=TOKENS_PER_CALL)


@dataclass(eq=False)
class _Shared:
    texts: list[str]
    tokens: int
    done: anyio.Event = field(default_factory=anyio.Event)
    vectors: Vector | None = None
    error: Exception | None = None


class SharedCalls:
    """Small calls that wait for an engine together and run as one model call."""

    def __init__(self, gate: ModelGate) -> None:
        self._gate = gate
        self._open: dict[str, _Shared] = {}  # by lane: the call still taking passengers

    async def run(self, lane: Lane, texts: list[str], tokens: int, embed: Callable[[int, list[str]], Vector]) -> Vector:
        """The vectors of ``texts`` (``tokens`` long), from one ``embed(engine, texts)`` call on a
        worker thread, shared with the calls of ``lane`` that wait beside this one."""
        shared = self._open.get(lane.name)
        if (
            shared is not None
            and len(shared.texts) + len(texts) <= lane.max_texts
            and shared.tokens + tokens <= lane.max_tokens
        ):
            start = len(shared.texts)
            shared.texts.extend(texts)
            shared.tokens += tokens
            await shared.done.wait()
            if shared.error is not None:
                raise shared.error
            if shared.vectors is None:  # the caller who was to run it went away: run again
                return await self.run(lane, texts, tokens, embed)
            rows: Vector = shared.vectors[start : start + len(texts)]
            return rows
        shared = self._open[lane.name] = _Shared(list(texts), tokens)
        try:
            async with self._gate.turn(lane.owner, short=True) as engine:
                self._close(lane, shared)  # later calls start the next one
                shared.vectors = await anyio.to_thread.run_sync(embed, engine, shared.texts)
        except Exception as exc:
            shared.error = exc
            raise
        finally:
            self._close(lane, shared)
            shared.done.set()
        own: Vector = shared.vectors[: len(texts)]
        return own

    def _close(self, lane: Lane, shared: _Shared) -> None:
        if self._open.get(lane.name) is shared:
            del self._open[lane.name]

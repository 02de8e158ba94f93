"""One behaviour suite for every storage backend, run through the services as the tools use them.

Each test takes ``backend`` as a parameter: SQLite with its exact vector index, SQLite with the
Qdrant engine in qdrant-client's local mode, PostgreSQL (a throwaway cluster, a fresh database per
test; ADR 19, ADR 20), and PostgreSQL with Qdrant, added without touching ``services/``. "Another process" is a second
runtime on the same data: its own store, connections and vector index, as a second server process
has (on PostgreSQL with a data directory of its own, as a replica on another machine). Local mode
holds its folder for one process, so each runtime of "sqlite+qdrant" and "postgres+qdrant" has a
Qdrant of its own in memory: a second runtime finds its points behind the record store and brings them up from the
change log (ADR 18).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import psycopg
import pytest
from mcp.client import Client

from mcp_memory.config import Settings, load_settings
from mcp_memory.core.errors import ConflictError, InvalidInputError, NotFoundError, StaleHeadError
from mcp_memory.core.ids import new_id
from mcp_memory.core.models import Criteria, MemoryDraft, NewMemory, NewOccurrence, Provenance, Scope
from mcp_memory.core.text import segment_for_index
from mcp_memory.mcp.recall_schemas import Hit, MemoryOut
from mcp_memory.mcp.server import Server, open_server
from mcp_memory.mcp.wire_recall import recall_result
from mcp_memory.mcp.wire_tasks import resume_packet
from mcp_memory.services import inputs
from mcp_memory.services.erasure import ErasureService
from mcp_memory.services.intake import content_hash
from mcp_memory.services.memory import CallContext
from mcp_memory.services.question import ANSWERS
from mcp_memory.storage.pg import migrations
from tests import pgcluster
from tests.conftest import MODES, Clock, subscribed

pytestmark = pytest.mark.anyio

BACKENDS = ["sqlite", "sqlite+qdrant", "postgres", "postgres+qdrant"]
ALICE = Scope("alice")
BOB = Scope("bob")


def backend_settings(backend: str, data_dir: Path, dsn: str | None = None) -> Settings:
    """The configuration that serves ``backend`` on ``data_dir`` (and PostgreSQL at ``dsn``)."""
    records, _, engine = backend.partition("+")
    given: dict[str, Any] = {"data_dir": data_dir, "principal": "alice"}
    if engine == "qdrant":
        given["vectors"] = {"engine": "qdrant", "qdrant": {"path": ":memory:"}}
    elif engine:
        raise AssertionError(f"no settings for vector engine {engine!r}")
    if records == "postgres":  # nothing of what replicas share is kept in the data directory (ADR 19)
        given["storage"] = {"backend": "postgres", "postgres": {"dsn": dsn}}
    elif records != "sqlite":
        raise AssertionError(f"no settings for backend {backend!r}")
    return load_settings(**given)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def open_backend(
    backend: str, data_dir: Path, clock: Clock, request: pytest.FixtureRequest
) -> Callable[[], AbstractAsyncContextManager[Server]]:
    """Opens a runtime (a server process's worth of state) on the backend; call it twice for two.
    On SQLite both share the data directory; PostgreSQL's replicas each have their own, as on two
    machines."""
    if not backend.startswith("postgres"):
        return lambda: open_server(backend_settings(backend, data_dir), clock=clock)
    cluster: pgcluster.Cluster = request.getfixturevalue("pg_empty")
    anyio.run(_migrate, cluster)
    replicas = itertools.count()
    return lambda: open_server(
        backend_settings(backend, data_dir / f"replica-{next(replicas)}", cluster.dsn()), clock=clock
    )


async def _migrate(cluster: pgcluster.Cluster) -> None:
    async with await psycopg.AsyncConnection.connect(cluster.dsn(pgcluster.OWNER), autocommit=True) as owner:
        await migrations.migrate(owner, pgcluster.SERVER)


@pytest.fixture
async def rt(open_backend: Callable[[], AbstractAsyncContextManager[Server]]) -> AsyncIterator[Server]:
    async with open_backend() as runtime:
        yield runtime


async def remember(rt: Server, scope: Scope, *texts: str) -> list[str]:
    result = await rt.memory.remember(scope, [MemoryDraft(content=t) for t in texts], CallContext())
    return [item.id for item in result.items if item.id]


async def texts(rt: Server, scope: Scope, query: str) -> list[str]:
    result = recall_result(await rt.memory.recall(scope, query, reinforce=False))
    return [hit.text for hit in result.hits if isinstance(hit, Hit | MemoryOut)]


async def test_what_is_remembered_is_recalled_and_forgetting_removes_it(rt: Server) -> None:
    [tea] = await remember(rt, ALICE, "The user drinks oolong tea without sugar")
    await remember(rt, ALICE, "The user lives in Berlin", "The user uses vim keybindings")
    assert (await texts(rt, ALICE, "what does the user drink?"))[0] == "The user drinks oolong tea without sugar"
    await rt.memory.forget(ALICE, ids=[tea], dry_run=False)
    assert "The user drinks oolong tea without sugar" not in await texts(rt, ALICE, "what does the user drink?")
    with pytest.raises(NotFoundError):
        await rt.memory.forget(ALICE, ids=[tea], dry_run=False)


async def test_no_principal_reads_or_forgets_another_principals_memory(rt: Server) -> None:
    [secret] = await remember(rt, ALICE, "Alice's locker code is kept in the blue notebook")
    await remember(rt, BOB, "Bob parks on level three")
    assert await texts(rt, BOB, "where is the locker code kept?") == ["Bob parks on level three"]
    with pytest.raises(NotFoundError):
        await rt.memory.forget(BOB, ids=[secret], dry_run=False)
    assert "Alice's locker code is kept in the blue notebook" in await texts(rt, ALICE, "locker code")


async def test_a_namespace_sees_its_own_and_principal_wide_memories_only(rt: Server) -> None:
    await remember(rt, Scope("alice", "work"), "The staging cluster is called falcon")
    await remember(rt, Scope("alice", "home"), "The home router is called falcon too")
    await remember(rt, ALICE, "Falcon is the user's favourite bird")
    seen = await texts(rt, Scope("alice", "work"), "what is called falcon?")
    assert "The staging cluster is called falcon" in seen
    assert "Falcon is the user's favourite bird" in seen
    assert "The home router is called falcon too" not in seen


async def test_keyword_search_finds_a_namespaces_match_under_anothers_stronger_ones(rt: Server, clock: Clock) -> None:
    # Ten memories of another namespace outscore the one match this namespace holds; the keyword
    # side must still find it, and never theirs (SQLite ranks the index first and filters after).
    work = [f"Kestrel build {i}: kestrel runner, kestrel cache, kestrel logs" for i in range(10)]
    await remember(rt, Scope("alice", "work"), *work)
    [printer] = await remember(rt, Scope("alice", "home"), "The home printer is named kestrel")
    found = await rt.store.keyword_search(Scope("alice", "home"), ["kestrel"], Criteria(), 2, clock())
    assert [m for m, _ in found] == [printer]
    assert len(await rt.store.keyword_search(Scope("alice", "work"), ["kestrel"], Criteria(), 2, clock())) == 2


async def test_forget_user_erases_one_principal_and_leaves_the_other(rt: Server, clock: Clock) -> None:
    await remember(rt, ALICE, "Alice prefers window seats")
    await remember(rt, BOB, "Bob prefers aisle seats")
    await rt.tasks.checkpoint(ALICE, "trip", changes={"current_node": None}, goal="Book the trip")
    erasure = ErasureService(rt.store, clock=clock)
    code = (await erasure.forget_user(ALICE)).confirmation_code
    assert code is not None
    done = await erasure.forget_user(ALICE, code)
    assert not done.dry_run
    assert await texts(rt, ALICE, "which seats?") == []
    with pytest.raises(NotFoundError):
        await rt.tasks.state(ALICE, "trip")
    assert await texts(rt, BOB, "which seats?") == ["Bob prefers aisle seats"]


async def test_a_task_resumes_where_it_was_checkpointed_and_a_stale_head_is_refused(rt: Server) -> None:
    first = await rt.tasks.checkpoint(
        ALICE, "migrate", changes={"variables": {"done": 3}, "snapshot": "step three of nine"}, goal="Migrate billing"
    )
    assert first.created_task
    packet = resume_packet(await rt.tasks.resume(ALICE, "migrate"))
    assert packet.variables == {"done": 3}
    assert packet.snapshot_excerpt == "step three of nine"
    with pytest.raises(StaleHeadError):
        await rt.tasks.checkpoint(ALICE, "migrate", changes={"variables": {"done": 4}}, expected_head=0)
    await rt.tasks.checkpoint(Scope("alice", "home"), "chores", changes={}, goal="Chores", in_namespace=True)
    with pytest.raises(ConflictError):  # another namespace's task id is not taken over
        await rt.tasks.checkpoint(Scope("alice", "work"), "chores", changes={}, goal="Work", in_namespace=True)


@pytest.mark.model_independent  # the fallback embedder's pass leaves it out
async def test_one_process_at_a_time_holds_a_pass_lease(
    open_backend: Callable[[], AbstractAsyncContextManager[Server]],
) -> None:
    async with open_backend() as one, open_backend() as two:
        first, second = one.scheduler.control, two.scheduler.control
        assert await first.acquire("decay", "process-one", 1_000.0, 60)
        assert not await second.acquire("decay", "process-two", 1_010.0, 60)
        assert await second.acquire("decay", "process-two", 1_061.0, 60)  # the lease ran out
        await second.release("decay", "process-two")
        assert await first.acquire("decay", "process-one", 1_062.0, 60)


async def test_another_process_sees_a_write_and_a_forget_at_its_next_read(
    open_backend: Callable[[], AbstractAsyncContextManager[Server]],
) -> None:
    async with open_backend() as one, open_backend() as two:
        await remember(two, ALICE, "Warm-up memory so both processes hold an index")
        assert await texts(one, ALICE, "warm-up") == ["Warm-up memory so both processes hold an index"]
        [fresh] = await remember(two, ALICE, "The deploy freeze starts on Friday at noon")
        assert "The deploy freeze starts on Friday at noon" in await texts(one, ALICE, "when does the freeze start?")
        await two.memory.forget(ALICE, ids=[fresh], dry_run=False)
        assert "The deploy freeze starts on Friday at noon" not in await texts(one, ALICE, "deploy freeze")


@pytest.mark.model_independent  # the fallback embedder's pass leaves it out
async def test_a_pin_and_a_checkpoint_through_one_process_reach_a_subscriber_of_the_other(
    open_backend: Callable[[], AbstractAsyncContextManager[Server]],
) -> None:
    async with open_backend() as one, open_backend() as two:
        [kept] = await remember(one, ALICE, "Use metric units")
        uris = ["memory://pinned", "memory://tasks/trip"]
        opened = functools.partial(Client, two.mcp, mode=MODES[-1])
        async with subscribed(lambda handler: opened(message_handler=handler), MODES[-1], uris) as (_, heard):
            await two.watcher.look("alice")  # what the second process knows before the first one writes
            await one.memory.pin(ALICE, kept, True)
            await heard.wait_for("memory://pinned")
            await one.tasks.checkpoint(ALICE, "trip", changes={"current_node": None}, goal="Book the trip")
            await heard.wait_for("memory://tasks/trip")


@pytest.mark.model_independent  # the fallback embedder's pass leaves it out
async def test_forget_user_confirmed_through_another_process_than_the_dry_run(
    open_backend: Callable[[], AbstractAsyncContextManager[Server]],
) -> None:
    async with open_backend() as one, open_backend() as two:
        await remember(one, ALICE, "Alice prefers window seats")
        code = (await one.erasure.forget_user(ALICE)).confirmation_code
        assert code is not None
        assert not (await two.erasure.forget_user(ALICE, code)).dry_run
        with pytest.raises(InvalidInputError, match="used or expired"):
            await one.erasure.forget_user(ALICE, code)
        assert await texts(one, ALICE, "which seats?") == []


async def test_two_processes_storing_one_text_at_once_store_it_once(
    open_backend: Callable[[], AbstractAsyncContextManager[Server]],
) -> None:
    text = "The on-call rotation changes every Monday at nine"
    async with open_backend() as one, open_backend() as two:
        ids: list[list[str]] = []

        async def store(runtime: Server) -> None:
            ids.append(await remember(runtime, ALICE, text))

        async with anyio.create_task_group() as group:
            group.start_soon(store, one)
            group.start_soon(store, two)
        assert len({i for found in ids for i in found}) == 1
        assert await texts(one, ALICE, "on-call rotation") == [text]


def _stored(text: str, importance: float, at: float, dim: int) -> NewMemory:
    """A memory row as remember builds it, with a made-up unit vector (no model call)."""
    vector = np.random.default_rng(len(text) + int(1000 * importance)).normal(size=dim).astype(np.float32)
    item = MemoryDraft(content=text, kind="fact", importance=importance)
    record = inputs.new_record(ALICE, item, text, content_hash(None, text), at, at, None, Provenance())
    occurrence = NewOccurrence(new_id(), None, at, {}, Provenance())
    return NewMemory(record, vector / np.linalg.norm(vector), segment_for_index(text), occurrence)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])  # the record stores' reads: no engine takes part
async def test_a_read_of_more_memories_than_one_query_names_returns_them_all_in_order(rt: Server) -> None:
    dim = (await rt.embedder.ready()).dim
    await rt.store.check_model(ALICE, (await rt.embedder.ready()).model_id, dim)
    rows = [_stored(f"Ticket OPS-{i} was closed", (i % 7) / 10, 1_000.0 + i, dim) for i in range(634)]
    await rt.store.apply(ALICE, rows, [])
    wanted = [*(row.record.id for row in rows[:33:-1]), "not-a-stored-id"]  # 600 stored and one not: two IN lists
    got = await rt.store.select_memories(ALICE, Criteria(), 5_000.0, among=wanted, order="importance")
    assert {r.id for r in got} == set(wanted[:600])
    assert [r.id for r in got] == [
        r.record.id for r in sorted(rows[34:], key=lambda r: -r.record.importance)
    ]  # most important first, ties in the order they were written
    limited = await rt.store.select_memories(ALICE, Criteria(), 5_000.0, among=wanted, order="occurred", limit=3)
    assert [r.id for r in limited] == [row.record.id for row in rows[34:37]]


async def test_a_dialogs_reply_takes_the_evidence_of_the_turn_asking_the_question(rt: Server) -> None:
    """The store's replies (the next memory of a session) read alike on every backend (issue 37, item 4)."""
    turns = [
        "Caroline: Hey Mel! I had a busy week at the library.",
        "Melanie: Sounds great! What kind of counseling and mental health services do you want to pursue?",
        "Caroline: Working with trans people, mostly. Helping them accept who they are.",
        "Melanie: The kids and I painted a sunset over the lake on Sunday.",
        "Caroline: I finally adopted a puppy from the shelter.",
        "Melanie: We went camping with the whole family last month.",
    ]
    items = [MemoryDraft(content=t, session_id="conv-1") for t in turns]
    await rt.memory.remember(ALICE, items, CallContext())
    result = recall_result(
        await rt.memory.recall(ALICE, "What counseling services is Caroline interested in?", reinforce=False)
    )
    first = result.hits[0]
    assert isinstance(first, Hit)
    assert first.text == turns[2]
    assert ANSWERS in first.why


async def test_a_recalled_memory_carries_its_occurrences_and_the_conflict_that_stands(rt: Server, clock: Clock) -> None:
    """What a record carries besides its row (``rows.attach_occurrences``), read on PostgreSQL in the
    same round trip as the candidates' rows, belongs to the memory it was read for."""

    async def said(text: str) -> str:
        result = await rt.memory.remember(ALICE, [MemoryDraft(content=text, kind="preference")], CallContext())
        clock.advance(3600)
        return str(result.items[0].id)

    cats, dogs = await said("Alice likes cats"), await said("Alice likes dogs")
    assert await said("Alice likes cats") == cats  # merged: a second occurrence
    found = await rt.memory.recall(ALICE, "which pets does Alice like", reinforce=False)
    records = {hit.record.id: hit.record for hit in found.hits}
    assert (records[cats].conflicts_with, records[dogs].conflicts_with) == ([dogs], [cats])
    assert (len(records[cats].occurrence_ids), len(records[dogs].occurrence_ids)) == (2, 1)

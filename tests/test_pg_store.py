"""PostgresStore under the unchanged services (ADR 19, ADR 20): remember, recall, forget and
forget_user through MemoryService and ErasureService with the real embedding model, on a throwaway
cluster; two stores stand for two replicas on one database."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import pytest

from mcp_memory.compose import embedder_config, second_opinion_config
from mcp_memory.config import PostgresSettings, Settings, load_settings
from mcp_memory.core.models import Criteria, MemoryDraft, Scope
from mcp_memory.embed.loader import Embedder
from mcp_memory.mcp.recall_schemas import Hit, MemoryOut
from mcp_memory.mcp.wire_recall import hit_tokens, recall_result
from mcp_memory.services.erasure import ErasureService
from mcp_memory.services.memory import CallContext, MemoryService
from mcp_memory.services.sessions import SessionTracker
from mcp_memory.storage.pg.store import PostgresStore
from mcp_memory.storage.switch import SwitchFile
from tests import pgcluster

pytestmark = pytest.mark.anyio

ALICE, BOB = Scope("alice"), Scope("bob")
CANARY = "canary-5e1b-the-locker-code-is-8812"

Opener = Callable[[], AbstractAsyncContextManager[tuple[PostgresStore, MemoryService]]]


@pytest.fixture
async def embedder() -> Embedder:
    settings = load_settings()
    found = Embedder(embedder_config(settings), second=second_opinion_config(settings))
    found.start()
    await found.ready()
    return found


@pytest.fixture
def replica(pg_empty: pgcluster.Cluster, embedder: Embedder, tmp_path: Path) -> Opener:
    """Opens a replica: a PostgresStore and a MemoryService over it, as a server process has."""
    settings: Settings = load_settings(data_dir=tmp_path / "control")

    @asynccontextmanager
    async def opened() -> AsyncIterator[tuple[PostgresStore, MemoryService]]:
        async with PostgresStore(PostgresSettings(dsn=pg_empty.dsn(), pool_max=4)) as store:
            switch = SwitchFile(settings.data_dir, settings.busy_timeout_ms)
            try:
                yield (
                    store,
                    MemoryService(
                        store,
                        embedder,
                        settings.limits,
                        settings.recall,
                        SessionTracker(1800),
                        hit_tokens,
                        switch=switch,
                    ),
                )
            finally:
                switch.close()

    return opened


async def _remember(memory: MemoryService, scope: Scope, *texts: str) -> list[str]:
    result = await memory.remember(scope, [MemoryDraft(content=t) for t in texts], CallContext())
    return [item.id for item in result.items if item.id]


async def _texts(memory: MemoryService, scope: Scope, query: str) -> list[str]:
    result = recall_result(await memory.recall(scope, query, reinforce=False))
    return [hit.text for hit in result.hits if isinstance(hit, Hit | MemoryOut)]


async def test_remember_recall_and_forget_through_the_services(migrated: pgcluster.Cluster, replica: Opener) -> None:
    async with replica() as (store, memory):
        ids = await _remember(
            memory,
            ALICE,
            "The user uses vim keybindings in every editor",
            "The user lives in Berlin",
            "用户喜欢喝乌龙茶，不加糖",
            "Invoice INV-767 was paid on March 2",
        )
        assert len(ids) == 4
        assert (await _texts(memory, ALICE, "What does the user like to drink?"))[0] == "用户喜欢喝乌龙茶，不加糖"
        assert (await _texts(memory, ALICE, "INV-767"))[0] == "Invoice INV-767 was paid on March 2"
        assert await _texts(memory, BOB, "Where does the user live?") == []
        again = await memory.remember(ALICE, [MemoryDraft(content="The user lives in Berlin")], CallContext())
        assert again.items[0].outcome == "merged"
        recalled = recall_result(await memory.recall(ALICE, "vim keybindings"))  # reinforces what it returns
        first = recalled.hits[0]
        assert isinstance(first, Hit)
        shown = await store.select_memories(ALICE, Criteria(ids=(first.id,)), time.time())
        assert shown[0].access_count == 1  # waiting in memory, shown already
        await store.flush_reinforcement()
        async with replica() as (other, _):  # another replica reads it from the database
            written = await other.select_memories(ALICE, Criteria(ids=(first.id,)), time.time())
            assert written[0].access_count == 1
        forgotten = await memory.forget(ALICE, ids=[ids[1]], dry_run=False)
        assert forgotten.deleted == 1
        assert "The user lives in Berlin" not in await _texts(memory, ALICE, "Where does the user live?")


async def test_a_second_replica_sees_a_write_and_a_forget_at_its_next_read(
    migrated: pgcluster.Cluster, replica: Opener
) -> None:
    async with replica() as (first_store, first), replica() as (second_store, second):
        await _remember(first, ALICE, "Project Falcon ships on Friday")
        assert await _texts(second, ALICE, "When does Falcon ship?") == ["Project Falcon ships on Friday"]
        ids = await _remember(first, ALICE, "The staging database is on host db-7")
        assert (await _texts(second, ALICE, "Which host runs the staging database?"))[0].endswith("db-7")
        await first.forget(ALICE, ids=ids, dry_run=False)
        assert "The staging database is on host db-7" not in await _texts(second, ALICE, "staging database host")
        # a pass prunes the log past what the second replica read: it reads its index again
        later = await _remember(first, ALICE, "The release train leaves on Tuesdays")
        assert "The release train leaves on Tuesdays" in await _texts(second, ALICE, "release train")
        await first.forget(ALICE, ids=later, dry_run=False)
        assert await first_store.lifecycle.prune_changes(ALICE, 0) > 0
        await _texts(second, ALICE, "release train")
        assert second_store.vectors.size(ALICE) == (await first_store.count(ALICE))["memories"] == 1


async def test_forget_user_leaves_no_text_in_the_cluster_files_and_the_other_principal_whole(
    migrated: pgcluster.Cluster, replica: Opener
) -> None:
    async with replica() as (store, memory), replica() as (_, other):
        await _remember(memory, ALICE, f"Alice's note: {CANARY}", "Alice prefers window seats")
        await _remember(memory, BOB, "Bob prefers aisle seats")
        assert await _texts(other, ALICE, "window seats")  # the other replica holds Alice's index
        pgcluster.psql(migrated, "CHECKPOINT")
        assert _holding(migrated.data / "base", CANARY), "the canary reached the table files"
        erasure = ErasureService(store)
        dry = await erasure.forget_user(ALICE)
        assert dry.confirmation_code is not None
        done = await erasure.forget_user(ALICE, dry.confirmation_code)
        assert done.counts["memories"] == 2
        assert "write-ahead log keeps what was written until its segments are recycled" in done.leaves
        pgcluster.psql(migrated, "CHECKPOINT")
        assert _holding(migrated.data / "base", CANARY) == []  # WAL (pg_wal) keeps it until recycled
        assert _holding(migrated.data / "pg_wal", CANARY), "the receipt's caveat is no longer true: reword it"
        assert await _texts(other, ALICE, "window seats") == []  # a new epoch: the replica read again
        assert await _texts(memory, BOB, "aisle seats") == ["Bob prefers aisle seats"]
        await _remember(memory, ALICE, "Alice is back")
        assert await _texts(other, ALICE, "Who is back?") == ["Alice is back"]


def _holding(folder: Path, text: str) -> list[Path]:
    needle = text.encode()
    return [p for p in folder.rglob("*") if p.is_file() and needle in p.read_bytes()]


async def test_export_lists_memories_in_the_order_they_were_written(
    migrated: pgcluster.Cluster, replica: Opener
) -> None:
    """An import replays the export in order: a keyed memory's old version read after its new one
    would supersede it (PostgreSQL returns rows in page order, and an update moves a row)."""
    async with replica() as (store, memory):
        for room in ("B2", "C4"):
            item = MemoryDraft(content=f"The standup room is {room}", key="standup-room")
            await memory.remember(ALICE, [item], CallContext())
        pgcluster.psql(
            migrated, f"ANALYZE memories_{store.database.key('alice')}", user=pgcluster.OWNER
        )  # as autovacuum
        rows = await store.export_rows(ALICE)
        assert [r.content for r in rows] == ["The standup room is B2", "The standup room is C4"]
        assert [r.written for r in rows] == sorted(r.written for r in rows)


@pytest.mark.pg_variant("plain")  # the in-process engine's indexes: pgvector holds none in the process
async def test_vector_indexes_stay_within_the_budget_and_come_back_when_asked(
    migrated: pgcluster.Cluster, embedder: Embedder, replica: Opener
) -> None:
    async with replica() as (_, memory):
        await _remember(memory, ALICE, "Alice keeps her bike in the basement")
        await _remember(memory, BOB, "Bob keeps his bike at work")
    dim = (await embedder.ready()).dim
    async with PostgresStore(PostgresSettings(dsn=migrated.dsn()), index_budget_bytes=1) as store:
        await store.vectors.sync(ALICE, dim)
        assert store.vectors.size(ALICE) == 1
        await store.vectors.sync(BOB, dim)  # over the budget: Alice's index goes, Bob's (in use) stays
        assert (store.vectors.size(ALICE), store.vectors.size(BOB)) == (None, 1)
        assert store.pool_figures()["evicted_indexes"] == 1
        await store.vectors.sync(ALICE, dim)  # read again at its next search
        assert store.vectors.size(ALICE) == 1

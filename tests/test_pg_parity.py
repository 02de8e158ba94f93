"""The storage code SQLite runs, run on PostgreSQL too (ADR 20), and what each read answers,
compared side by side: one store of memories written through both, then the counts, pages,
lifecycle candidates, golden-query rows, links and lookups that the services ask for."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, cast

import numpy as np
import psycopg
import pytest

from mcp_memory.config import PostgresSettings
from mcp_memory.core.ids import new_id
from mcp_memory.core.models import (
    Criteria,
    GoldenCheckRow,
    GoldenRow,
    MemoryDraft,
    NewMemory,
    NewOccurrence,
    Provenance,
    Scope,
)
from mcp_memory.core.text import segment_for_index
from mcp_memory.services import inputs
from mcp_memory.services.intake import content_hash
from mcp_memory.storage import links, rows, writes
from mcp_memory.storage.browse import BrowseStore
from mcp_memory.storage.counts import CountStore
from mcp_memory.storage.golden import GoldenStore
from mcp_memory.storage.lifecycle import LifecycleStore
from mcp_memory.storage.pg import migrations
from mcp_memory.storage.pg.store import PostgresStore
from mcp_memory.storage.sqlite import SqliteStore
from tests import pgcluster

pytestmark = pytest.mark.anyio

ALICE = Scope("alice")
NOW = 1_800_000_000.0
DAY = 86_400.0


def _memory(text: str, **fields: Any) -> NewMemory:
    at = fields.pop("at", NOW - 3 * DAY)
    supersedes = fields.pop("supersedes", ())
    vector = np.random.default_rng(len(text)).normal(size=8).astype(np.float32)
    item = MemoryDraft(content=text, **fields)
    record = inputs.new_record(ALICE, item, text, content_hash(None, text), at, at, None, Provenance())
    record.session_key = "s1"
    occurrence = NewOccurrence(new_id(), "s1", at, {}, Provenance())
    return NewMemory(record, vector, segment_for_index(text), occurrence, supersedes=supersedes)


def _history() -> list[list[NewMemory]]:
    """The writes, in order: each list is one transaction."""
    tea = _memory("The user drinks oolong tea every morning", kind="preference", tags=["drinks"], importance=0.9)
    berlin = _memory("Alice met Bob in Berlin to plan Project Falcon", kind="event", at=NOW - 9 * DAY)
    return [
        [tea, berlin],
        [_memory("Project Falcon ships on Friday", kind="decision", importance=0.8)],
        [_memory("Alice met Bob in Paris to plan Project Falcon", kind="event", supersedes=(berlin.record.id,))],
        [_memory("The user drinks oolong tea every morning")],  # said again: merged
        [_memory("用户喜欢喝乌龙茶，不加糖", kind="preference", tags=["drinks", "中文"])],
        [_memory("A throwaway note that expires", ttl_seconds=86_400, at=NOW - 2 * DAY)],
        [_memory("Release notes live in docs/release.md (v1.2.3)", kind="fact", pinned=True)],
        [_memory("Standup moved to 9:30", kind="decision", at=NOW - 0.6 * DAY)],  # day 0, not rounded up
    ]


@pytest.fixture
async def both(pg_empty: pgcluster.Cluster, tmp_path: Path) -> AsyncIterator[tuple[SqliteStore, PostgresStore]]:
    async with await psycopg.AsyncConnection.connect(pg_empty.dsn(pgcluster.OWNER), autocommit=True) as owner:
        await migrations.migrate(owner, pgcluster.SERVER)
    async with SqliteStore(tmp_path / "data") as lite, PostgresStore(PostgresSettings(dsn=pg_empty.dsn())) as pg:
        for batch in _history():
            for store in (lite, pg):
                async with store.transaction(ALICE) as conn:
                    await writes.apply(cast(Any, conn), ALICE, batch, [], NOW)
        yield lite, pg


async def _same(both: tuple[SqliteStore, PostgresStore], read: Callable[[Any], Awaitable[Any]]) -> Any:
    """``read`` on each store; the two answers must be equal. Returns SQLite's."""
    lite, pg = both
    expected, got = await read(lite), await read(pg)
    assert got == expected
    return expected


async def test_counts_pages_and_lookups_answer_alike(both: tuple[SqliteStore, PostgresStore]) -> None:
    answers = [
        await _same(both, lambda s: CountStore(s).tier_counts(ALICE)),
        await _same(both, lambda s: CountStore(s).visible_counts(ALICE)),
        await _same(both, lambda s: CountStore(s).principal_counts(ALICE)),
        await _same(both, lambda s: CountStore(s).event_counts(ALICE)),
        await _same(both, lambda s: CountStore(s).timeline(ALICE, 30, NOW)),
        await _same(both, lambda s: CountStore(s).pending(ALICE, 3)),
    ]
    assert all(answers), answers  # positive control: each read found something
    for sort, descending in (("created", True), ("importance", False), ("time", True), ("time", False)):
        page = await _same(both, _page(sort, descending))
        assert len(page) == 4


def _page(sort: str, descending: bool) -> Callable[[Any], Awaitable[Any]]:
    def read(store: Any) -> Awaitable[Any]:
        criteria = Criteria(include_superseded=True)
        return BrowseStore(store).page(ALICE, criteria, sort=sort, descending=descending, after=None, limit=4)

    return read


async def _all(store: Any) -> list[Any]:
    conn = await store.reader(ALICE)
    where, params = rows.visible_clause(ALICE, Criteria(include_superseded=True, include_expired=True), NOW)
    found = [
        rows.row_to_record(r)
        for r in await conn.execute_fetchall(
            f"SELECT {rows.MEMORY_COLUMNS} FROM memories m WHERE {where} ORDER BY m.n", params
        )
    ]
    await rows.attach_occurrences(conn, found)
    return found


async def test_lifecycle_golden_links_and_hashes_answer_alike(both: tuple[SqliteStore, PostgresStore]) -> None:
    assert await _same(both, _all)
    assert await _same(both, lambda s: LifecycleStore(s).expired(ALICE, NOW + 2 * DAY))
    assert await _same(both, lambda s: LifecycleStore(s).decay_rows(ALICE))
    assert await _same(both, lambda s: LifecycleStore(s).compression_candidates(ALICE, 3))
    assert await _same(both, lambda s: LifecycleStore(s).consolidation_candidates(ALICE, ["preference", "fact"]))
    await _same(both, lambda s: LifecycleStore(s).extraction_namespaces(ALICE))
    assert await _same(both, lambda s: GoldenStore(s).candidates(ALICE, 0.5, 10))
    assert await _same(both, lambda s: GoldenStore(s).document_counts(ALICE, ["falcon", "乌龙", "v1.2.3", "nothing"]))
    ids = [r.id for r in await _all(both[0])]
    assert await _same(both, lambda s: _with_reader(s, lambda c: links.links(c, ids[:3], 7)))
    hashes = [
        content_hash(None, t)
        for t in ("The user drinks oolong tea every morning", "Alice met Bob in Berlin to plan Project Falcon")
    ]
    assert await _same(both, lambda s: _with_reader(s, lambda c: rows.live_by_hash(c, ALICE, hashes, NOW)))
    assert await _same(both, lambda s: _with_reader(s, lambda c: rows.replaced_by_hash(c, ALICE, hashes, NOW)))
    vectors = await _same(both, lambda s: _vectors(s, ids))
    assert len(vectors) == len(ids)


async def _with_reader(store: Any, read: Callable[[Any], Awaitable[Any]]) -> Any:
    return await read(await store.reader(ALICE))


async def _vectors(store: Any, ids: list[str]) -> dict[str, list[float]]:
    found = await LifecycleStore(store).vectors(ALICE, ids)
    return {k: [round(float(x), 6) for x in v] for k, v in found.items()}


async def test_a_forget_with_its_derived_memories_leaves_both_alike(both: tuple[SqliteStore, PostgresStore]) -> None:
    ids = {r.content: r.id for r in await _all(both[0])}

    async def forget(store: Any) -> int:
        async with store.transaction(ALICE) as conn:
            found = await conn.execute_fetchall(
                "SELECT n FROM memories WHERE id = ?", (ids["Project Falcon ships on Friday"],)
            )
            return await writes.delete(conn, [int(found[0][0])], derived=True)

    assert await _same(both, forget) == 1
    await _same(both, _all)
    await _same(both, lambda s: CountStore(s).principal_counts(ALICE))
    await _same(both, lambda s: CountStore(s).event_counts(ALICE))


async def test_the_passes_bookkeeping_writes_alike(both: tuple[SqliteStore, PostgresStore]) -> None:
    """The lifecycle's and the golden queries' own rows: counters kept by upserts that read the row
    they replace, marks that only move forward, failures counted per memory."""
    ids = [r.id for r in await _all(both[0])]

    async def bookkeeping(store: Any) -> Any:
        rows, golden = LifecycleStore(store), GoldenStore(store)
        failures = [await rows.extraction_failed(ALICE, None) for _ in range(3)]
        await rows.mark_extracted(ALICE, None, 5)
        await rows.mark_extracted(ALICE, None, 3)  # a mark never moves back
        for passed in (True, True, False):
            await rows.count_fact_check(ALICE, None, passed)
        await rows.record_compression_failure(ALICE, ids[:2])
        await rows.record_compression_failure(ALICE, ids[:1])
        await golden.add(ALICE, GoldenRow("g1", None, "when does falcon ship", ids[1], NOW))
        await golden.record_check(ALICE, GoldenCheckRow(NOW, 1, 1.0, 0.0, True, {"lost": ["g1"]}))
        return (
            failures,
            await rows.compression_failures(ALICE),
            await rows.unread_for_facts(ALICE, ["fact"]),
            await CountStore(store).pending(ALICE, 3),
            await golden.queries(ALICE),
            await golden.checks(ALICE),
        )

    failures, compression, *_ = await _same(both, bookkeeping)
    assert failures == [1, 2, 3]
    assert compression == {ids[0]: 2, ids[1]: 1}


async def test_each_principal_keeps_its_last_golden_checks_when_principals_interleave(
    both: tuple[SqliteStore, PostgresStore],
) -> None:
    """PostgreSQL numbers every principal's checks from one sequence: the kept ones are the last
    rows of the principal, not a range of numbers."""
    _, pg = both
    alice, bob = GoldenStore(pg), GoldenStore(pg)
    check = GoldenCheckRow(NOW, 1, 1.0, 1.0, False, {})
    for _ in range(120):
        await alice.record_check(ALICE, check)
        await bob.record_check(Scope("bob"), check)
    assert len(await _check_rows(pg, ALICE)) == 120
    assert len(await _check_rows(pg, Scope("bob"))) == 120


async def _check_rows(store: PostgresStore, scope: Scope) -> list[Any]:
    conn = await store.reader(scope)
    return await conn.execute_fetchall("SELECT n FROM golden_checks")

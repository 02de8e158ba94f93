"""One SQL for both backends (ADR 20): the SQLite storage functions run unchanged on PostgreSQL
through storage/pg/dialect.py, on a throwaway cluster. These tests hold the translation rules and
the shared write path (insert, merge of a text said again, supersede, forget with what hangs on a
memory) to what SQLite does, and the wall between principals."""

from __future__ import annotations

import hashlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar, cast

import numpy as np
import psycopg
import pytest

from mcp_memory.core.ids import new_id
from mcp_memory.core.models import Criteria, MemoryDraft, MemoryRecord, NewMemory, NewOccurrence, Provenance, Scope
from mcp_memory.core.text import segment_for_index
from mcp_memory.services import inputs
from mcp_memory.services.intake import content_hash
from mcp_memory.storage import links, writes
from mcp_memory.storage.pg import dialect, keyword, migrations, vector_layout
from mcp_memory.storage.rows import MEMORY_COLUMNS, attach_occurrences, row_to_record, visible_clause
from tests import pgcluster

pytestmark = pytest.mark.anyio

ALICE, BOB = Scope("alice"), Scope("bob")
T = TypeVar("T")
KEYS = {p: hashlib.sha256(p.encode()).hexdigest()[:32] for p in ("alice", "bob")}

TRANSLATIONS = [
    ("SELECT n FROM memories WHERE id = ?", "SELECT n FROM memories___principal__ WHERE id = %s"),
    (
        "SELECT m.n FROM memories m JOIN memory_tags t ON t.memory_n = m.n WHERE m.namespace IS ?",
        "SELECT m.n FROM memories___principal__ m JOIN memory_tags___principal__ t ON t.memory_n = m.n "
        "WHERE m.namespace IS NOT DISTINCT FROM %s",
    ),
    (
        "INSERT OR IGNORE INTO memory_tags(tag, memory_n) VALUES (?, ?)",
        "INSERT INTO memory_tags___principal__(tag, memory_n) VALUES (%s, %s) ON CONFLICT DO NOTHING",
    ),
    (
        "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
        "INSERT INTO meta___principal__(key, value) VALUES (%s, %s) "
        "ON CONFLICT (principal, key) DO UPDATE SET value = EXCLUDED.value",
    ),
    (
        "UPDATE memories SET expires_at = CASE WHEN ? IS NULL THEN NULL ELSE MAX(expires_at, ?) END",
        "UPDATE memories___principal__ SET expires_at = CASE WHEN CAST(%s AS text) IS NULL THEN NULL "
        "ELSE GREATEST(expires_at, %s) END",
    ),
    ("SELECT MAX(n) FROM changes", "SELECT MAX(n) FROM changes___principal__"),
    (
        "SELECT CAST((? - m.created_at) / 86400 AS INTEGER), SUM(CAST(value AS INTEGER)) FROM memories m",
        "SELECT CAST(trunc((%s - m.created_at) / 86400) AS INTEGER), SUM(CAST(value AS INTEGER)) "
        "FROM memories___principal__ m",
    ),
    (
        "INSERT INTO meta(key, value) VALUES (?, '1') "
        "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1",
        "INSERT INTO meta___principal__(key, value) VALUES (%s, '1') ON CONFLICT (principal, key) DO UPDATE "
        "SET value = CAST(meta___principal__.value AS INTEGER) + 1",
    ),
    (
        "INSERT INTO compression_failures(memory_id, failures) VALUES (?, ?) "
        "ON CONFLICT(memory_id) DO UPDATE SET failures = MAX(failures, excluded.failures)",
        "INSERT INTO compression_failures___principal__(memory_id, failures) VALUES (%s, %s) "
        "ON CONFLICT (principal, memory_id) DO UPDATE SET failures = GREATEST("
        "compression_failures___principal__.failures, excluded.failures)",
    ),
    (
        "INSERT INTO tasks(task_id, title) VALUES (?,?) ON CONFLICT(task_id) DO UPDATE SET title = excluded.title",
        "INSERT INTO tasks___principal__(task_id, title) VALUES (%s,%s) ON CONFLICT (principal, task_id) DO UPDATE "
        "SET title = excluded.title",
    ),
    ("SELECT 'a % b ? c', x FROM memories", "SELECT 'a %% b ? c', x FROM memories___principal__"),
    (
        "SELECT s.id, o.id FROM memories s, memories o WHERE s.id = ?",
        "SELECT s.id, o.id FROM memories___principal__ s, memories___principal__ o WHERE s.id = %s",
    ),
    (
        "UPDATE memories SET valid_to = CAST(? AS REAL)",
        "UPDATE memories___principal__ SET valid_to = CAST(%s AS double precision)",
    ),
]


@pytest.mark.parametrize(("sqlite", "expected"), TRANSLATIONS)
def test_a_sqlite_statement_becomes_its_postgresql_twin(sqlite: str, expected: str) -> None:
    assert dialect.translate(sqlite) == (expected, None)


def test_an_insert_returns_its_number_and_a_delete_takes_what_hangs_on_the_row() -> None:
    sql, returning = dialect.translate("INSERT INTO changes(memory_n, op) VALUES (?, 'del')")
    assert (sql, returning) == (
        "INSERT INTO changes___principal__(memory_n, op) VALUES (%s, 'del') RETURNING seq",
        "seq",
    )
    sql, returning = dialect.translate("DELETE FROM tasks WHERE task_id = ?")
    assert returning == dialect.COUNTED
    assert sql == (
        "WITH gone AS (DELETE FROM tasks___principal__ WHERE task_id = %s RETURNING task_id), "
        "c0 AS (DELETE FROM checkpoints___principal__ WHERE task_id IN (SELECT task_id FROM gone)) "
        "SELECT count(*) FROM gone"
    )


def _memory(scope: Scope, text: str, *, tags: tuple[str, ...] = (), supersedes: tuple[str, ...] = ()) -> NewMemory:
    at = time.time()
    vector = np.random.default_rng(len(text)).normal(size=8).astype(np.float32)
    item = MemoryDraft(content=text, kind="fact", tags=list(tags))
    record = inputs.new_record(scope, item, text, content_hash(None, text), at, at, None, Provenance())
    occurrence = NewOccurrence(new_id(), None, at, {}, Provenance())
    return NewMemory(record, vector, segment_for_index(text), occurrence, supersedes=supersedes)


class _Db:
    """The shared storage functions on one PostgreSQL connection, a transaction per call."""

    def __init__(self, conn: psycopg.AsyncConnection) -> None:
        self.conn = conn

    async def run(self, scope: Scope, work: Callable[[Any], Awaitable[T]]) -> T:
        """``work`` on a PgConn: Any, since the shared functions are typed for aiosqlite's connection,
        whose calls PgConn answers (ADR 20)."""
        key = KEYS[scope.principal]
        async with self.conn.transaction():
            await migrations.as_principal(self.conn, key)
            await self.conn.execute("SELECT mcp_open_principal(%s, %s)", (key, "someone"))
            return await work(dialect.PgConn(self.conn, key))

    async def records(self, scope: Scope, **criteria: Any) -> list[MemoryRecord]:
        async def read(pc: dialect.PgConn) -> list[MemoryRecord]:
            where, params = visible_clause(scope, Criteria(**criteria), time.time())
            rows = await pc.execute_fetchall(
                f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE {where} ORDER BY m.n", params
            )
            found = [row_to_record(r) for r in rows]
            await attach_occurrences(cast(Any, pc), found)
            return found

        return await self.run(scope, read)

    async def count(self, scope: Scope, table: str) -> int:
        async def read(pc: dialect.PgConn) -> int:
            return int((await pc.execute_fetchall(f"SELECT count(*) FROM {table}"))[0][0])

        return await self.run(scope, read)


@pytest.fixture
async def db(pg_empty: pgcluster.Cluster) -> AsyncIterator[_Db]:
    async with await psycopg.AsyncConnection.connect(pg_empty.dsn(pgcluster.OWNER), autocommit=True) as owner:
        await migrations.migrate(owner, pgcluster.SERVER)
    async with await psycopg.AsyncConnection.connect(pg_empty.dsn()) as conn:
        await vector_layout.prepare(conn)  # as the pool's connections are (pgvector's values as bytes)
        await conn.commit()  # the read above opened a transaction: each call's is its own
        yield _Db(conn)


async def test_the_sqlite_write_path_inserts_merges_and_supersedes_on_postgresql(db: _Db) -> None:
    now = time.time()
    tea = _memory(ALICE, "The user drinks oolong tea", tags=("drinks",))
    berlin = _memory(ALICE, "Alice met Bob in Berlin")
    applied = await db.run(ALICE, lambda pc: writes.apply(pc, ALICE, [tea, berlin], [], now))
    assert set(applied.superseded) == {tea.record.id, berlin.record.id}
    again = _memory(ALICE, "The user drinks oolong tea")  # said again: one more occurrence, not a row
    applied = await db.run(ALICE, lambda pc: writes.apply(pc, ALICE, [again], [], now))
    assert applied.merged == {again.record.id: tea.record.id}
    moved = _memory(ALICE, "Alice met Bob in Paris", supersedes=(berlin.record.id,))
    applied = await db.run(ALICE, lambda pc: writes.apply(pc, ALICE, [moved], [], now))
    assert applied.superseded[moved.record.id] == [berlin.record.id]

    live = await db.records(ALICE)
    assert [r.content for r in live] == ["The user drinks oolong tea", "Alice met Bob in Paris"]
    assert len(live[0].occurrence_ids) == 2
    assert live[0].tags == ["drinks"]
    assert [r.content for r in await db.records(ALICE, tags=("drinks",))] == ["The user drinks oolong tea"]
    old = await db.records(ALICE, include_superseded=True, ids=(berlin.record.id,))
    assert old[0].superseded_by == moved.record.id
    assert await db.records(BOB) == []  # Bob's transaction, the same SQL: nothing of Alice's


async def test_forgetting_removes_the_row_and_everything_that_hangs_on_it(db: _Db) -> None:
    now = time.time()
    gone = _memory(ALICE, "Alice's passport number ends in 4471", tags=("travel",))
    kept = _memory(ALICE, "Alice prefers window seats")
    bobs = _memory(BOB, "Bob's passport is in the drawer")
    await db.run(ALICE, lambda pc: writes.apply(pc, ALICE, [gone, kept], [], now))
    await db.run(BOB, lambda pc: writes.apply(pc, BOB, [bobs], [], now))
    before = {
        t: await db.count(ALICE, t) for t in ("memory_tags", "occurrences", "vectors", "memory_entities", "postings")
    }
    assert all(before.values()), before

    async def forget(pc: dialect.PgConn) -> int:
        n = int((await pc.execute_fetchall("SELECT n FROM memories WHERE id = ?", (gone.record.id,)))[0][0])
        return await writes.delete(cast(Any, pc), [n], derived=True)

    assert await db.run(ALICE, forget) == 1
    assert [r.content for r in await db.records(ALICE)] == ["Alice prefers window seats"]
    after = {t: await db.count(ALICE, t) for t in before}
    assert after == {
        "memory_tags": 0,
        "occurrences": 1,
        "vectors": 1,
        "memory_entities": len(links.entity_rows(0, kept.record.content)),
        "postings": len(keyword.positions(kept.segmented)[0]),
    }
    docs = await db.run(ALICE, lambda pc: pc.execute_fetchall("SELECT value FROM meta WHERE key = ?", (keyword.DOCS,)))
    assert docs == [("1",)]

    async def search(pc: dialect.PgConn) -> list[tuple[str, float]]:
        return await keyword.search(pc.conn, pc.key, ["passport"], 10)

    assert await db.run(ALICE, search) == []  # unindexed with the row
    assert [m for m, _ in await db.run(BOB, search)] == [bobs.record.id]  # Bob's stays
    events = await db.run(
        ALICE, lambda pc: pc.execute_fetchall("SELECT event FROM memory_events WHERE memory_id = ?", (gone.record.id,))
    )
    assert events == [("forgotten",)]  # only the content-free record of the forget remains


async def test_the_keyword_index_locks_only_the_principals_own_partitions(db: _Db) -> None:
    """A statement on a partitioned parent, prepared (psycopg does after a statement's fifth run)
    and planned generically, locks every partition of every principal: at a thousand principals
    the lock table ran out of shared memory. The keyword index names the principal's partitions."""
    for scope in (ALICE, BOB):
        memory = _memory(scope, "tea with oat milk")

        async def write(pc: dialect.PgConn, scope: Scope = scope, memory: NewMemory = memory) -> object:
            return await writes.apply(cast(Any, pc), scope, [memory], [], time.time())

        await db.run(scope, write)
    await db.conn.execute("SET plan_cache_mode = force_generic_plan")
    db.conn.prepare_threshold = 0  # prepare at once, as psycopg does from a statement's fifth run

    async def search_then_locks(pc: dialect.PgConn) -> list[str]:
        for _ in range(2):
            assert await keyword.search(pc.conn, pc.key, ["tea"], 10) != []
            await keyword.index_segmented(pc.conn, pc.key, {})
            await keyword.unindex(pc.conn, pc.key, [0])
        rows = await pc.execute_fetchall(
            "SELECT DISTINCT c.relname FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
            "WHERE l.pid = pg_backend_pid() AND c.relname LIKE ?",
            (f"%{KEYS['bob']}%",),
        )
        return [str(r[0]) for r in rows]

    try:
        assert await db.run(ALICE, search_then_locks) == []
    finally:
        db.conn.prepare_threshold = 5
        await db.conn.execute("RESET plan_cache_mode")

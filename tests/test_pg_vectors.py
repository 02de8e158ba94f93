"""The vectors kept and searched in PostgreSQL (ADR 25): with pgvector the search runs in the
database and answers as the in-process engine does; `database migrate` moves a database between the
two layouts and back; a partition past the threshold gets its HNSW index; forget_user leaves none of
the principal's vectors in the table or index files; without pgvector the in-process engine stays,
and says so."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import numpy as np
import psycopg
import pytest
from psycopg import sql

from mcp_memory.config import PostgresSettings
from mcp_memory.core.errors import StorageError
from mcp_memory.core.models import Criteria, Scope
from mcp_memory.mcp.recall_schemas import Hit, MemoryOut
from mcp_memory.mcp.wire_recall import recall_result
from mcp_memory.services.erasure import ErasureService
from mcp_memory.storage.pg import database, messages, migrations, vector_layout, vector_search
from mcp_memory.storage.pg.store import PgIndexSearch
from mcp_memory.storage.pg.vector_search import PgVectorSearch
from tests import pgcluster, test_pg_store
from tests.test_pg_store import ALICE, BOB, CANARY, Opener, _holding, _remember

pytestmark = pytest.mark.anyio
embedder, replica = test_pg_store.embedder, test_pg_store.replica  # the same replicas as the store's tests

TEXTS = [
    "The staging cluster runs PostgreSQL 16 in region eu-west",
    "Nadia leads the Falcon project and reviews every release",
    "The billing service retries a failed payment three times",
    "Backups of the orders database are kept for thirty days",
    "The office coffee machine is descaled every Friday",
    "Release 7 moves the search service to the new cluster",
    "团队每周五下午开会讨论发布计划",  # one CJK memory: the store mixes scripts, so recall centres (ADR 10)
]
QUESTIONS = ["Who leads Falcon?", "How long are backups kept?", "什么时候开会？", "Which database does staging run?"]


async def _layout(cluster: pgcluster.Cluster, vectors: str | None) -> str:
    async with await psycopg.AsyncConnection.connect(cluster.dsn(pgcluster.OWNER), autocommit=True) as owner:
        await migrations.migrate(owner, pgcluster.SERVER, vectors)
        return vector_layout.PGVECTOR if await vector_layout.vector_type(owner) else vector_layout.IN_PROCESS


async def _answers(replica: Opener, scope: Scope) -> tuple[str, list[list[tuple[str, float | None, bool]]]]:
    """Each question's hits as (text, score, strong): the strength judged on the model's plain
    cosine, which a centred pgvector search returns and the in-process engine reads back."""
    async with replica() as (store, memory):
        answers: list[list[tuple[str, float | None, bool]]] = []
        for question in QUESTIONS:
            found = recall_result(await memory.recall(scope, question, reinforce=False))
            answers.append([(h.text, h.score, h.strong) for h in found.hits if isinstance(h, Hit | MemoryOut)])
        return store.vectors.name, answers


@pytest.mark.pg_variant("pgvector")
async def test_pgvector_answers_as_the_in_process_engine_and_migrate_moves_the_vectors_both_ways(
    pg_empty: pgcluster.Cluster, replica: Opener
) -> None:
    assert await _layout(pg_empty, None) == vector_layout.PGVECTOR  # the extension is there: used
    async with replica() as (store, memory):
        assert isinstance(store.vectors, PgVectorSearch)
        await _remember(memory, ALICE, *TEXTS)
        await _remember(memory, BOB, "Bob leads the Falcon project too")
    engine, in_database = await _answers(replica, ALICE)
    assert engine == "pgvector"
    assert in_database[0][0][0] == TEXTS[1]

    assert await _layout(pg_empty, "in-process") == vector_layout.IN_PROCESS
    async with replica() as (store, _):
        assert isinstance(store.vectors, PgIndexSearch)
    engine, in_process = await _answers(replica, ALICE)
    assert engine == "in-process"
    for got, want in zip(in_database, in_process, strict=True):
        assert [(text, strength) for text, _, strength in got] == [(text, strength) for text, _, strength in want]
        assert np.allclose([s or 0.0 for _, s, _ in got], [s or 0.0 for _, s, _ in want], atol=1e-4)

    assert await _layout(pg_empty, None) == vector_layout.PGVECTOR  # and back, the same numbers
    engine, again = await _answers(replica, ALICE)
    assert engine == "pgvector"
    assert again == in_database
    findings = {f.what: f for f in await database.check(_settings(pg_empty))}
    assert findings["vector engine"].said.startswith("pgvector")


@pytest.mark.pg_variant("pgvector")
async def test_a_partition_past_the_threshold_is_searched_through_its_index_and_forget_user_leaves_no_vector(
    pg_empty: pgcluster.Cluster, replica: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vector_search, "HNSW_ROWS", 20)
    await _layout(pg_empty, None)
    async with replica() as (store, memory), replica() as (other, other_memory):
        [canary] = await _remember(memory, ALICE, f"Alice's note: {CANARY}")
        await _remember(memory, ALICE, *(f"Ticket {i} was closed by team {i % 4} on day {i}" for i in range(30)))
        await _remember(memory, BOB, "Bob prefers aisle seats")
        found = await memory.recall(ALICE, "Alice's note about the locker code", reinforce=False)  # starts it
        assert found.hits[0].id == canary  # answered exactly while the index is made, off the call
        key = store.database.key(ALICE.principal)
        assert await _indexed(pg_empty, key)
        found = await other_memory.recall(ALICE, "Alice's note about the locker code", reinforce=False)
        assert isinstance(other.vectors, PgVectorSearch)
        assert other.vectors._known(ALICE).indexed
        assert found.hits
        assert found.hits[0].id == canary
        assert other.vectors.size(ALICE) == 31
        await _remember(memory, ALICE, "Alice parks her bike behind the library")  # on the other replica
        await other_memory.recall(ALICE, "Alice's note about the locker code", reinforce=False)
        assert other.vectors.size(ALICE) == 32  # the index's path counts the partition again once it moved
        vector = (await store.lifecycle.vectors(ALICE, [canary]))[canary]
        full, half = vector.astype("<f4").tobytes()[:64], vector.astype("<f2").tobytes()[:32]
        pgcluster.psql(pg_empty, "CHECKPOINT")
        base = pg_empty.data / "base"
        assert _holding(base, CANARY)
        assert _holding_bytes(base, full)
        assert _holding_bytes(base, half)
        erasure = ErasureService(store)
        dry = await erasure.forget_user(ALICE)
        assert dry.confirmation_code is not None
        await erasure.forget_user(ALICE, dry.confirmation_code)
        pgcluster.psql(pg_empty, "CHECKPOINT")
        assert _holding(base, CANARY) == []
        assert _holding_bytes(base, full) == []
        assert _holding_bytes(base, half) == []
        assert [h.text for h in (await other_memory.recall(BOB, "aisle seats", reinforce=False)).hits] == [
            "Bob prefers aisle seats"
        ]
        assert (await other_memory.recall(ALICE, "Alice's note about the locker code", reinforce=False)).hits == []


@pytest.mark.pg_variant("pgvector")
async def test_a_mixed_store_past_the_threshold_answers_through_the_index_as_it_did_exactly(
    pg_empty: pgcluster.Cluster, replica: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each script's candidates through the index, scored centred (ADR 10): in a store this small
    every memory is a candidate and the sample is the whole partition, so the answers are the exact
    scan's, to the score."""
    await _layout(pg_empty, None)
    async with replica() as (store, memory):
        await _remember(
            memory, ALICE, *TEXTS, *(f"Ticket {i} was closed by team {i % 4} on day {i}" for i in range(25))
        )
        engine, exactly = await _answers(replica, ALICE)
        assert not store.vectors._known(ALICE).indexed
        monkeypatch.setattr(vector_search, "HNSW_ROWS", 20)
        await memory.recall(ALICE, QUESTIONS[0], reinforce=False)  # past the threshold: the index is made
        assert await _indexed(pg_empty, store.database.key(ALICE.principal))
    engine, through_index = await _answers(replica, ALICE)
    assert engine == "pgvector"
    assert through_index[2][0][0] == TEXTS[6]  # the CJK question finds the CJK memory
    for got, want in zip(through_index, exactly, strict=True):
        assert [(text, strength) for text, _, strength in got] == [(text, strength) for text, _, strength in want]
        assert np.allclose([s or 0.0 for _, s, _ in got], [s or 0.0 for _, s, _ in want], atol=1e-4)


@pytest.mark.pg_variant("pgvector")
async def test_a_search_through_the_index_reads_only_its_best_rows_memories(
    pg_empty: pgcluster.Cluster, replica: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The spread's sample looked each sampled row's memory up by its key (about 2,000 at 10,000
    memories), then read them in one scan; the probes looked each candidate's up inside the index's
    iterative scan (2 x ``limit`` per script). Since schema 7 both filter on the figures each vector
    row carries, and only the best ``limit`` rows' memories are read, for their ids. The search's
    statements sent again in a transaction of the test's, where PostgreSQL counts the scans of the
    memories' key: one per hit returned at most, none for the sample."""
    monkeypatch.setattr(vector_search, "HNSW_ROWS", 20)
    await _layout(pg_empty, None)
    sent: list[list[str]] = []
    sending = messages.exchange

    async def recorded(conn: psycopg.AsyncConnection, statements: list[str]) -> list[list[tuple[object, ...]]]:
        sent.append(list(statements))
        return await sending(conn, statements)

    monkeypatch.setattr(vector_search, "exchange", recorded)
    async with replica() as (store, memory):
        ids = await _remember(
            memory, ALICE, *TEXTS, *(f"Ticket {i} was closed by team {i % 4} on day {i}" for i in range(25))
        )
        await memory.recall(ALICE, QUESTIONS[0], reinforce=False)  # past the threshold: the index is made
        key = store.database.key(ALICE.principal)
        assert await _indexed(pg_empty, key)
        query = (await store.lifecycle.vectors(ALICE, ids[:1]))[ids[0]]
        engine = store.vectors
        assert isinstance(engine, PgVectorSearch)
        await engine.ranking(ALICE, query, Criteria(), 10, time.time())  # sees the index, counts the rows
        assert engine._known(ALICE).indexed
        found = await engine.ranking(ALICE, query, Criteria(), 10, time.time())
        assert found.hits[0][0] == ids[0]
        assert found.visible == len(ids)  # the sample is the whole partition, every row of it seen
        scans = sql.SQL("SELECT pg_stat_get_xact_numscans(to_regclass({}))").format(  # this transaction's
            sql.Literal(f"public.memories_{key}_pkey")
        )
        async with store.database.transaction(ALICE, write=False) as conn:
            [[(before,)]] = await sending(conn.conn, [scans.as_string(conn.conn)])
            await sending(conn.conn, sent[-1])
            [[(after,)]] = await sending(conn.conn, [scans.as_string(conn.conn)])
    assert len(ids) > 30
    assert 0 < after - before <= 10  # the best 10 rows' memories (the probes took 20 candidates of each script)
    assert "memories" not in sent[-1][2]  # the sample reads the vectors alone


@pytest.mark.pg_variant("pgvector")
async def test_a_mixed_store_sums_its_script_means_again_only_after_its_rows_moved(
    pg_empty: pgcluster.Cluster, replica: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Re-summing every vector cost one recall 20-120 ms every 30 s at 10,000 memories; a store that
    nobody writes to keeps its sums, and one written to (here by another replica) is summed again."""
    await _layout(pg_empty, None)
    monkeypatch.setattr(vector_search, "SCRIPTS_SECONDS", 0.0)  # no wait once the rows moved
    async with replica() as (store, memory), replica() as (_, writer):
        await _remember(memory, ALICE, *TEXTS)
        await memory.recall(ALICE, QUESTIONS[0], reinforce=False)
        seen = store.vectors._known(ALICE)
        assert seen.sums is not None
        summed_at, latin = seen.sums_at, seen.sums[0].copy()
        await memory.recall(ALICE, QUESTIONS[1], reinforce=False)
        assert seen.sums_at == summed_at  # nothing moved: the same sums
        await _remember(writer, ALICE, "The deploy window closes at six on Thursdays")
        await memory.recall(ALICE, QUESTIONS[1], reinforce=False)
        assert seen.sums_at > summed_at
        assert not np.allclose(seen.sums[0], latin)  # the new Latin memory is in its script's sum


@pytest.mark.pg_variant("pgvector")
async def test_each_script_has_its_own_graph_for_a_migrated_and_a_new_principal_and_a_probe_walks_its_own(
    pg_empty: pgcluster.Cluster, replica: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Schema 5: a vector row carries its memory's script, and the HNSW index is one partial index
    per script, so a probe of one script walks only that script's graph (through one graph of both,
    a Latin question's probe of the CJK rows walked ~4,770 index entries to find 300). Alice's
    vectors are written under schema 4 (with its one graph of both scripts) and migrated; Bob is
    made after the migration. (Alice is written in the in-process layout, then moved to pgvector's:
    this code's pgvector search reads columns of schema 7.)"""
    monkeypatch.setattr(migrations, "SCHEMA_VERSION", 4)
    await _layout(pg_empty, vector_layout.IN_PROCESS)
    async with replica() as (store, memory):
        await _remember(
            memory, ALICE, *TEXTS, *(f"Ticket {i} was closed by team {i % 4} on day {i}" for i in range(25))
        )
        alice = store.database.key(ALICE.principal)
    assert await _layout(pg_empty, vector_layout.PGVECTOR) == vector_layout.PGVECTOR
    served = f"SET mcp.principal = '{alice}'; SELECT max(vector_dims(vec)) FROM vectors_{alice}"
    dim = int(pgcluster.psql(pg_empty, served).splitlines()[-1])  # the model's (the fallback's differs)
    pgcluster.psql(pg_empty, f"CREATE INDEX vectors_{alice}_hnsw_{dim} ON vectors_{alice} USING hnsw "
                   f"((vec::halfvec({dim})) halfvec_ip_ops) WHERE vector_dims(vec) = {dim}")  # fmt: skip
    monkeypatch.undo()
    await _layout(pg_empty, None)
    monkeypatch.setattr(vector_search, "HNSW_ROWS", 20)
    async with replica() as (store, memory):
        await _remember(memory, BOB, *TEXTS, *(f"Bob's ticket {i} went to team {i % 3}" for i in range(25)))
        for scope in (ALICE, BOB):
            key = store.database.key(scope.principal)
            cjk = f"SELECT count(*) FROM vectors_{key} v JOIN memories_{key} m ON m.n = v.memory_n WHERE v.cjk"
            languages = f"SELECT count(*) FROM memories_{key} WHERE language IN ('zh', 'ja', 'ko')"
            assert pgcluster.psql(pg_empty, f"SET mcp.principal = '{key}'; {cjk}").splitlines()[-1] == "1"
            assert pgcluster.psql(pg_empty, f"SET mcp.principal = '{key}'; {languages}").splitlines()[-1] == "1"
            await memory.recall(scope, QUESTIONS[0], reinforce=False)  # past the threshold: the graphs are made
            assert await _indexed(pg_empty, key)
            names = pgcluster.psql(pg_empty, f"SELECT indexname FROM pg_indexes WHERE tablename = 'vectors_{key}'")
            assert {f"vectors_{key}_hnsw_{dim}_latin", f"vectors_{key}_hnsw_{dim}_cjk"} <= set(names.splitlines())
            async with store.database.transaction(scope, write=False) as conn:
                probe = vector_search._candidates(
                    key, np.full(dim, dim**-0.5, dtype=np.float32), None, dim, sql.SQL("true"), 10, None
                )
                await conn.conn.execute("SET LOCAL enable_seqscan = off")  # 32 rows: a scan would be cheaper
                plan = "\n".join(r[0] for r in await (await conn.conn.execute(sql.SQL("EXPLAIN ") + probe)).fetchall())
            for script in ("latin", "cjk"):
                assert f"Index Scan using vectors_{key}_hnsw_{dim}_{script}" in plan, plan
            assert f"vectors_{key}_hnsw_{dim} " not in plan
            # a new memory's neighbours (relations.py) come from both graphs, as the exact scan finds them
            engine = store.vectors
            assert isinstance(engine, PgVectorSearch)
            assert engine._known(scope).indexed
            ids = await _remember(memory, scope, "团队每周五开会讨论发布", "Release 8 moves billing to the cluster")
            vectors = await store.lifecycle.vectors(scope, ids)
            queries = np.stack([vectors[i] for i in ids])
            criteria, now = Criteria(namespace_only=True), time.time()
            through = await engine.neighbours(scope, queries, criteria, 5, now)
            engine._known(scope).indexed = False
            exactly = await engine.neighbours(scope, queries, criteria, 5, now)
            assert [[i for i, _ in row] for row in through] == [[i for i, _ in row] for row in exactly]
            assert [row[0][0] for row in through] == ids


async def _indexed(cluster: pgcluster.Cluster, key: str) -> bool:
    """Whether the principal's partition has its HNSW index within a few seconds (made in the background)."""
    for _ in range(100):
        found = pgcluster.psql(cluster, f"SELECT count(*) FROM pg_indexes WHERE indexname LIKE 'vectors_{key}_hnsw_%'")
        if found == "2":  # one graph per script (schema 5)
            return True
        await anyio.sleep(0.1)
    return False


@pytest.mark.pg_variant("plain")
async def test_without_pgvector_the_in_process_engine_serves_and_says_how_to_move(
    pg_empty: pgcluster.Cluster, replica: Opener
) -> None:
    assert await _layout(pg_empty, None) == vector_layout.IN_PROCESS
    with pytest.raises(StorageError, match="pgvector layout needs the vector extension"):
        await _layout(pg_empty, "pgvector")
    async with replica() as (store, memory):
        assert isinstance(store.vectors, PgIndexSearch)
        assert store.vectors.name == "in-process"
        await _remember(memory, ALICE, *TEXTS[:3])
        assert (await memory.recall(ALICE, "Who leads Falcon?", reinforce=False)).hits[0].text == TEXTS[1]
    findings = {f.what: f for f in await database.check(_settings(pg_empty))}
    assert findings["vector engine"].ok
    assert findings["vector engine"].said.startswith("in-process")


def _settings(cluster: pgcluster.Cluster) -> PostgresSettings:
    return PostgresSettings(dsn=cluster.dsn())


def _holding_bytes(folder: Path, needle: bytes) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and needle in p.read_bytes()]

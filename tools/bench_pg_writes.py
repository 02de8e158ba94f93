"""What writing memories costs on PostgreSQL + pgvector past the vectors' script triggers and the
HNSW graphs (ADR 25, issue 35's fill regression).

    OMP_NUM_THREADS=1 .venv/bin/python tools/bench_pg_writes.py [--memories 10000] [--rounds 2]
        [--chunk 250] [--chunks 8]

1. The fill: ``--memories`` memories of one principal written as tools/bench_backends.py writes them
   (tools/fill_store.py: ``PostgresStore.apply`` in batches of 2,000), each round on a fresh
   PostgreSQL 18 + pgvector (tests/pgcluster.py), alternating the schema as migrated with the same
   schema with schema 5's script triggers disabled: the fill's seconds and the time PostgreSQL
   spent in each trigger function (``track_functions``).
2. The graphs: two principals filled alike; one gets its per-script HNSW graphs through
   ``mcp_vector_index`` (timed), then ``--chunks`` batches of ``--chunk`` new memories go into each
   in turn (alternating which goes first): the milliseconds a memory costs with its graphs kept
   against without.

Markdown to stdout, progress to stderr.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
import bench_backends
import fill_store
import numpy as np
import psycopg
import synth
from stats import markdown_table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mcp_memory.compose import embedder_config, second_opinion_config
from mcp_memory.config import Settings, load_settings
from mcp_memory.core.models import NewMemory, Scope, SecondVector
from mcp_memory.embed.loader import Model, build_model
from mcp_memory.storage.pg.store import PostgresStore
from tests import pgcluster

TRIGGERS = (("vectors", "vector_script"), ("memories", "memory_script"), ("memories", "memory_script_changed"))


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _rows(pool: fill_store.Pool, start: int, count: int) -> list[NewMemory]:
    """Memories ``start`` .. ``start + count`` of the fill's sequence (restatements past the pool)."""
    r, now, size = random.Random(start), time.time(), len(pool.texts)
    texts = [pool.texts[i] if i < size else synth.variant(pool.texts[i % size], i) for i in range(start, start + count)]
    return [
        fill_store._row(t, pool.vectors[i % size], r, now, _second(pool, i % size)) for i, t in enumerate(texts, start)
    ]


def _second(pool: fill_store.Pool, base: int) -> SecondVector | None:
    if pool.second is None or pool.second_id is None:
        return None
    return SecondVector(pool.second_id, pool.second[base].astype(np.float32))


async def _prepared(cluster: pgcluster.Cluster, triggers: bool) -> tuple[Settings, Model, fill_store.Pool]:
    await bench_backends._schema(cluster)
    async with await psycopg.AsyncConnection.connect(cluster.dsn("postgres"), autocommit=True) as superuser:
        await superuser.execute("ALTER SYSTEM SET track_functions = 'pl'")
        await superuser.execute("SELECT pg_reload_conf()")
        for table, trigger in () if triggers else TRIGGERS:
            await superuser.execute(f"ALTER TABLE {table} DISABLE TRIGGER {trigger}")
    settings = load_settings(data_dir=Path(tempfile.mkdtemp()), storage={"postgres": {"dsn": cluster.dsn()}})
    model, wanted = build_model(embedder_config(settings)), second_opinion_config(settings)
    second = build_model(wanted) if wanted is not None else None  # as bench_backends fills
    return settings, model, fill_store.embed_pool(model, 1_000, bench_backends.CACHE, second)


async def _fill(cluster: pgcluster.Cluster, memories: int, triggers: bool) -> tuple[float, dict[str, float]]:
    """The fill's seconds, and each trigger function's seconds inside it."""
    settings, model, pool = await _prepared(cluster, triggers)
    async with PostgresStore(settings.storage.postgres) as store:
        started = time.perf_counter()
        await fill_store.fill_into(store, bench_backends.PRINCIPAL.principal, pool, model, memories)
        seconds = time.perf_counter() - started
    async with await psycopg.AsyncConnection.connect(cluster.dsn(), autocommit=True) as conn:
        rows = await (await conn.execute("SELECT funcname, total_time FROM pg_stat_user_functions")).fetchall()
    return seconds, {str(name): float(ms) / 1000 for name, ms in rows if str(name).endswith("_script")}


async def _graphs(
    cluster: pgcluster.Cluster, memories: int, chunk: int, chunks: int
) -> tuple[float, list[float], list[float]]:
    """The graphs' build seconds; ms per memory written with graphs, and without, per batch."""
    settings, model, pool = await _prepared(cluster, True)
    indexed, plain = Scope("indexed"), Scope("plain")
    kept: dict[str, list[float]] = {indexed.principal: [], plain.principal: []}
    async with PostgresStore(settings.storage.postgres) as store:
        for scope in (indexed, plain):
            await fill_store.fill_into(store, scope.principal, pool, model, memories)
        async with await psycopg.AsyncConnection.connect(cluster.dsn("postgres"), autocommit=True) as superuser:
            await superuser.execute("VACUUM ANALYZE")
        started = time.perf_counter()
        async with store.database.transaction(indexed, write=False) as conn:
            await conn.conn.execute("SELECT mcp_vector_index(%s, %s)", (conn.key, model.dim))
        build = time.perf_counter() - started
        for i in range(chunks):
            rows = _rows(pool, memories + i * chunk, chunk)
            for scope in (indexed, plain) if i % 2 else (plain, indexed):
                started = time.perf_counter()
                await store.apply(scope, rows, [])
                kept[scope.principal].append(1000 * (time.perf_counter() - started) / chunk)
    return build, kept[indexed.principal], kept[plain.principal]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--memories", type=int, default=10_000)
    p.add_argument("--rounds", type=int, default=2, help="fills with and without the triggers, alternating")
    p.add_argument("--chunk", type=int, default=250, help="memories a batch after the graphs are built")
    p.add_argument("--chunks", type=int, default=8)
    args = p.parse_args()
    fills: list[list[object]] = []
    for i in range(2 * args.rounds):
        triggers = i % 2 == 0
        _progress(f"fill {i + 1}: {args.memories:,} memories, triggers {'on' if triggers else 'off'}")
        cluster = pgcluster.start(variant="pgvector")
        try:
            seconds, spent = anyio.run(_fill, cluster, args.memories, triggers)
        finally:
            pgcluster.stop(cluster, remove=True)
        row: list[object] = [i + 1, "on" if triggers else "off", f"{seconds:.1f}"]
        fills.append(row + [f"{spent.get(name, 0.0):.2f}" for name in ("mcp_vector_script", "mcp_memory_script")])
    _progress(f"graphs: two principals of {args.memories:,}, {args.chunks} batches of {args.chunk} into each")
    cluster = pgcluster.start(variant="pgvector")
    try:
        build, indexed, plain = anyio.run(_graphs, cluster, args.memories, args.chunk, args.chunks)
    finally:
        pgcluster.stop(cluster, remove=True)
    print(f"# Writes on PostgreSQL + pgvector: {args.memories:,} memories\n")
    print(markdown_table(["fill", "triggers", "fill s", "in mcp_vector_script s", "in mcp_memory_script s"], fills))
    print(f"\nBoth graphs of one principal built in {build:.2f} s. A memory written afterwards, median of "
          f"{args.chunks} batches of {args.chunk}: {statistics.median(indexed):.2f} ms with its graphs, "
          f"{statistics.median(plain):.2f} ms without.")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

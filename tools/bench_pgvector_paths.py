"""The exact scan against the path through the HNSW index, on the store bench_backends fills (ADR 25).

    OMP_NUM_THREADS=1 .venv/bin/python tools/bench_pgvector_paths.py [--memories 10000] [--pool 1000]
        [--questions 110]

A throwaway PostgreSQL 18 + pgvector (tests/pgcluster.py) filled as tools/bench_backends.py fills it
(one principal, a mixed-script store: about a fifth of the texts Chinese; ``--pool`` distinct texts,
restated beyond it, so the default's 10,000 memories hold each vector ten times) and analysed, the
partition's HNSW index made whatever its size. Then each question recalled (k=10, reinforce=false) on two stores of
the same database, one held to the exact scan, one through the index, alternating which goes first:
the dense ranking's p50 on each, and how the two top-10 lists agree (identical lists, the same first
hit, overlap@10). Markdown to stdout, progress to stderr.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import bench_backends
import fill_store
import synth
from stats import markdown_table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mcp_memory.compose import embedder_config, second_opinion_config
from mcp_memory.config import Settings, load_settings
from mcp_memory.embed.loader import Embedder, build_model
from mcp_memory.mcp.wire_recall import hit_tokens
from mcp_memory.services.memory import MemoryService
from mcp_memory.services.sessions import SessionTracker
from mcp_memory.storage.pg.store import PostgresStore
from mcp_memory.storage.pg.vector_search import PgVectorSearch
from tests import pgcluster

PRINCIPAL = bench_backends.PRINCIPAL


async def _fill(cluster: pgcluster.Cluster, work: Path, memories: int, pool_size: int) -> Settings:
    """The schema, then ``memories`` memories of ``pool_size`` distinct texts into the database."""
    await bench_backends._schema(cluster)
    settings = load_settings(data_dir=work, storage={"postgres": {"dsn": cluster.dsn()}})
    model = build_model(embedder_config(settings))
    wanted = second_opinion_config(settings)
    second = build_model(wanted) if wanted is not None else None
    pool = fill_store.embed_pool(model, pool_size, bench_backends.CACHE, second)
    async with PostgresStore(settings.storage.postgres) as store:
        await fill_store.fill_into(store, PRINCIPAL.principal, pool, model, memories)
    return settings


def _timed(engine: PgVectorSearch, into: list[float], exact: bool) -> None:
    """The engine's ranking timed into ``into``; ``exact``: held to the exact scan."""
    ranking = engine.ranking

    async def timed(*args: Any, **kwargs: Any) -> Any:
        if exact:
            engine._known(PRINCIPAL).indexed = False
        started = time.perf_counter()
        try:
            return await ranking(*args, **kwargs)
        finally:
            into.append(1000 * (time.perf_counter() - started))

    engine.ranking = timed  # type: ignore[method-assign]


async def compare(settings: Settings, questions: list[str]) -> list[list[str]]:
    async with PostgresStore(settings.storage.postgres) as a, PostgresStore(settings.storage.postgres) as b:
        async with a.database.transaction(PRINCIPAL, write=False) as conn:
            await conn.conn.execute("SELECT mcp_vector_index(%s, %s)", (conn.key, 384))
        embedder = Embedder(embedder_config(settings), second=second_opinion_config(settings))
        embedder.start()
        await embedder.ready()
        times: dict[str, list[float]] = {"exact": [], "index": []}
        services = {}
        for name, store in (("exact", a), ("index", b)):
            assert isinstance(store.vectors, PgVectorSearch)
            _timed(store.vectors, times[name], exact=name == "exact")
            services[name] = MemoryService(
                store, embedder, settings.limits, settings.recall, SessionTracker(1800), hit_tokens
            )
        for question in questions[:3]:  # the models loaded, the means summed
            for service in services.values():
                await service.recall(PRINCIPAL, question, k=10, reinforce=False)
        for kept in times.values():
            kept.clear()
        same = first = 0
        shared = 0.0
        for i, question in enumerate(questions):
            found = {}
            for name in ("exact", "index") if i % 2 else ("index", "exact"):
                answer = await services[name].recall(PRINCIPAL, question, k=10, reinforce=False)
                found[name] = [hit.id for hit in answer.hits]
            x, y = found["exact"], found["index"]
            same += x == y
            first += x[:1] == y[:1]
            shared += len(set(x) & set(y)) / max(len(x), 1)
    n = len(questions)
    return [
        [
            "dense ranking p50 ms",
            f"{statistics.median(times['exact']):.1f}",
            f"{statistics.median(times['index']):.1f}",
        ],
        ["top-10 lists identical", "", f"{same} / {n}"],
        ["first hit the same", "", f"{first} / {n}"],
        ["overlap@10", "", f"{shared / n:.3f}"],
    ]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--memories", type=int, default=10_000)
    p.add_argument("--pool", type=int, default=1_000, help="distinct texts (bench_backends: 1,000)")
    p.add_argument("--questions", type=int, default=110)
    args = p.parse_args()
    cluster = pgcluster.start(variant="pgvector")
    try:
        with tempfile.TemporaryDirectory(prefix="mcp-memory-bench-paths-") as tmp:
            settings = anyio.run(_fill, cluster, Path(tmp), args.memories, args.pool)
            pgcluster.psql(cluster, "ANALYZE")  # as autovacuum would soon: both paths planned on statistics
            questions = synth.distinct(synth.question, args.questions, seed=7)
            rows = anyio.run(compare, settings, questions)
    finally:
        pgcluster.stop(cluster, remove=True)
    print(
        f"# Exact scan against the HNSW path: {args.memories:,} memories of {args.pool:,} texts, "
        f"{args.questions} questions\n"
    )
    print(markdown_table(["", "exact scan", "through the index"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

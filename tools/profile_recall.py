"""Where a recall's time goes, SQLite beside PostgreSQL: a per-phase timeline (issue 35).

    OMP_NUM_THREADS=1 .venv/bin/python tools/profile_recall.py [--memories 10000] [--recalls 40]
        [--variant pgvector|plain]

The stores are made and filled as tools/bench_backends.py makes them (a throwaway cluster, the
same memories in each). Then each question is asked of both stores in turn, as there, with probes
put around the recall's phases for this process only (nothing in the server is changed or slowed:
the probes are this script's wrappers): the question's embedding in the worker thread, the keyword
and dense searches, the record reads, the links, the second model's opinion, the Python scoring
and packing, the transaction's opening and commit, and every PostgreSQL exchange. Per phase, the
medians over the recalls of its wall time, the main thread's CPU time in it, and when it started
and ended after the recall began: phases whose spans overlap ran side by side; a phase that starts
when another ends waited for it. Run it under ``flock /tmp/mcp-bench.lock``.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import bench_backends
import psycopg
import synth
from stats import markdown_table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mcp_memory.config import Settings
from mcp_memory.embed import loader
from mcp_memory.services import memory, question, scoring, second
from mcp_memory.services.memory import MemoryService
from mcp_memory.storage.pg import dialect, keyword, transactions, vector_search
from mcp_memory.storage.pg.store import PostgresStore
from mcp_memory.storage.records import RecordStore
from mcp_memory.storage.sqlite import SqliteStore
from tests import pgcluster

Event = tuple[str, float, float, float]  # phase, start and end after the recall began (s), CPU (s)


class Timeline:
    """The events of the recall under way (None between recalls: nothing is kept)."""

    def __init__(self) -> None:
        self.events: list[Event] | None = None
        self.began = 0.0

    def keep(self, name: str, start: float, cpu: float) -> None:
        if self.events is not None:
            self.events.append((name, start - self.began, time.perf_counter() - self.began, time.thread_time() - cpu))


TIMELINE = Timeline()


def probe(owner: Any, attr: str, name: str) -> None:
    """``owner.attr`` (a function or coroutine function) timed as the phase ``name``."""
    f: Callable[..., Any] = getattr(owner, attr)
    if inspect.iscoroutinefunction(f):

        @functools.wraps(f)
        async def timed(*args: Any, **kwargs: Any) -> Any:
            start, cpu = time.perf_counter(), time.thread_time()
            try:
                return await f(*args, **kwargs)
            finally:
                TIMELINE.keep(name, start, cpu)

        setattr(owner, attr, timed)
        return

    @functools.wraps(f)
    def timed_sync(*args: Any, **kwargs: Any) -> Any:
        start, cpu = time.perf_counter(), time.thread_time()
        try:
            return f(*args, **kwargs)
        finally:
            TIMELINE.keep(name, start, cpu)

    setattr(owner, attr, timed_sync)


def probe_recall() -> None:
    """The recall's phases (the thread's CPU for the embedding is the worker thread's own)."""
    probe(loader, "_clipped_queries", "embedding (worker thread)")
    for attr, name in [
        ("keyword_ranking", "keyword search"),
        ("replies_to", "replies"),
        ("with_strength", "strength"),
        ("score", "python: score"),
        ("floored", "python: floor"),
        ("fit_budget", "python: packing"),
    ]:
        probe(memory, attr, name)
    probe(scoring, "keyword_blind", "python: keyword_blind")
    probe(question, "adjustments", "python: question adjustments")
    probe(second, "question_for", "second model: question")
    probe(second, "opinion", "second model: opinion")
    for attr, name in [("_fuse", "fuse"), ("_gather", "gather"), ("_follow_links", "links"), ("_pins", "pins")]:
        probe(MemoryService, attr, name)
    probe(transactions, "begin", "pg: BEGIN (+ freshness)")
    probe(transactions, "finish", "pg: COMMIT")
    for module, what in ((keyword, "keyword"), (vector_search, "dense"), (dialect, "reads")):
        probe(module, "exchange", f"pg: {what} statements sent together (round trip)")
    probe(psycopg.AsyncCursor, "fetchall", "pg: fetchall (decode)")


def probe_store(store: RecordStore) -> None:
    probe(store, "select_memories", "records read")
    probe(store.vectors, "ranking", "dense search")


async def _recalls(settings: Settings, recalls: int) -> dict[str, list[tuple[float, float, list[Event]]]]:
    """Each question asked of both stores in turn: per store, (wall, main-thread CPU, events) a recall."""
    questions = synth.distinct(synth.question, recalls + 10, seed=5)
    found: dict[str, list[tuple[float, float, list[Event]]]] = {name: [] for name in bench_backends.BACKENDS}
    async with SqliteStore(settings.data_dir) as lite, PostgresStore(settings.storage.postgres) as pg:
        services = {}
        for name, store in (("sqlite", lite), ("postgres", pg)):
            probe_store(store)
            services[name] = await bench_backends.recall_service(settings, store)
        for i, question in enumerate(questions):
            for name in bench_backends.BACKENDS if i % 2 else reversed(bench_backends.BACKENDS):
                TIMELINE.events, TIMELINE.began, cpu = [], time.perf_counter(), time.thread_time()
                await services[name].recall(bench_backends.PRINCIPAL, question, k=10, reinforce=False)
                wall, events, TIMELINE.events = time.perf_counter() - TIMELINE.began, TIMELINE.events, None
                if i >= 10:  # the first ten load the models
                    found[name].append((wall, time.thread_time() - cpu, events))
    return found


def phases(runs: list[tuple[float, float, list[Event]]]) -> dict[str, list[float]]:
    """Per phase: median times a recall, wall ms, CPU ms, first start ms, last end ms, share of recalls."""
    per: dict[str, list[list[float]]] = defaultdict(lambda: [[], [], [], []])
    for _, _, events in runs:
        seen: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 1e9, 0.0])
        for name, start, end, cpu in events:
            s = seen[name]
            s[0], s[1], s[2], s[3] = s[0] + end - start, s[1] + cpu, min(s[2], start), max(s[3], end)
        for name, s in seen.items():
            for j in range(4):
                per[name][j].append(s[j])
    return {
        name: [1000 * statistics.median(v) for v in values] + [100 * len(values[0]) / len(runs)]
        for name, values in per.items()
    }


def table(found: dict[str, list[tuple[float, float, list[Event]]]]) -> str:
    both = {name: phases(runs) for name, runs in found.items()}
    order = sorted(
        {p for figures in both.values() for p in figures}, key=lambda p: min(f[p][2] for f in both.values() if p in f)
    )

    def cells(name: str, p: str) -> list[str]:
        f = both[name].get(p)
        return ["-"] * 3 if f is None else [f"{f[0]:.1f}", f"{f[1]:.1f}", f"{f[2]:.1f}-{f[3]:.1f}"]

    rows = [[p, *cells("sqlite", p), *cells("postgres", p)] for p in order]
    walls = [1000 * statistics.median(wall for wall, _, _ in found[n]) for n in bench_backends.BACKENDS]
    cpus = [1000 * statistics.median(cpu for _, cpu, _ in found[n]) for n in bench_backends.BACKENDS]
    rows.append(["recall (whole)", f"{walls[0]:.1f}", f"{cpus[0]:.1f}", "", f"{walls[1]:.1f}", f"{cpus[1]:.1f}", ""])
    head = ["phase", "SQLite wall ms", "CPU ms", "span ms", "PostgreSQL wall ms", "CPU ms", "span ms"]
    return markdown_table(head, rows)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--memories", type=int, default=10_000, help="memories in the principal (default 10,000)")
    p.add_argument("--recalls", type=int, default=40, help="timed recalls per backend (default 40)")
    p.add_argument(
        "--variant", choices=pgcluster.VARIANTS, default="pgvector" if pgcluster.wheel_bindir() else "plain",
        help="pgvector: PostgreSQL 18 with pgvector (the default when installed); plain: PG 15",
    )  # fmt: skip
    args = p.parse_args()
    cluster = pgcluster.start(variant=args.variant)
    try:
        with tempfile.TemporaryDirectory(prefix="mcp-memory-profile-recall-") as tmp:
            sides = {name: bench_backends.Side() for name in bench_backends.BACKENDS}
            settings = anyio.run(bench_backends._fill, cluster, Path(tmp), args.memories, sides)
            probe_recall()
            found = anyio.run(_recalls, settings, args.recalls)
    finally:
        pgcluster.stop(cluster, remove=True)
    print(f"# A recall's phases: {args.memories:,} memories, {args.recalls} recalls a backend (medians)\n")
    print(table(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())

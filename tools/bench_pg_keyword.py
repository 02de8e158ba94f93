"""PostgreSQL's keyword search against an older keyword.py, on the store bench_backends fills (issue 35).

    OMP_NUM_THREADS=1 PYTHONPATH=$PWD .venv/bin/python tools/bench_pg_keyword.py \\
        [--old /work/main/mcp_memory/storage/pg/keyword.py] [--memories 10000] [--questions 60]
        [--variant plain|pgvector] [--analyze]

A throwaway PostgreSQL cluster (tests/pgcluster.py) filled with this tree's schema and ``--memories``
memories as tools/bench_backends.py fills it. The old module (``--old``, loaded from its file) must
read only what this schema still keeps (``memories.doc_len`` is still written). Each question is
recalled once (k=10, reinforce=false) to learn the keyword searches recall asks of the store; then
those searches are run again through ``PostgresStore.keyword_searches`` (one transaction, the
statements in one message) with the old and the new ``bm25_query``, alternating which goes first,
and each question recalled whole with each (its embedding then cached by the first pass, so the
recall's figure is its work besides the model). Printed: medians of both, their ratio (new / old), how many answers
are identical (ids, order and scores, exact float equality), how many lists hold the same ids in
the same order and agree at 12 significant digits (ties by id), the largest relative difference of
a memory's score, and how many recalls return the same hits with the same scores. Markdown to
stdout, progress to stderr.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
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
from mcp_memory.storage.pg import keyword
from mcp_memory.storage.pg.store import PostgresStore
from tests import pgcluster

PRINCIPAL = bench_backends.PRINCIPAL
NEW = keyword.bm25_query


def _old(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("old_pg_keyword", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}: give --old the path of a keyword.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def _fill(cluster: pgcluster.Cluster, work: Path, memories: int) -> Settings:
    await bench_backends._schema(cluster)
    settings = load_settings(data_dir=work, storage={"postgres": {"dsn": cluster.dsn()}})
    model = build_model(embedder_config(settings))
    wanted = second_opinion_config(settings)
    pool = fill_store.embed_pool(model, 1_000, bench_backends.CACHE, build_model(wanted) if wanted else None)
    async with PostgresStore(settings.storage.postgres) as store:
        await fill_store.fill_into(store, PRINCIPAL.principal, pool, model, memories)
    return settings


def _canonical(found: list[tuple[str, float]]) -> list[tuple[float, str]]:
    """A list as its scores to 12 significant digits, ties in order of id: what stays when the last
    bits of a sum, which depend on the order it was added in, are set aside."""
    return sorted((-float(f"{score:.12g}"), memory) for memory, score in found)


async def compare(settings: Settings, questions: list[str], old: ModuleType) -> tuple[list[list[str]], int]:
    """The table's rows and how many keyword searches were replayed."""
    async with PostgresStore(settings.storage.postgres) as store:
        embedder = Embedder(embedder_config(settings), second=second_opinion_config(settings))
        embedder.start()
        await embedder.ready()
        service = MemoryService(store, embedder, settings.limits, settings.recall, SessionTracker(1800), hit_tokens)
        asked: list[tuple[Any, ...]] = []
        searches = store.keyword_searches

        async def kept(*args: Any) -> Any:  # what recall asks, kept to be asked again
            asked.append(args)
            return await searches(*args)

        store.keyword_searches = kept  # type: ignore[method-assign,assignment]
        for question in questions:
            await service.recall(PRINCIPAL, question, k=10, reinforce=False)
        store.keyword_searches = searches  # type: ignore[method-assign]
        times: dict[str, list[float]] = {"old": [], "new": []}
        recalls: dict[str, list[float]] = {"old": [], "new": []}
        same_lists = same_hits = same_order = same_canon = lists = 0
        apart = 0.0
        builds = {"old": old.bm25_query, "new": NEW}
        for i, args in enumerate(asked):
            found = {}
            for name in ("old", "new") if i % 2 else ("new", "old"):
                keyword.bm25_query = builds[name]
                started = time.perf_counter()
                found[name] = await store.keyword_searches(*args)
                times[name].append(1000 * (time.perf_counter() - started))
            same_lists += found["old"] == found["new"]
            for a, b in zip(found["old"], found["new"], strict=True):
                same_order += [m for m, _ in a] == [m for m, _ in b]
                same_canon += _canonical(a) == _canonical(b)
                lists += 1
                apart = max(apart, *(abs(x - dict(b).get(m, x)) / max(abs(x), 1e-300) for m, x in a), 0.0)
        for i, question in enumerate(questions):
            hits = {}
            for name in ("old", "new") if i % 2 else ("new", "old"):
                keyword.bm25_query = builds[name]
                started = time.perf_counter()
                answer = await service.recall(PRINCIPAL, question, k=10, reinforce=False)
                recalls[name].append(1000 * (time.perf_counter() - started))
                hits[name] = [(hit.id, hit.score) for hit in answer.hits]
            same_hits += hits["old"] == hits["new"]
        keyword.bm25_query = NEW
    rows = []
    for label, kept_times in (("keyword_searches p50 ms", times), ("recall p50 ms", recalls)):
        was, now = statistics.median(kept_times["old"]), statistics.median(kept_times["new"])
        rows.append([label, f"{was:.2f}", f"{now:.2f}", f"{now / was:.2f}"])
    rows.append(["keyword_searches answers identical (both lists)", "", f"{same_lists} / {len(asked)}", ""])
    rows.append(["result lists: same ids in the same order", "", f"{same_order} / {lists}", ""])
    rows.append(["result lists: same at 12 digits, ties by id", "", f"{same_canon} / {lists}", ""])
    rows.append(["largest relative score difference", "", f"{apart:.1e}", ""])
    rows.append(["recall hits identical", "", f"{same_hits} / {len(questions)}", ""])
    return rows, len(asked)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--old", type=Path, default=Path("/work/main/mcp_memory/storage/pg/keyword.py"))
    p.add_argument("--memories", type=int, default=10_000)
    p.add_argument("--questions", type=int, default=60)
    p.add_argument("--variant", choices=pgcluster.VARIANTS, default="plain")
    p.add_argument("--analyze", action="store_true", help="ANALYZE after the fill (else as autovacuum left it)")
    args = p.parse_args()
    old = _old(args.old)
    cluster = pgcluster.start(variant=args.variant)
    try:
        with tempfile.TemporaryDirectory(prefix="mcp-memory-bench-keyword-") as tmp:
            settings = anyio.run(_fill, cluster, Path(tmp), args.memories)
            if args.analyze:
                pgcluster.psql(cluster, "ANALYZE")
            questions = synth.distinct(synth.question, args.questions, seed=5)
            rows, searches = anyio.run(compare, settings, questions, old)
    finally:
        pgcluster.stop(cluster, remove=True)
    print(
        f"# Keyword search, {args.old} (old) against this tree (new): {args.memories:,} memories, "
        f"{args.variant}, {args.questions} questions, {searches} keyword searches, alternating\n"
    )
    print(markdown_table(["", "old", "new", "new / old"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

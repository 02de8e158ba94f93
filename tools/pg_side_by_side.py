"""The PostgreSQL backend beside SQLite on the small-store dev set, and `migrate` both ways (ADR 19).

Each of agentstore-dev's 40 stores becomes a principal of one SQLite data directory (its memories
remembered in one batch, in-process); `mcp-memory migrate --to postgres` copies them into a
throwaway PostgreSQL cluster; every question is asked of both backends with the same vectors
(recall k=10, no reinforcement), and hit@1, R@3 and the recall latency are printed side by side;
then `migrate --to sqlite` copies the database into a new data directory and each principal's
export is compared, byte for byte, with the first directory's.

    .venv/bin/python tools/pg_side_by_side.py [DATA_DIR]     # DATA_DIR: ../shared/data by default
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import orjson
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mcp_memory.config import Settings, load_settings
from mcp_memory.core.models import MemoryDraft, Scope
from mcp_memory.mcp.server import open_server
from mcp_memory.services.memory import CallContext
from mcp_memory.services.portability import export_lines
from mcp_memory.storage.pg import migrations
from tests import pgcluster

SETS = ("en", "zh", "en->zh", "zh->en")


def _settings(data_dir: Path, dsn: str, backend: str) -> Settings:
    return load_settings(data_dir=data_dir, principal="agent", storage={"backend": backend, "postgres": {"dsn": dsn}})


async def fill(settings: Settings, stores: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """Every store remembered as its own principal; memory id -> the file's id, per store."""
    ids: dict[str, dict[str, str]] = {}
    async with open_server(settings, warm=False) as rt:
        for store in stores:
            items = [MemoryDraft(content=m["text"], metadata={"file_id": m["id"]}) for m in store["memories"]]
            result = await rt.memory.remember(Scope(store["id"]), items, CallContext())
            ids[store["id"]] = {
                str(item.id): m["id"] for item, m in zip(result.items, store["memories"], strict=True) if item.id
            }
    return ids


async def ask(
    settings: Settings, stores: list[dict[str, Any]], ids: dict[str, dict[str, str]]
) -> tuple[dict[str, list[int | None]], list[float]]:
    """The rank of each question's gold memory (None: not in the top 10), per set; each recall's time."""
    ranks: dict[str, list[int | None]] = {s: [] for s in SETS}
    took: list[float] = []
    async with open_server(settings, warm=False) as rt:
        for store in stores:
            scope = Scope(store["id"])
            await rt.memory.recall(scope, "warm-up", k=1, reinforce=False)  # the index loads once
            for query in store["queries"]:
                started = time.perf_counter()
                found = await rt.memory.recall(scope, query["q"], k=10, reinforce=False)
                took.append(time.perf_counter() - started)
                files = [ids[store["id"]].get(str(hit.id)) for hit in found.hits]
                gold = set(query["gold"])
                ranks[query["set"]].append(next((i for i, f in enumerate(files, 1) if f in gold), None))
    return ranks, took


async def exports(settings: Settings, names: list[str]) -> dict[str, bytes]:
    async with open_server(settings, warm=False) as rt:
        return {n: b"".join([line async for line in export_lines(rt.store, Scope(n))]) for n in names}


def _hit(ranks: list[int | None], k: int) -> float:
    return sum(1 for r in ranks if r is not None and r <= k) / max(len(ranks), 1)


def _migrate(data_dir: Path, to: str, cluster: pgcluster.Cluster) -> float:
    """The real command, in a process of its own, as an operator runs it."""
    env = {
        "PATH": "/usr/bin:/bin",
        "MCP_MEMORY_STORAGE__POSTGRES__DSN": cluster.dsn(),
        "MCP_MEMORY_PG_OWNER_DSN": cluster.dsn(pgcluster.OWNER),
    }
    command = [str(Path(sys.executable).parent / "mcp-memory"), "--data-dir", str(data_dir), "migrate", "--to", to]
    started = time.perf_counter()
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


async def _schema(cluster: pgcluster.Cluster) -> None:
    async with await psycopg.AsyncConnection.connect(cluster.dsn(pgcluster.OWNER), autocommit=True) as owner:
        await migrations.migrate(owner, pgcluster.SERVER)


def main() -> None:
    source = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "shared" / "data"
    stores: list[dict[str, Any]] = orjson.loads((source / "agentstore-dev.json").read_bytes())["stores"]
    work = Path(tempfile.mkdtemp(prefix="pg-side-"))
    cluster = pgcluster.start()  # a folder of its own, which the postgres user can reach
    try:
        anyio.run(_schema, cluster)
        lite = _settings(work / "sqlite", cluster.dsn(), "sqlite")
        ids = anyio.run(fill, lite, stores)
        to_pg = _migrate(lite.data_dir, "postgres", cluster)
        results = {
            backend: anyio.run(ask, _settings(work / backend, cluster.dsn(), backend), stores, ids)
            for backend in ("sqlite", "postgres")
        }
        back = work / "back"
        to_lite = _migrate(back, "sqlite", cluster)
        names = [s["id"] for s in stores]
        first, second = anyio.run(exports, lite, names), anyio.run(exports, _settings(back, "", "sqlite"), names)
    finally:
        pgcluster.stop(cluster, remove=True)
    memories = sum(len(s["memories"]) for s in stores)
    print(f"agentstore-dev: {len(stores)} principals, {memories} memories, {sum(len(s['queries']) for s in stores)} q")
    print(f"{'set':<8} {'n':>4} {'sqlite hit@1':>13} {'pg hit@1':>9} {'sqlite R@3':>11} {'pg R@3':>7}")
    for name in (*SETS, "all"):
        lite_ranks = [r for s in SETS for r in results["sqlite"][0][s]] if name == "all" else results["sqlite"][0][name]
        pg_ranks = (
            [r for s in SETS for r in results["postgres"][0][s]] if name == "all" else results["postgres"][0][name]
        )
        print(
            f"{name:<8} {len(lite_ranks):>4} {_hit(lite_ranks, 1):>13.3f} {_hit(pg_ranks, 1):>9.3f} "
            f"{_hit(lite_ranks, 3):>11.3f} {_hit(pg_ranks, 3):>7.3f}"
        )
    for backend, (_, took) in results.items():
        ms = sorted(t * 1000 for t in took)
        print(f"recall {backend}: p50 {statistics.median(ms):.1f} ms, p95 {ms[int(0.95 * (len(ms) - 1))]:.1f} ms")
    same = sum(first[n] == second[n] for n in names)
    print(f"migrate --to postgres {to_pg:.1f} s, --to sqlite {to_lite:.1f} s; exports identical after the round trip: "
          f"{same} of {len(names)} principals")  # fmt: skip


if __name__ == "__main__":
    main()

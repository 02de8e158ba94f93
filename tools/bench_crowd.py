"""A crowd on one network server with few file descriptors: sessions held open, nothing closed.

    OMP_NUM_THREADS=1 .venv/bin/python tools/bench_crowd.py [--principals 1000] [--nofile 256]
        [--concurrency 8] [--close-sessions]

One `mcp-memory serve --transport http` subprocess (log level INFO, as an operator runs it) on a
fresh data directory, started under `ulimit -n` = `--nofile`. Each of `--principals` principals (a
token each, minted in-process) opens its own MCP session, remembers one memory, recalls it and
then leaves the session open, as desktop clients do: its HTTP connection closes, no DELETE is
sent (`--close-sessions` sends it). `--concurrency` principals at a time. Every 10% the server's
resident memory, threads and open descriptors are sampled from /proc. At the end a newcomer (a
principal never seen) must be served. Printed: errors by kind, the samples, RSS after 10
principals against RSS at the end and the difference per held session, the server log's size,
the newcomer's outcome and the pool's gauges from /metrics.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx2
from bench_http import Server, call, error_kind, start_server
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from stats import markdown_table

from mcp_memory.storage.tokens import TokenStore


def sample(pid: int) -> tuple[float, int, int]:
    """(resident MiB, threads, open descriptors) of the server process."""
    status = Path(f"/proc/{pid}/status").read_text()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    rss = int(fields["VmRSS"].split()[0]) / 1024
    threads = int(fields["Threads"].strip())
    return rss, threads, len(os.listdir(f"/proc/{pid}/fd"))


async def mint(data_dir: Path, count: int) -> list[str]:
    store = TokenStore(data_dir, 10_000)
    now = time.time()
    return [(await store.create(f"user-{i:04d}", None, "bench", now, None))[0] for i in range(count)]


@asynccontextmanager
async def held_session(server: Server, token: str, close: bool) -> AsyncIterator[Client]:
    """An MCP session whose connection closes at the end; the session itself is left open on the
    server unless ``close`` (then DELETE ends it)."""
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        create_mcp_http_client(headers=headers) as http,
        Client(streamable_http_client(server.url, http_client=http, terminate_on_close=close)) as client,
    ):
        yield client


async def serve_one(server: Server, i: int, token: str, close: bool, errors: Counter[str]) -> None:
    try:
        with anyio.fail_after(120):
            async with held_session(server, token, close) as client:
                await call(client, "remember", {"content": f"User {i} keeps the spare key in drawer {i}"})
                found = await call(client, "recall", {"query": "spare key drawer", "reinforce": False})
                if not found["hits"]:
                    errors["recall found nothing"] += 1
    except Exception as exc:  # counted by kind, never raised: the run goes on
        errors[error_kind(exc)] += 1


async def measure(args: argparse.Namespace) -> str:
    work = Path(tempfile.mkdtemp(prefix="bench-crowd-"))
    data_dir = work / "data"
    tokens = await mint(data_dir, args.principals + 1)
    newcomer = tokens.pop()
    server = start_server(data_dir, "http", stateless=False, env={"MCP_MEMORY_LOG_LEVEL": "INFO"}, nofile=args.nofile)
    pid = server.process.pid
    errors: Counter[str] = Counter()
    samples: list[list[str]] = []
    early: float | None = None
    done = 0
    step = max(1, args.principals // 10)
    limiter = anyio.CapacityLimiter(args.concurrency)
    started = time.perf_counter()

    async def one(i: int, token: str) -> None:
        nonlocal done, early
        async with limiter:
            await serve_one(server, i, token, args.close_sessions, errors)
            done += 1
            if done == min(10, args.principals):
                early = sample(pid)[0]
            if done % step == 0:
                rss, threads, fds = sample(pid)
                samples.append([str(done), f"{rss:.0f}", str(threads), str(fds)])
                print(f"{done} principals: {rss:.0f} MiB, {threads} threads, {fds} fds", file=sys.stderr)

    try:
        async with anyio.create_task_group() as group:
            for i, token in enumerate(tokens):
                group.start_soon(one, i, token)
        seconds = time.perf_counter() - started
        late: Counter[str] = Counter()
        await serve_one(server, args.principals, newcomer, True, late)
        end_rss = sample(pid)[0]
        async with httpx2.AsyncClient(timeout=30) as http:
            metrics = (await http.get(f"{server.base}/metrics")).text
    finally:
        code = server.stop()
    log_bytes = server.log.stat().st_size
    per_session = (end_rss - (early or end_rss)) * 1024 / max(1, args.principals - 10)
    pool_lines = [line for line in metrics.splitlines() if line.startswith("mcp_memory_pool")]
    kept = "closed with DELETE" if args.close_sessions else "left open (no DELETE), as desktop clients do"
    lines = [
        f"# {args.principals} principals, one session each, {kept}, on a server limited to {args.nofile} descriptors",
        "",
        f"Command: `OMP_NUM_THREADS=1 .venv/bin/python tools/bench_crowd.py {' '.join(sys.argv[1:])}`".rstrip(),
        "",
        f"Principals served: {args.principals} in {seconds:.1f} s, {args.concurrency} at a time; "
        f"errors: {sum(errors.values())} {dict(errors) if errors else ''}".rstrip(),
        f"A newcomer at the end: {'served' if not late else 'FAILED ' + str(dict(late))}.",
        f"Server RSS: {early or 0:.0f} MiB after 10 principals, {end_rss:.0f} MiB at the end "
        f"({per_session:.1f} KiB per further principal and its held session).",
        f"Server log (INFO): {log_bytes / 1024:.0f} KiB.",
        "",
        markdown_table(["principals served", "RSS MiB", "threads", "open fds"], samples),
        "",
        "Pool (from /metrics): " + ("; ".join(pool_lines) if pool_lines else "(not exported)"),
        f"Server exit code after SIGTERM: {code}.",
    ]
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--principals", type=int, default=1000)
    p.add_argument("--nofile", type=int, default=256, help="the server's ulimit -n (default 256)")
    p.add_argument("--concurrency", type=int, default=8, help="principals served at once (default 8)")
    p.add_argument("--close-sessions", action="store_true", help="end each session with DELETE")
    print(anyio.run(measure, p.parse_args()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Many principals on one network server with few file descriptors: does it hold?

    OMP_NUM_THREADS=1 .venv/bin/python tools/bench_pool.py [--principals 1000] [--nofile 128] [--concurrency 8]

One `mcp-memory serve --transport http` subprocess on a fresh data directory, started under
`ulimit -n` = `--nofile`. Each of `--principals` principals (a token each, minted in-process)
opens its own MCP session, remembers one memory, recalls it and closes the session; `--concurrency`
of them at a time. Every 10% the server's resident memory, threads and open descriptors are
sampled from /proc. Printed: errors by kind, the samples (they should level off at the pool's
budget rather than grow with the principals), and the pool figures from /metrics.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import anyio
import httpx2
from bench_http import Server, call, error_kind, session, start_server
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


def limited_server(data_dir: Path, nofile: int) -> Server:
    """start_server, with the descriptor limit lowered for the child only."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, hard))
    try:
        return start_server(data_dir, "http", stateless=False)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def measure(args: argparse.Namespace) -> str:
    work = Path(tempfile.mkdtemp(prefix="bench-pool-"))
    data_dir = work / "data"
    tokens = await mint(data_dir, args.principals)
    server = limited_server(data_dir, args.nofile)
    pid = server.process.pid
    errors: Counter[str] = Counter()
    samples: list[list[str]] = []
    done = 0
    step = max(1, args.principals // 10)
    limiter = anyio.CapacityLimiter(args.concurrency)
    started = time.perf_counter()

    async def one(i: int, token: str) -> None:
        nonlocal done
        async with limiter:
            try:
                async with session(server, token, "legacy") as client:
                    await call(client, "remember", {"content": f"User {i} keeps the spare key in drawer {i}"})
                    found = await call(client, "recall", {"query": "spare key drawer", "reinforce": False})
                    if not found["hits"]:
                        errors["recall found nothing"] += 1
            except Exception as exc:  # counted by kind, never raised: the run goes on
                errors[error_kind(exc)] += 1
            done += 1
            if done % step == 0:
                rss, threads, fds = sample(pid)
                samples.append([str(done), f"{rss:.0f}", str(threads), str(fds)])
                print(f"{done} principals: {rss:.0f} MiB, {threads} threads, {fds} fds", file=sys.stderr)

    try:
        async with anyio.create_task_group() as group:
            for i, token in enumerate(tokens):
                group.start_soon(one, i, token)
        seconds = time.perf_counter() - started
        async with httpx2.AsyncClient(timeout=30) as http:
            metrics = (await http.get(f"{server.base}/metrics")).text
    finally:
        code = server.stop()
    pool_lines = [line for line in metrics.splitlines() if line.startswith("mcp_memory_pool")]
    lines = [
        f"# {args.principals} principals, one session each, on a server limited to {args.nofile} descriptors",
        "",
        f"Command: `OMP_NUM_THREADS=1 .venv/bin/python tools/bench_pool.py {' '.join(sys.argv[1:])}`".rstrip(),
        "",
        f"Principals served: {args.principals} in {seconds:.1f} s, {args.concurrency} at a time; "
        f"errors: {sum(errors.values())} {dict(errors) if errors else ''}".rstrip(),
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
    p.add_argument("--nofile", type=int, default=128, help="the server's ulimit -n (default 128)")
    p.add_argument("--concurrency", type=int, default=8, help="principals served at once (default 8)")
    print(anyio.run(measure, p.parse_args()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

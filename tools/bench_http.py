"""Load on one network server: 32 concurrent MCP clients mixing remember, recall, checkpoint and resume.

    OMP_NUM_THREADS=1 .venv/bin/python tools/bench_http.py [--quick] [--seconds 60] [--clients 32]
        [--principals 4] [--transport http|sse] [--stateless] [--mode legacy|2026-07-28]

One `mcp-memory serve --transport http` subprocess (stateful streamable HTTP unless told
otherwise) on a fresh data directory; one bearer token per client (`--principals` principals,
the clients spread evenly over them); each principal's store preloaded with `--preload` memories
and each client's task created before the clock starts. Then every client (its own SDK client,
HTTP connection pool and MCP session) calls a weighted mix of tools back to back for `--seconds`
(`--quick`: 15). Printed: throughput, p50/p95/p99 per tool, errors by kind, the server's
resident memory, the time the gateway spends verifying tokens, and the load average before and
after. The exact command is printed with the figures. Markdown goes to stdout, progress to stderr.
"""

from __future__ import annotations

import argparse
import functools
import os
import random
import re
import resource
import shlex
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import synth
import task_data
from mcp.client import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcpclient import SERVER_BIN, checkout, memory_status
from stats import markdown_table, percentile

from mcp_memory.storage.pool import principal_file

REPO = Path(__file__).resolve().parent.parent
WEIGHTS = {"recall": 40, "remember": 30, "checkpoint": 15, "resume": 15}
TOOLS = tuple(WEIGHTS)
_ANNOUNCE = re.compile(r"serving (\w+) on (http://[^\s\"]+)")


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    transport: str
    url: str
    log: Path

    @property
    def base(self) -> str:
        return self.url.rsplit("/", 1)[0]

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def _env(data_dir: Path) -> dict[str, str]:
    """The server's environment; a PYTHONPATH the bench runs under goes with it (a worktree's code on
    a shared virtualenv whose editable install names another checkout)."""
    path = os.environ.get("PYTHONPATH")  # noqa: TID251 - the bench passes its own environment on
    inherited = {"PYTHONPATH": path} if path else {}
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(data_dir.parent),
        "OMP_NUM_THREADS": "1",
        "MCP_MEMORY_DATA_DIR": str(data_dir),
        "MCP_MEMORY_LOG_LEVEL": "WARNING",
        **inherited,
    }


def server_command(source: Path | None) -> tuple[list[str], dict[str, str], Path | None]:
    """argv prefix, extra environment and working directory that run `mcp-memory`: this checkout's
    entry point, or the package in ``source`` (a baseline release) on this checkout's venv."""
    if source is None:
        return [str(SERVER_BIN)], {}, None
    return [sys.executable, "-m", "mcp_memory"], {"PYTHONPATH": str(source)}, source


def create_tokens(
    data_dir: Path,
    principals: list[str],
    per_principal: int,
    source: Path | None = None,
    backend: dict[str, str] | None = None,
) -> list[tuple[str, str]]:
    """(principal, token) per client, each from `mcp-memory token create` as an operator would (8 at a time)."""
    wanted = [(p, i) for p in principals for i in range(per_principal)]
    prefix, extra, cwd = server_command(source)
    out: list[tuple[str, str]] = []
    for start in range(0, len(wanted), 8):
        running = [
            (
                principal,
                subprocess.Popen(
                    [*prefix, "token", "create", "--principal", principal, "--label", f"bench-{i}"],
                    env={**_env(data_dir), **extra, **(backend or {})},
                    cwd=cwd,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                ),
            )
            for principal, i in wanted[start : start + 8]
        ]
        for principal, process in running:
            stdout, stderr = process.communicate(timeout=300)
            if process.returncode != 0:
                raise RuntimeError(f"token create failed: {stderr}")
            out.append((principal, stdout.strip()))
    return out


def start_server(
    data_dir: Path,
    transport: str,
    stateless: bool,
    source: Path | None = None,
    env: dict[str, str] | None = None,
    nofile: int | None = None,
) -> Server:
    """The server on ``data_dir`` (``env``: more variables, e.g. a PostgreSQL backend; ``nofile``: its
    `ulimit -n`, soft and hard as the shell sets them); its log is ``<data_dir>.log`` beside it, so
    servers on sibling directories keep theirs apart."""
    log = data_dir.parent / f"{data_dir.name}.log"
    flags = ["--stateless"] if stateless else []
    prefix, extra, cwd = server_command(source)
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [*prefix, "serve", "--transport", transport, "--port", "0", *flags],
            env={**_env(data_dir), **extra, **(env or {})},
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=sink,
            preexec_fn=None if nofile is None else functools.partial(_limit_files, nofile),
        )
    deadline = time.monotonic() + 120
    while True:
        text = log.read_text(errors="replace")
        if (found := _ANNOUNCE.search(text)) is not None:
            return Server(process, found.group(1), found.group(2), log)
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"the server did not start:\n{text}")
        time.sleep(0.05)


def _limit_files(nofile: int) -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))


@asynccontextmanager
async def session(server: Server, token: str, mode: str) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"}
    if server.transport == "sse":
        async with Client(sse_client(server.url, headers=headers), mode=mode) as client:
            yield client
        return
    async with (
        create_mcp_http_client(headers=headers) as http,
        Client(streamable_http_client(server.url, http_client=http), mode=mode) as client,
    ):
        yield client


class ToolFailed(Exception):
    """The server answered with is_error."""


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    if result.is_error:
        text = " ".join(getattr(part, "text", "") for part in result.content)
        raise ToolFailed(text)
    content: dict[str, Any] | None = result.structured_content
    if content is None:
        raise ToolFailed("no structured content")
    return content


def error_kind(exc: BaseException) -> str:
    """A short, countable name for what went wrong (never the memory text)."""
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        return error_kind(exc.exceptions[0])
    if isinstance(exc, TimeoutError):
        return "timeout"
    if isinstance(exc, ToolFailed):
        return "tool error: " + re.sub(r"\s+", " ", str(exc))[:80]
    if isinstance(exc, MCPError):
        return f"MCP error {exc.error.code}: {exc.error.message[:60]}"
    if isinstance(exc, httpx2.HTTPStatusError):
        return f"HTTP {exc.response.status_code}"
    return f"{type(exc).__name__}: {str(exc)[:60]}"


@dataclass
class Tally:
    latencies: dict[str, list[float]] = field(default_factory=lambda: {t: [] for t in TOOLS})
    errors: Counter[str] = field(default_factory=Counter)
    stored: Counter[str] = field(default_factory=Counter)  # acknowledged new rows, by principal
    sessions: int = 0


def small_tree(rng: random.Random) -> dict[str, Any]:
    """An agent-sized plan: a root, five phases (p1..p5) of six steps each."""
    phases = [
        {
            "id": f"p{p}",
            "title": f"Phase {p}: " + synth.memory(rng)[:40],
            "status": "in_progress" if p == 1 else "pending",
            "children": [
                {"id": f"p{p}.s{s}", "title": synth.memory(rng)[:60], "status": "pending", "children": []}
                for s in range(6)
            ],
        }
        for p in range(1, 6)
    ]
    return {"id": "root", "title": "Keep the service running under load", "status": "in_progress", "children": phases}


@dataclass
class Worker:
    """One client: its principal, its token, its own task, and a reproducible stream of calls."""

    n: int
    principal: str
    token: str
    seed: int
    checkpoints: int = 0

    @property
    def task_id(self) -> str:
        return f"load-{self.n:02d}"

    def first_checkpoint(self) -> dict[str, Any]:
        rng = random.Random(self.seed)
        return {
            "task_id": self.task_id,
            "goal": f"Keep client {self.n} busy under load",
            "constraints": ["no lost writes"],
            "tree": small_tree(rng),
            "current_node": "p1",
            "variables": task_data.variables(0, "p1"),
            "snapshot": task_data.build_snapshot(rng, 4_000),
            "reason": "phase_change",
        }

    def arguments(self, tool: str, rng: random.Random, i: int) -> dict[str, Any]:
        if tool == "remember":
            return {"content": f"[c{self.n}-{i}] " + synth.memory(rng)}
        if tool == "recall":
            return {"query": synth.question(rng), "k": 10}
        if tool == "checkpoint":
            self.checkpoints += 1
            node = f"p{1 + self.checkpoints % 5}"
            return {
                "task_id": self.task_id,
                "current_node": node,
                "variables": task_data.variables(self.checkpoints, node),
                "snapshot": task_data.build_snapshot(rng, 2_000),
                "reason": "manual",
            }
        return {"task_id": self.task_id}


async def preload(server: Server, workers: list[Worker], per_principal: int, mode: str, tally: Tally) -> None:
    """Each principal's memories in batches of 50 (model and index warmed), and every client's task."""
    firsts = {w.principal: w for w in reversed(workers)}
    for k, w in enumerate(firsts.values()):
        texts = synth.distinct(synth.memory, per_principal, seed=1000 + k)
        async with session(server, w.token, mode) as client:
            for i in range(0, len(texts), 50):
                result = await call(client, "remember", {"memories": [{"content": t} for t in texts[i : i + 50]]})
                tally.stored[w.principal] += int(result["stored"])
            await call(client, "recall", {"query": "warm up", "reinforce": False})
    for w in workers:
        async with session(server, w.token, mode) as client:
            await call(client, "checkpoint", w.first_checkpoint())


class Start:
    """Every client connects first; the clock starts when the last one is in its session."""

    def __init__(self, clients: int) -> None:
        self.waiting = clients
        self.everyone = anyio.Event()
        self.go = anyio.Event()
        self.deadline = float("inf")

    async def arrive(self) -> None:
        self.waiting -= 1
        if self.waiting == 0:
            self.everyone.set()
        await self.go.wait()


async def drive(server: Server, w: Worker, mode: str, start: Start, tally: Tally) -> None:
    rng = random.Random(w.seed)
    weights = [WEIGHTS[t] for t in TOOLS]
    i = 0
    waiting = True
    while waiting or time.perf_counter() < start.deadline:
        try:
            async with session(server, w.token, mode) as client:
                tally.sessions += 1
                if waiting:
                    await start.arrive()
                    waiting = False
                while time.perf_counter() < start.deadline:
                    tool = rng.choices(TOOLS, weights)[0]
                    arguments = w.arguments(tool, rng, i)
                    i += 1
                    started = time.perf_counter()
                    try:
                        with anyio.fail_after(60):
                            result = await call(client, tool, arguments)
                    except (ToolFailed, TimeoutError) as exc:
                        tally.errors[error_kind(exc)] += 1
                        continue
                    tally.latencies[tool].append(time.perf_counter() - started)
                    if tool == "remember":
                        tally.stored[w.principal] += int(result["stored"])
        except Exception as exc:  # the session broke: count it, open a new one
            tally.errors[error_kind(exc)] += 1
            if waiting:
                raise


def _status_mib(pid: int) -> tuple[float, float]:
    status = memory_status(pid)
    return status["VmRSS"], status["VmHWM"]


async def sample_rss(pid: int, stop: anyio.Event, peak: list[float]) -> None:
    while not stop.is_set():
        peak[0] = max(peak[0], _status_mib(pid)[0])
        with anyio.move_on_after(1.0):
            await stop.wait()


def scrape(server: Server) -> dict[str, float]:
    """The /metrics lines this report uses, summed over labels."""
    text = httpx2.get(server.base + "/metrics", timeout=30).text
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#") or " " not in line:
            continue
        name, value = line.rsplit(" ", 1)
        out[name] = float(value)
    return out


def metric_sum(metrics: dict[str, float], prefix: str) -> float:
    return sum(v for k, v in metrics.items() if k.startswith(prefix))


def rows_in_store(data_dir: Path, principal: str) -> int:
    conn = sqlite3.connect(principal_file(data_dir, principal))
    try:
        return int(conn.execute("SELECT COUNT(*) FROM memories").fetchone()[0])
    finally:
        conn.close()


def _ms(values: Sequence[float], q: float) -> str:
    return f"{1000 * percentile(values, q):.0f}" if values else "-"


async def run(args: argparse.Namespace, command: str, source: Path | None = None) -> str:
    return report(args, command, *await measure(args, source))


async def measure(
    args: argparse.Namespace, source: Path | None = None, backend: dict[str, str] | None = None
) -> tuple[Tally, Figures]:
    """The load on one server, on SQLite in its data directory or on the store ``backend`` names
    (``MCP_MEMORY_STORAGE__*`` variables: its tokens are minted there too, and its rows not counted)."""
    seconds = args.seconds or (15 if args.quick else 60)
    preload_n = args.preload or (100 if args.quick else 250)
    principals = [f"bench-p{k}" for k in range(args.principals)]
    per = args.clients // args.principals
    load_before = _load()
    with tempfile.TemporaryDirectory(prefix="mcp-memory-bench-http-") as tmp:
        data_dir = Path(tmp) / "data"
        _progress(f"tokens: {per} per principal for {len(principals)} principals")
        pairs = create_tokens(data_dir, principals, per, source, backend)
        server = start_server(data_dir, args.transport, args.stateless, source, backend)
        pid = server.process.pid
        tally = Tally()
        try:
            workers = [Worker(n, p, t, seed=args.seed * 1000 + n) for n, (p, t) in enumerate(pairs)]
            _progress(f"preload: {preload_n} memories per principal, one task per client")
            await preload(server, workers, preload_n, args.mode, tally)
            before = scrape(server)
            rss_before = _status_mib(pid)[0]
            start, stop, peak = Start(len(workers)), anyio.Event(), [rss_before]
            _progress(f"load: {len(workers)} clients for {seconds} s")
            async with anyio.create_task_group() as outer:
                outer.start_soon(sample_rss, pid, stop, peak)
                async with anyio.create_task_group() as clients:
                    for w in workers:
                        clients.start_soon(drive, server, w, args.mode, start, tally)
                    with anyio.fail_after(120):
                        await start.everyone.wait()
                    started = time.perf_counter()
                    start.deadline = started + seconds
                    start.go.set()
                elapsed = time.perf_counter() - started  # every call started before the deadline has ended
                stop.set()
            after = scrape(server)
            rss_end, hwm = _status_mib(pid)
        finally:
            exit_code = server.stop()
        stored_rows = {} if backend else {p: rows_in_store(data_dir, p) for p in principals}
        log_tail = server.log.read_text(errors="replace")[-3000:]
    figures = Figures(
        seconds=seconds,
        elapsed=elapsed,
        preload=preload_n,
        before=before,
        after=after,
        rss=(rss_before, max(peak[0], rss_end), rss_end, hwm),
        load=(load_before, _load()),
        exit_code=exit_code,
        stored_rows=stored_rows,
        log_tail=log_tail,
    )
    return tally, figures


@dataclass
class Figures:
    seconds: int
    elapsed: float
    preload: int
    before: dict[str, float]
    after: dict[str, float]
    rss: tuple[float, float, float, float]  # before the load, peak, end, VmHWM (MiB)
    load: tuple[str, str]
    exit_code: int
    stored_rows: dict[str, int]
    log_tail: str


def _delta(f: Figures, prefix: str) -> float:
    return metric_sum(f.after, prefix) - metric_sum(f.before, prefix)


def report(args: argparse.Namespace, command: str, tally: Tally, f: Figures) -> str:
    done = sum(len(v) for v in tally.latencies.values())
    errors = sum(tally.errors.values())
    transport = args.transport + (" (stateless)" if args.stateless else "")
    rows = [
        [
            tool,
            len(tally.latencies[tool]),
            f"{len(tally.latencies[tool]) / f.elapsed:.1f}",
            _ms(tally.latencies[tool], 50),
            _ms(tally.latencies[tool], 95),
            _ms(tally.latencies[tool], 99),
        ]
        for tool in TOOLS
    ]
    every = [x for v in tally.latencies.values() for x in v]
    rows.append(["all", done, f"{done / f.elapsed:.1f}", _ms(every, 50), _ms(every, 95), _ms(every, 99)])
    auth_n = _delta(f, "mcp_memory_auth_duration_seconds_count")
    auth_s = _delta(f, "mcp_memory_auth_duration_seconds_sum")
    auth_line = (
        f"{auth_n:.0f} verifications (every HTTP request to the endpoint), mean {1000 * auth_s / auth_n:.2f} ms"
        if auth_n
        else "not reported by this server"
    )
    lost = {p: (tally.stored[p], f.stored_rows[p]) for p in f.stored_rows if tally.stored[p] != f.stored_rows[p]}
    lines = [
        f"# Load on one {transport} server: {args.clients} clients, {f.seconds} s",
        "",
        f"Command: `{command}`",
        "",
        f"Clients: {args.clients} concurrent SDK clients ({args.mode} protocol), each its own session and "
        f"token; {args.principals} principals x {args.clients // args.principals} clients; mix "
        + ", ".join(f"{t} {w}%" for t, w in WEIGHTS.items())
        + f"; preload {f.preload} memories per principal and one task per client.",
        "",
        markdown_table(["tool", "calls", "calls/s", "p50 ms", "p95 ms", "p99 ms"], rows),
        "",
        f"Throughput: {done / f.elapsed:.1f} calls/s over {f.elapsed:.1f} s "
        f"({f.seconds} s window; calls started in it all finished).",
        f"Errors: {errors}"
        + ("" if not errors else " - " + "; ".join(f"{k}: {v}" for k, v in tally.errors.most_common())),
        f"Sessions opened: {tally.sessions} (one per client unless a session broke).",
        f"Token verification in the gateway: {auth_line}.",
        f"Server memory (MiB): VmRSS {f.rss[0]:.0f} before the load, peak {f.rss[1]:.0f}, end {f.rss[2]:.0f}; "
        f"VmHWM {f.rss[3]:.0f}.",
        "Acknowledged new memories vs rows in SQLite: "
        + (
            "not counted (another backend)"
            if not f.stored_rows
            else "all equal (" + ", ".join(f"{p} {n}" for p, n in f.stored_rows.items()) + ")"
            if not lost
            else f"**differ** {lost}"
        ),
        f"Server exit code after SIGTERM: {f.exit_code}.",
        f"Load average (1/5/15 min, {_cores()} cores): before {f.load[0]}, after {f.load[1]}.",
    ]
    if errors or f.exit_code != 0 or lost:
        lines += ["", "Server log (tail):", "", "```", f.log_tail, "```"]
    return "\n".join(lines)


def _cores() -> int:
    return os.cpu_count() or 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="15 s and a smaller preload")
    p.add_argument("--seconds", type=int, help="length of the timed window (default 60, --quick 15)")
    p.add_argument("--clients", type=int, default=32, help="concurrent clients (default 32)")
    p.add_argument("--principals", type=int, default=4, help="principals the clients spread over (default 4)")
    p.add_argument("--preload", type=int, help="memories per principal before the clock starts (default 250)")
    p.add_argument("--transport", choices=["http", "sse"], default="http", help="streamable HTTP (default) or SSE")
    p.add_argument("--stateless", action="store_true", help="streamable HTTP without sessions")
    p.add_argument("--mode", choices=["legacy", "2026-07-28"], default="legacy", help="protocol generation")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument(
        "--baseline", metavar="REV", help="first measure the server of git revision REV, then this checkout's"
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.clients % args.principals:
        raise SystemExit("--clients must be a multiple of --principals")
    if args.stateless and args.transport != "http":
        raise SystemExit("--stateless applies to --transport http only")
    shown = sys.argv[1:] if argv is None else list(argv)
    command = "OMP_NUM_THREADS=1 .venv/bin/python tools/bench_http.py " + shlex.join(shown)
    if args.baseline:
        with tempfile.TemporaryDirectory(prefix="mcp-memory-bench-baseline-") as tmp:
            source = checkout(args.baseline, Path(tmp) / "src")
            _progress(f"baseline: the server of {args.baseline}")
            print(f"## Baseline: {args.baseline}\n")
            print(anyio.run(run, args, command.strip(), source))
        print("\n## This checkout\n")
    print(anyio.run(run, args, command.strip()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

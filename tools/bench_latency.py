"""Latency, throughput and memory of `mcp-memory serve`, measured through a real MCP stdio client.

    .venv/bin/python tools/bench_latency.py [--quick] [--runs 5] [--recalls 200]

(a) spawn to `tools/list` answered, with the README's `sh tools/serve.sh` and with the binary
(`--spawn-only` runs just this);
(b) single `remember` p50/p95; (c) `recall` p50/p95 at 1k, 10k and 100k memories in one scope
(`--quick`: 1k and 10k); (d) batched `remember` throughput beside the raw embedder in-process;
(e) resident memory of the server at 10k memories after recalls. Markdown goes to stdout.

    .venv/bin/python tools/bench_latency.py --baseline REV [--rounds 3] [--sizes 10000,100000]

measures only (c), this checkout's server against git revision REV's (its package served by this
venv) on the same store, one after the other, ``--rounds`` times: the medians of each side's
p50/p95 and their ratio, so a change is judged on a shared, noisy machine.

    .venv/bin/python tools/bench_latency.py --spawn-only --baseline REV [--runs 15]

measures only (a) the same way: REV's package and this checkout's started alternately, medians
and their ratio.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import anyio
import fill_store
import synth
from mcpclient import (
    REPO,
    MemoryClient,
    ServerSpec,
    Stopwatch,
    checkout,
    memory_status,
    open_server,
    server_env,
    server_pid,
)
from stats import markdown_table, median, percentile, verdict

from mcp_memory.compose import second_opinion_config
from mcp_memory.config import load_settings
from mcp_memory.core.models import Scope
from mcp_memory.embed.loader import EmbedderConfig, Model, build_model
from mcp_memory.storage.sqlite import SqliteStore

Check = tuple[str, str, bool]
SPAWN_TARGET = 0.9  # seconds, median (issue 36; was 1.0 in issue 13)


def _ms(values: Sequence[float]) -> tuple[float, float]:
    return 1000 * percentile(values, 50), 1000 * percentile(values, 95)


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


async def spawn_once(spec: ServerSpec) -> float:
    """Seconds from spawning the process to the `tools/list` answer (the shutdown is not counted)."""
    started = time.perf_counter()
    async with open_server(spec) as client:
        tools = await client.list_tools()
        seconds = time.perf_counter() - started
    if "recall" not in tools:
        raise RuntimeError(f"tools/list answered without recall: {tools}")
    return seconds


async def bench_spawn(work: Path, runs: int, env: dict[str, str]) -> tuple[str, list[Check]]:
    _progress("spawn: first run of sh tools/serve.sh (may set up .venv)")
    first = await spawn_once(ServerSpec(Path(tempfile.mkdtemp(dir=work)), launcher="readme", extra_env=env))
    times: dict[str, list[float]] = {"readme": [], "direct": []}
    for _ in range(runs):
        for launcher in ("readme", "direct"):
            spec = ServerSpec(
                Path(tempfile.mkdtemp(dir=work)), launcher="readme" if launcher == "readme" else "direct", extra_env=env
            )
            times[launcher].append(await spawn_once(spec))
    rows = [
        ["`sh tools/serve.sh` (README), first run, not counted", 1, f"{first:.3f}", "", ""],
        *(
            [label, len(times[key]), f"{median(times[key]):.3f}", f"{min(times[key]):.3f}", f"{max(times[key]):.3f}"]
            for key, label in (("readme", "`sh tools/serve.sh` (README)"), ("direct", "`.venv/bin/mcp-memory serve`"))
        ),
    ]
    text = "### (a) spawn to `tools/list` answered (fresh data dir each run)\n\n" + markdown_table(
        ["command", "runs", "median s", "min s", "max s"], rows
    )
    readme = median(times["readme"])
    return text, [
        (f"spawn to tools/list, README command, median <= {SPAWN_TARGET} s", f"{readme:.3f} s", readme <= SPAWN_TARGET)
    ]


async def _remember_singles(client: MemoryClient, texts: list[str]) -> list[float]:
    times: list[float] = []
    for text in texts:
        with Stopwatch() as sw:
            await client.remember_one(text)
        times.append(sw.seconds)
    return times


def raw_rate(model: Model, texts: list[str]) -> float:
    with Stopwatch() as sw:
        for i in range(0, len(texts), fill_store.CHUNK):
            model.passages(texts[i : i + fill_store.CHUNK])
    return len(texts) / sw.seconds


async def bench_writes(
    work: Path, model: Model, singles: int, batched: int, env: dict[str, str]
) -> tuple[str, list[Check]]:
    """(b) single remember in a fresh store and (d) batched remember against the raw embedder."""
    texts = synth.distinct(synth.memory, singles + batched + 1, seed=99)
    warm, single_texts, batch_texts = texts[0], texts[1 : singles + 1], texts[singles + 1 :]
    async with open_server(ServerSpec(Path(tempfile.mkdtemp(dir=work)), extra_env=env)) as client:
        with Stopwatch() as sw:
            await client.remember_one(warm)  # waits for the model to load
        first = sw.seconds
        _progress(f"remember: {singles} single calls")
        single = await _remember_singles(client, single_texts)
        raw_before = raw_rate(model, batch_texts)
        _progress(f"remember: {batched} memories in batches of 100")
        outcomes: dict[str, int] = {}
        with Stopwatch() as sw:
            for i in range(0, len(batch_texts), 100):
                for item in await client.remember([{"content": t} for t in batch_texts[i : i + 100]]):
                    outcomes[item["outcome"]] = outcomes.get(item["outcome"], 0) + 1
        served = len(batch_texts) / sw.seconds
        raw_after = raw_rate(model, batch_texts)
    raw = (raw_before + raw_after) / 2
    p50, p95 = _ms(single)
    text = "\n\n".join(
        [
            "### (b) `remember`, one memory per call (fresh store, model loaded)\n\n"
            + markdown_table(
                ["calls", "p50 ms", "p95 ms", "first call (waits for the model) ms"],
                [[len(single), f"{p50:.1f}", f"{p95:.1f}", f"{1000 * first:.0f}"]],
            ),
            "### (d) batched `remember` throughput (batches of 100) vs the raw embedder, same run\n\n"
            + markdown_table(
                ["what", "memories/s"],
                [
                    [f"`remember` over MCP stdio, {len(batch_texts)} memories, outcomes {outcomes}", f"{served:.1f}"],
                    [
                        f"raw embedder in-process, `.passages()` in chunks of {fill_store.CHUNK}, before",
                        f"{raw_before:.1f}",
                    ],
                    ["raw embedder in-process, the same texts, after", f"{raw_after:.1f}"],
                    ["ratio served / mean raw", f"{100 * served / raw:.0f} %"],
                ],
            ),
        ]
    )
    return text, [
        ("remember p50 <= 40 ms (fresh store)", f"{p50:.1f} ms", p50 <= 40),
        ("batched remember >= 80% of the raw embedder rate", f"{100 * served / raw:.0f} %", served >= 0.8 * raw),
    ]


async def index_load_seconds(data_dir: Path, principal: str, dim: int, runs: int = 3) -> float:
    """The vector index's first load in a freshly opened store (the file in the page cache, as on a
    server that has served it before), median of ``runs``: what a principal's first recall pays
    after the pool evicted it."""
    times: list[float] = []
    for _ in range(runs):
        async with SqliteStore(data_dir) as store:
            with Stopwatch() as sw:
                await store.vectors.sync(Scope(principal), dim)
            times.append(sw.seconds)
            if not store.vectors.size(Scope(principal)):
                raise RuntimeError(f"the index of {data_dir} is empty")
    return median(times)


async def bench_recall_at(
    work: Path,
    model: Model,
    pool: fill_store.Pool,
    size: int,
    queries: list[str],
    singles: int,
    env: dict[str, str],
) -> tuple[list[object], list[Check]]:
    """(c) recall at one store size, then (e) the server's memory, then single remembers into that store."""
    data_dir = Path(tempfile.mkdtemp(dir=work))
    _progress(f"recall: filling a store of {size} memories")
    how = await fill_store.fill(data_dir, "bench", pool, model, size)
    load = await index_load_seconds(data_dir, "bench", model.dim)
    checks: list[Check] = []
    async with open_server(ServerSpec(data_dir, extra_env=env)) as client:
        with Stopwatch() as sw:
            await client.recall(queries[0])  # waits for the model and loads the vector index
        first = sw.seconds
        for q in queries[1:11]:
            await client.recall(q)
        _progress(f"recall: {len(queries)} timed calls at {size}")
        times: list[float] = []
        for q in queries:
            with Stopwatch() as sw:
                result = await client.recall(q)
            times.append(sw.seconds)
            if not result["hits"]:
                raise RuntimeError(f"recall returned nothing at {size} for {q!r}")
        mem = memory_status(server_pid())
        texts = synth.distinct(synth.memory, singles, seed=1234, avoid=set(pool.texts))
        s50, s95 = _ms(await _remember_singles(client, texts))
    p50, p95 = _ms(times)
    if size == 10_000:
        checks += [
            ("recall at 10k p50 <= 30 ms", f"{p50:.1f} ms", p50 <= 30),
            ("recall at 10k p95 <= 60 ms", f"{p95:.1f} ms", p95 <= 60),
            ("resident memory at 10k, model loaded, <= 250 MB", f"{mem['VmRSS']:.0f} MiB", mem["VmRSS"] <= 250),
        ]
    if size == 100_000:
        checks += [
            ("recall at 100k p95 <= 100 ms", f"{p95:.1f} ms", p95 <= 100),
            ("recall at 100k p50 <= 40 ms", f"{p50:.1f} ms", p50 <= 40),
            ("index load at 100k <= 1 s", f"{load:.2f} s", load <= 1.0),
        ]
    row: list[object] = [
        f"{size:,}",
        len(times),
        f"{p50:.1f}",
        f"{p95:.1f}",
        f"{1000 * first:.0f}",
        f"{1000 * load:.0f}",
        f"{mem['VmRSS']:.0f} / {mem['VmHWM']:.0f}",
        f"{s50:.1f} / {s95:.1f} (n={singles})",
        how,
    ]
    return row, checks


async def run(quick: bool, runs: int, recalls: int, cache_dir: Path, server_env: dict[str, str]) -> str:
    sizes = [1_000, 10_000] if quick else [1_000, 10_000, 100_000]
    pool_size = 1_000 if quick else 4_000
    model = build_model(EmbedderConfig())
    # The stores get the second model's vectors too when the server asks one (ADR 14).
    settings = load_settings(data_dir=Path(tempfile.gettempdir()), recall=_recall_overrides(server_env))
    wanted = second_opinion_config(settings)
    second = build_model(wanted) if wanted is not None else None
    sections = [
        f"# Latency benchmarks through MCP stdio ({'quick' if quick else 'full'} run)",
        "",
        f"Load average at the start (1/5/15 min, 2 cores): {_load()}",
        "",
    ]
    checks: list[Check] = []
    with tempfile.TemporaryDirectory(prefix="mcp-memory-bench-") as tmp:
        work = Path(tmp)
        text, more = await bench_spawn(work, runs, server_env)
        sections += [text, ""]
        checks += more
        text, more = await bench_writes(work, model, 50 if quick else 100, 300 if quick else 1_000, server_env)
        sections += [text, ""]
        checks += more
        pool = fill_store.embed_pool(model, pool_size, cache_dir, second)
        queries = synth.distinct(synth.question, recalls, seed=5)
        rows: list[list[object]] = []
        for size in sizes:
            row, more = await bench_recall_at(work, model, pool, size, queries, 50 if quick else 100, server_env)
            rows.append(row)
            checks += more
    pool_note = "read from cache" if pool.cached else f"embedded in {pool.seconds:.0f} s"
    sections += [
        "### (c) `recall` (k=10, reinforce=false, varied questions) and (e) server memory",
        "",
        markdown_table(
            [
                "memories in scope",
                "recalls",
                "recall p50 ms",
                "recall p95 ms",
                "first recall ms (model and index)",
                "index load ms (in-process, median of 3)",
                "server VmRSS / VmHWM MiB",
                "then `remember` x1 p50 / p95 ms",
                "how the store was filled",
            ],
            rows,
        ),
        f"\nPool: {len(pool.texts)} distinct synthetic memories (about 20% Chinese), {pool_note}; "
        "memory figures are the server process after the timed recalls (model loaded); the single `remember` "
        "calls run after that, into the same store.",
        "",
        f"Load average at the end: {_load()}",
        "",
        "## Latency targets",
        "",
        markdown_table(
            ["target (DESIGN.md section 9)", "measured", "verdict"], [[a, b, verdict(c)] for a, b, c in checks]
        ),
    ]
    return "\n".join(sections)


async def _recall_times(spec: ServerSpec, queries: list[str]) -> tuple[float, float]:
    """p50/p95 ms of ``queries`` (after 10 warm-up calls) through one server."""
    async with open_server(spec) as client:
        for q in queries[:10]:
            await client.recall(q)
        times: list[float] = []
        for q in queries:
            with Stopwatch() as sw:
                await client.recall(q)
            times.append(sw.seconds)
    return _ms(times)


async def recall_against(baseline: str, sizes: list[int], rounds: int, recalls: int, cache_dir: Path) -> str:
    """(c) alone: REV's server and this checkout's on the same stores, alternately, ``rounds`` times."""
    model = build_model(EmbedderConfig())
    wanted = second_opinion_config(load_settings(data_dir=Path(tempfile.gettempdir())))
    pool = fill_store.embed_pool(model, 1_000, cache_dir, build_model(wanted) if wanted else None)
    queries = synth.distinct(synth.question, recalls, seed=5)
    rows: list[list[object]] = []
    with tempfile.TemporaryDirectory(prefix="mcp-memory-bench-") as tmp:
        source = checkout(baseline, Path(tmp) / "baseline")
        for size in sizes:
            data_dir = Path(tempfile.mkdtemp(dir=tmp))
            _progress(f"recall: filling a store of {size} memories")
            await fill_store.fill(data_dir, "bench", pool, model, size)
            runs: dict[str, list[tuple[float, float]]] = {"baseline": [], "this checkout": []}
            for round_ in range(rounds):
                for side, src in (("baseline", source), ("this checkout", None)):
                    _progress(f"recall at {size}: {side}, round {round_ + 1} of {rounds}")
                    runs[side].append(await _recall_times(ServerSpec(data_dir, source=src), queries))
            p50s = {side: median([p for p, _ in got]) for side, got in runs.items()}
            p95s = {side: median([p for _, p in got]) for side, got in runs.items()}
            ratio = p50s["this checkout"] / p50s["baseline"]
            rows.append([f"{size:,}", *(f"{p50s[s]:.1f} / {p95s[s]:.1f}" for s in runs), f"{ratio:.2f}"])
    return "\n".join(
        [
            f"# Recall through MCP stdio: this checkout against {baseline}",
            "",
            f"Load average at the end (1/5/15 min, 2 cores): {_load()}",
            "",
            markdown_table(["memories", f"{baseline} p50 / p95 ms", "this checkout p50 / p95 ms", "p50 ratio"], rows),
            "",
            f"Each figure is the median over {rounds} rounds of {len(queries)} recalls (k=10, reinforce=false, "
            "varied questions, after 10 warm-up calls); the two servers alternate on one store filled once.",
        ]
    )


async def spawn_against(baseline: str, runs: int, env: dict[str, str]) -> str:
    """(a) alone: REV's package and this checkout's, each started as `python -m mcp_memory serve`
    with this venv, alternately ``runs`` times, so both sides see the same load."""
    times: dict[str, list[float]] = {"baseline": [], "this checkout": []}
    with tempfile.TemporaryDirectory(prefix="mcp-memory-bench-") as tmp:
        work = Path(tmp)
        sources = {"baseline": checkout(baseline, work / "baseline"), "this checkout": REPO}
        for source in sources.values():  # a first start of each side, not counted (page cache, .pyc)
            await spawn_once(ServerSpec(Path(tempfile.mkdtemp(dir=work)), source=source, extra_env=env))
        for round_ in range(runs):
            _progress(f"spawn: round {round_ + 1} of {runs}")
            for side, source in sources.items():
                spec = ServerSpec(Path(tempfile.mkdtemp(dir=work)), source=source, extra_env=env)
                times[side].append(await spawn_once(spec))
    rows = [[side, len(got), f"{median(got):.3f}", f"{min(got):.3f}", f"{max(got):.3f}"] for side, got in times.items()]
    ratio = median(times["this checkout"]) / median(times["baseline"])
    return "\n".join(
        [
            f"# Spawn to `tools/list` through MCP stdio: this checkout against {baseline}",
            "",
            f"Load average at the end (1/5/15 min, 2 cores): {_load()}",
            "",
            markdown_table(["package", "runs", "median s", "min s", "max s"], rows),
            "",
            f"Median ratio this checkout / {baseline}: {ratio:.2f}. Both run `python -m mcp_memory serve` with "
            "this venv, a fresh data directory each run, alternating.",
        ]
    )


async def spawn_report(runs: int, env: dict[str, str]) -> str:
    with tempfile.TemporaryDirectory(prefix="mcp-memory-bench-") as tmp:
        text, checks = await bench_spawn(Path(tmp), runs, env)
    verdicts = markdown_table(["target", "measured", "verdict"], [[a, b, verdict(c)] for a, b, c in checks])
    return f"Load average: {_load()}\n\n{text}\n\n{verdicts}"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="1k and 10k stores only, fewer calls")
    p.add_argument("--runs", type=int, default=5, help="spawn runs per command (or per side with --baseline)")
    p.add_argument("--spawn-only", action="store_true", help="only (a): spawn to tools/list")
    p.add_argument("--recalls", type=int, help="timed recalls per store size (default 200, --quick 100)")
    p.add_argument(
        "--cache-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "mcp-memory-bench-cache",
        help="where the embedded pool is cached between runs",
    )
    p.add_argument(
        "--baseline",
        metavar="REV",
        help="only (c), or with --spawn-only only (a): REV's server against this checkout's, alternately",
    )
    p.add_argument("--rounds", type=int, default=3, help="with --baseline: rounds per side (default 3)")
    p.add_argument("--sizes", default="10000,100000", help="with --baseline: store sizes (default 10000,100000)")
    p.add_argument(
        "--server-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="extra MCP_MEMORY_* variable for every server (MCP_MEMORY_RECALL__SECOND_OPINION=false)",
    )
    return p


def _recall_overrides(env: dict[str, str]) -> dict[str, str]:
    """The [recall] keys among the servers' variables, for the settings this process reads."""
    prefix = "MCP_MEMORY_RECALL__"
    return {name[len(prefix) :].lower(): value for name, value in env.items() if name.startswith(prefix)}


def _revision(rev: str) -> str:
    named = subprocess.run(["git", "rev-parse", "--short", rev], capture_output=True, text=True, cwd=REPO)
    if named.returncode != 0:
        raise SystemExit(f"--baseline {rev!r} is not a git revision here: {named.stderr.strip()}")
    return named.stdout.strip()


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    recalls = args.recalls or (100 if args.quick else 200)
    baseline = _revision(args.baseline) if args.baseline else None
    if args.spawn_only:
        if baseline is not None:
            print(anyio.run(spawn_against, baseline, args.runs, server_env(args.server_env)))
        else:
            print(anyio.run(spawn_report, args.runs, server_env(args.server_env)))
        return 0
    if baseline is not None:
        sizes = [int(size) for size in args.sizes.split(",")]
        recalls = args.recalls or 100
        print(anyio.run(recall_against, baseline, sizes, args.rounds, recalls, args.cache_dir))
        return 0
    print(anyio.run(run, args.quick, args.runs, recalls, args.cache_dir, server_env(args.server_env)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

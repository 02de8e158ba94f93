"""What `[storage] durability = "full"` costs in write rate, against "normal", in one run.

    OMP_NUM_THREADS=1 .venv/bin/python tools/bench_durability.py [--memories 300] [--rounds 3]

In-process, on fresh data directories under the system's temp dir (put TMPDIR on the disk you
serve from: a tmpfs syncs for free): each round remembers `--memories` memories one call at a
time, then again as batches of 20, with each setting in turn (normal, full, normal, full, ...).
Printed: memories per second, median over the rounds, per setting and call shape, and the ratio
full/normal of each round's pair.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

from mcp_memory.config import load_settings
from mcp_memory.core.models import MemoryDraft, Scope
from mcp_memory.mcp.server import open_server
from mcp_memory.services.memory import CallContext


async def rate(root: Path, durability: str, memories: int, batch: int) -> float:
    settings = load_settings(data_dir=root / f"{durability}-{batch}-{time.monotonic_ns()}", principal="bench")
    settings = settings.model_copy(update={"storage": settings.storage.model_copy(update={"durability": durability})})
    async with open_server(settings, warm=False) as runtime:
        await runtime.embedder.ready()
        scope = Scope("bench")
        texts = [f"Bench memory {i}: the build on runner {i % 7} took {i % 60} minutes" for i in range(memories)]
        started = time.perf_counter()
        for start in range(0, memories, batch):
            items = [MemoryDraft(content=text) for text in texts[start : start + batch]]
            await runtime.memory.remember(scope, items, CallContext())
        return memories / (time.perf_counter() - started)


async def measure(args: argparse.Namespace) -> str:
    root = Path(tempfile.mkdtemp(prefix="bench-durability-"))
    figures: dict[tuple[str, int], list[float]] = {}
    for _ in range(args.rounds):
        for batch in (1, 20):
            for durability in ("normal", "full"):
                figures.setdefault((durability, batch), []).append(await rate(root, durability, args.memories, batch))
                print(f"{durability} batch {batch}: {figures[durability, batch][-1]:.1f}/s", file=sys.stderr)
    lines = [
        f"Command: `OMP_NUM_THREADS=1 .venv/bin/python tools/bench_durability.py {' '.join(sys.argv[1:])}`".rstrip(),
        f"Data under {root}",
        "",
        "| call shape | normal (memories/s) | full (memories/s) | full/normal (median of pairs) |",
        "|---|---|---|---|",
    ]
    for batch in (1, 20):
        normal, full = figures["normal", batch], figures["full", batch]
        pairs = statistics.median(f / n for f, n in zip(full, normal, strict=True))
        shape = "one per call" if batch == 1 else f"batches of {batch}"
        lines.append(f"| {shape} | {statistics.median(normal):.1f} | {statistics.median(full):.1f} | {pairs:.2f} |")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--memories", type=int, default=300)
    p.add_argument("--rounds", type=int, default=3)
    print(anyio.run(measure, p.parse_args()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

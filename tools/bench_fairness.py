"""One principal's heavy batch against another principal's recalls, on one network server.

    OMP_NUM_THREADS=1 .venv/bin/python tools/bench_fairness.py [--recalls 30] [--batch 10] [--chars 16000]

One `mcp-memory serve --transport http` subprocess on a fresh data directory, two principals
with a token each. First principal B recalls `--recalls` times alone (idle p50/p95). Then
principal A sends one `remember` of `--batch` memories of `--chars` characters without spaces
(words run together: the tokenizer's worst case) while B goes on recalling back to back: B's
p50/p95 during the batch, the batch's own time, and one such memory alone. Markdown to stdout.
"""

from __future__ import annotations

import argparse
import itertools
import random
import string
import sys
import tempfile
import time
from pathlib import Path

import anyio
from bench_http import call, create_tokens, session, start_server
from stats import markdown_table, median, percentile

from mcp_memory.embed.loader import Embedder, EmbedderConfig


def run_together(rng: random.Random, chars: int) -> str:
    words = ("".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 9))) for _ in iter(int, 1))
    text = ""
    for word in words:
        text += word
        if len(text) >= chars:
            return text[:chars]
    return text


async def embed_alone(rng: random.Random, chars: int, runs: int = 5) -> float:
    """Median seconds for the default embedder to embed one such memory, in this process."""
    embedder = Embedder(EmbedderConfig())
    await embedder.ready()
    seconds = []
    for _ in range(runs):
        text = run_together(rng, chars)
        started = time.perf_counter()
        await embedder.passages([text])
        seconds.append(time.perf_counter() - started)
    return median(seconds)


async def measure(args: argparse.Namespace) -> str:
    rng = random.Random(args.seed)
    embed_seconds = await embed_alone(rng, args.chars)
    work = Path(tempfile.mkdtemp(prefix="bench-fair-"))
    data_dir = work / "data"
    (a_token, b_token) = (token for _, token in create_tokens(data_dir, ["heavy", "light"], 1))
    server = start_server(data_dir, "http", stateless=False)
    try:
        async with session(server, a_token, "legacy") as heavy, session(server, b_token, "legacy") as light:
            for i in range(20):
                await call(light, "remember", {"content": f"Note {i}: the staging cluster {i} is called falcon-{i}"})
            await call(heavy, "recall", {"query": "warm up", "reinforce": False})

            asked = itertools.count()

            async def recall_once() -> float:
                # a new question each time: a repeated one comes from the server's cache, not the model
                query = f"what is staging cluster {next(asked)} called"
                started = time.perf_counter()
                await call(light, "recall", {"query": query, "reinforce": False})
                return time.perf_counter() - started

            idle = [await recall_once() for _ in range(args.recalls)]

            started = time.perf_counter()
            await call(heavy, "remember", {"content": run_together(rng, args.chars)})
            single = time.perf_counter() - started

            batch = [{"content": run_together(rng, args.chars)} for _ in range(args.batch)]
            during: list[float] = []
            batch_seconds: list[float] = []

            async def send_batch() -> None:
                begun = time.perf_counter()
                await call(heavy, "remember", {"memories": batch})
                batch_seconds.append(time.perf_counter() - begun)

            async with anyio.create_task_group() as group:
                group.start_soon(send_batch)
                await anyio.sleep(0.05)
                while not batch_seconds:
                    during.append(await recall_once())
    finally:
        server.stop()

    def ms(values: list[float], q: float) -> str:
        return f"{1000 * percentile(values, q):.0f}"

    rows = [
        ["B's recall, alone", str(len(idle)), ms(idle, 50), ms(idle, 95)],
        [f"B's recall, during A's batch of {args.batch}", str(len(during)), ms(during, 50), ms(during, 95)],
    ]
    ratio = percentile(during, 95) / percentile(idle, 95)
    lines = [
        f"# Fairness: {args.batch} memories of {args.chars} characters without spaces beside another's recalls",
        "",
        f"Command: `OMP_NUM_THREADS=1 .venv/bin/python tools/bench_fairness.py {' '.join(sys.argv[1:])}`".rstrip(),
        "",
        markdown_table(["what", "calls", "p50 ms", "p95 ms"], rows),
        "",
        f"During/idle p95: {ratio:.2f}x (target < 3x and < 1 s).",
        f"A's batch answered in {batch_seconds[0]:.1f} s (target < 20 s).",
        f"One such memory: embedded in {embed_seconds:.2f} s (median of 5, in process; target < 1 s), "
        f"remembered in {single:.2f} s through HTTP.",
    ]
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--recalls", type=int, default=30, help="B's recalls while idle (default 30)")
    p.add_argument("--batch", type=int, default=10, help="memories in A's batch (default 10)")
    p.add_argument("--chars", type=int, default=16_000, help="characters per memory (default 16000)")
    p.add_argument("--seed", type=int, default=7)
    print(anyio.run(measure, p.parse_args()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

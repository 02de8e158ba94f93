"""Every benchmark and evaluation in one command, all through a real MCP stdio client.

    .venv/bin/python tools/bench.py [--quick] [--data-dir ../shared/data]

Runs the retrieval evaluation (LoCoMo with the BM25 baseline, the bilingual set) and then the
latency benchmarks, and prints every table as Markdown. ``--quick`` limits the latency run to the
1k and 10k stores; the retrieval evaluation is the same in both modes (it is what the targets
are judged on).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import anyio
import bench_latency
import eval_retrieval
from mcpclient import SHARED_DATA
from stats import RESAMPLES


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="latency at 1k and 10k only, fewer calls")
    p.add_argument("--data-dir", type=Path, default=SHARED_DATA, help="the shared data folder (read in place)")
    p.add_argument("--skip-eval", action="store_true", help="latency benchmarks only")
    p.add_argument("--skip-latency", action="store_true", help="retrieval evaluation only")
    args = p.parse_args(argv)
    started = time.perf_counter()
    if not args.skip_eval:
        print(anyio.run(eval_retrieval.run, args.data_dir, None, 32_000, RESAMPLES, {}), flush=True)
        print(flush=True)
    if not args.skip_latency:
        cache = Path(tempfile.gettempdir()) / "mcp-memory-bench-cache"
        recalls = 100 if args.quick else 200
        print(anyio.run(bench_latency.run, args.quick, 5, recalls, cache, {}), flush=True)
    print(f"\n(total {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

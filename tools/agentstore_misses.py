"""Why recall missed: every agentstore dev question whose gold memory was not first, with each
signal's share of the fused evidence for the memory ranked first and for the gold, through a real
`mcp-memory serve` (recall with ``explain=true``, ``floor=false``, the whole store returned).

    OMP_NUM_THREADS=1 .venv/bin/python tools/agentstore_misses.py [--data-dir ../shared/data]
        [--server-env MCP_MEMORY_NAME=VALUE] [--save rows.json]

Prints Markdown to stdout (progress to stderr). A miss's *gap* is the first memory's fused evidence
minus the gold's (in the dense side's standard deviations, ADR 10); its *decider* is the one signal
(dense, keyword, second opinion, understanding) whose share alone is larger than the gap, so that
without it the gold would have led, or "none alone" when no single signal is. The keyword share is what is
left of fused after the other three: the BM25 evidence times its weight, with the share a Chinese
question gives English memories (``scoring.keyword_blind``). Read it with ADR 10 and 14; it
searches no weight.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
from mcpclient import SHARED_DATA, ServerSpec, open_server, server_env

SIGNALS = ("dense", "keyword", "second", "understanding")
_CJK = re.compile(r"[\u3400-\u9fff]")


async def served(data_dir: Path, env: dict[str, str]) -> list[dict[str, Any]]:
    """One row per question: the question, its store's size and every memory recall returned, in order."""
    data = orjson.loads((data_dir / "agentstore-dev.json").read_bytes())
    rows: list[dict[str, Any]] = []
    work = Path(tempfile.mkdtemp(prefix="agentstore-misses-"))
    for store in data["stores"]:
        spec = ServerSpec(data_dir=Path(tempfile.mkdtemp(dir=work)), principal="agent", extra_env=env)
        async with open_server(spec) as client:
            memories = store["memories"]
            results = await client.remember([{"content": m["text"]} for m in memories])
            file_id = {str(r["id"]): m["id"] for m, r in zip(memories, results, strict=True) if r.get("id")}
            for query in store["queries"]:
                answer = await client.recall(query["q"], k=50, explain=True, floor=False)
                hits = [
                    {"file_id": file_id.get(h["id"]), "text": h["text"], "signals": h["signals"]}
                    for h in answer["hits"]
                ]
                rows.append({"store": store["id"], "size": len(memories), "query": query, "hits": hits})
        print(f"{store['id']} done", file=sys.stderr, flush=True)
    return rows


def shares(signals: dict[str, Any]) -> dict[str, float]:
    """Each signal's share of a memory's fused evidence, and the fused evidence itself."""
    dense = signals.get("dense_z") or 0.0
    second = signals.get("second_opinion") or 0.0
    understanding = signals.get("understanding") or 0.0
    fused = float(signals["fused"])
    keyword = fused - dense - second - understanding
    return {"dense": dense, "keyword": keyword, "second": second, "understanding": understanding, "fused": fused}


def gold_rank(row: dict[str, Any]) -> int | None:
    gold = set(row["query"]["gold"])
    return next((i for i, hit in enumerate(row["hits"], start=1) if hit["file_id"] in gold), None)


def decider(first: dict[str, float], gold: dict[str, float]) -> str:
    """The one signal without whose share the gold would have led, or "none alone"."""
    gap = first["fused"] - gold["fused"]
    alone = [s for s in SIGNALS if first[s] - gold[s] > gap]
    return alone[0] if len(alone) == 1 else ("none alone" if not alone else "+".join(alone))


def _script(text: str) -> str:
    return "zh" if _CJK.search(text) else "en"


def _band(gap: float) -> str:
    return "< 0.5" if gap < 0.5 else "0.5-1" if gap < 1 else "1-2" if gap < 2 else ">= 2"


def report(rows: list[dict[str, Any]]) -> None:
    by: dict[str, Counter[str]] = {"decider": Counter(), "gap": Counter(), "first's script": Counter()}
    print("# agentstore dev: questions whose gold was not first\n")
    shares_named = " / ".join(SIGNALS)
    print(f"| set | question | gold rank | gap | decider | first ({shares_named}) | gold (same) |")
    print("|---|---|---|---|---|---|---|")
    misses = 0
    for row in rows:
        rank = gold_rank(row)
        if rank == 1 or rank is None:
            continue
        misses += 1
        first, gold = shares(row["hits"][0]["signals"]), shares(row["hits"][rank - 1]["signals"])
        gap, why = first["fused"] - gold["fused"], decider(first, gold)
        same = _script(row["hits"][0]["text"]) == _script(row["query"]["q"])
        by["decider"][why] += 1
        by["gap"][_band(gap)] += 1
        by["first's script"]["the question's" if same else "the other"] += 1
        parts = " / ".join(f"{first[s]:.2f}" for s in SIGNALS)
        gold_parts = " / ".join(f"{gold[s]:.2f}" for s in SIGNALS)
        first_text = row["hits"][0]["text"][:48]
        print(
            f"| {row['query']['set']} | {row['query']['q']} | {rank} | {gap:.2f} | {why} | {first_text}: {parts} "
            f"| {gold_parts} |"
        )
    print(f"\n{misses} of {len(rows)} questions missed at 1.\n")
    for name, counts in by.items():
        print(f"- by {name}: " + ", ".join(f"{key} {n}" for key, n in counts.most_common()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=SHARED_DATA)
    parser.add_argument("--server-env", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--save", type=Path, help="also write every row (all hits, all signals) as JSON")
    args = parser.parse_args()
    rows = asyncio.run(served(args.data_dir, server_env(args.server_env)))
    if args.save:
        args.save.write_bytes(orjson.dumps(rows))
    report(rows)


if __name__ == "__main__":
    main()

"""The small-store set through a real `mcp-memory serve`: 40 stores of 12-27 agent-phrased memories.

Protocol (``../shared/data/README.md``): one fresh store per entry of ``stores``, its memories
remembered in one batch with the file's id in metadata; each of its questions asked with
``recall(k=10, reinforce=false)``; hit@1, R@3 and MRR@10 per language pair. ``role`` and ``attr``
are never sent to the server.

The relevance floor is measured here too: each store is asked five questions taken from other
stores about attributes it lacks (chosen by ``attr``, which only the harness reads); a store
"abstains" when recall returns no hit. The gold cut by the floor is the share of ordinary
questions whose gold memory the served list lost although the unfloored ranking held it.
"""

from __future__ import annotations

import random
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from mcpclient import MemoryClient, ServerSpec, open_server
from strength_curve import StrengthLog

SETS = ("en", "zh", "en->zh", "zh->en")
FOREIGN_PER_STORE = 5


@dataclass(frozen=True)
class QueryScore:
    store: str
    query: str
    set: str
    rank: int | None  # 1-based rank of the first gold memory in the top 10, None when absent

    def hit(self, k: int) -> float:
        return 1.0 if self.rank is not None and self.rank <= k else 0.0

    @property
    def reciprocal(self) -> float:
        return 1.0 / self.rank if self.rank is not None else 0.0


@dataclass
class AgentLog:
    stores: int = 0
    memories: int = 0
    merged: int = 0
    foreign_asked: int = 0
    foreign_empty: int = 0  # foreign questions answered with no hit at all
    floored: int = 0  # foreign questions whose answer left memories out below the floor (and said so)
    floor_cut: int = 0  # questions whose gold the unfloored top 10 held and the served list lost
    misses: list[tuple[QueryScore, list[str]]] = field(default_factory=list)
    strength: StrengthLog = field(default_factory=StrengthLog)  # foreign questions absent, own ones answered


def foreign_questions(stores: list[dict[str, Any]], store: dict[str, Any], rng: random.Random) -> list[str]:
    """Five questions from other stores about attributes this store has no memory of."""
    own = {m.get("attr") for m in store["memories"]}
    pool = [q["q"] for other in stores if other is not store for q in other["queries"] if q["attr"] not in own]
    return rng.sample(pool, min(FOREIGN_PER_STORE, len(pool)))


async def _ask(client: MemoryClient, query: str, **more: Any) -> dict[str, Any]:
    return await client.recall(query, k=10, budget_tokens=32_000, explain=True, **more)


async def evaluate(
    data_dir: Path, work: Path, server_env: dict[str, str], source: Path | None = None
) -> tuple[list[QueryScore], AgentLog]:
    data = orjson.loads((data_dir / "agentstore-dev.json").read_bytes())
    stores: list[dict[str, Any]] = data["stores"]
    rng = random.Random(20_261_130)
    log = AgentLog()
    scores: list[QueryScore] = []
    label = "baseline" if source else "ours"
    print(f"agentstore ({label}): {len(stores)} stores", file=sys.stderr, flush=True)
    for store in stores:
        spec = ServerSpec(
            data_dir=Path(tempfile.mkdtemp(prefix=f"agent-{store['id']}-", dir=work)),
            principal="agent",
            extra_env=server_env,
            source=source,
        )
        async with open_server(spec) as client:
            results = await client.remember(
                [{"content": m["text"], "metadata": {"file_id": m["id"]}} for m in store["memories"]]
            )
            file_ids_of: dict[str, set[str]] = {}
            for memory, result in zip(store["memories"], results, strict=True):
                log.merged += result["outcome"] == "merged"
                if result.get("id"):
                    file_ids_of.setdefault(str(result["id"]), set()).add(str(memory["id"]))
            log.stores += 1
            log.memories += len(store["memories"])
            for query in store["queries"]:
                served = await _ask(client, query["q"])
                ranked = [file_ids_of.get(hit["id"], set()) for hit in served["hits"]]
                gold = set(query["gold"])
                rank = next((i for i, ids in enumerate(ranked, start=1) if ids & gold), None)
                score = QueryScore(store["id"], query["q"], query["set"], rank)
                scores.append(score)
                if source is None:
                    log.strength.add(served["hits"], str(served.get("strength")), absent=False, gold_first=rank == 1)
                if source is None and rank is None:  # the baseline release has no floor
                    unfloored = await _ask(client, query["q"], floor=False)
                    log.floor_cut += any(file_ids_of.get(h["id"], set()) & gold for h in unfloored["hits"])
                if rank != 1:
                    top = served["hits"][0]["text"] if served["hits"] else "(nothing)"
                    log.misses.append((score, [top]))
            for question in foreign_questions(stores, store, rng):
                served = await _ask(client, question)
                log.foreign_asked += 1
                log.foreign_empty += not served["hits"]
                log.floored += bool(served.get("below_floor"))
                if source is None:
                    log.strength.add(served["hits"], str(served.get("strength")), absent=True, gold_first=False)
    return scores, log

"""The bilingual dev set through a real `mcp-memory serve`: 600 memories in one fresh store, 80 queries.

Each memory keeps the file's id in metadata and in a map from the id ``remember`` returned, so a
memory merged into another still counts when the one it merged into is recalled.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import after_maintain
import orjson
from mcpclient import ServerSpec, open_server

BATCH = 100
# The order the report uses; a set the file adds later is appended after these.
SETS = ("en", "zh", "zh->en", "en->zh", "kw")
SET_NAMES = {
    "en": "EN paraphrase",
    "zh": "ZH paraphrase",
    "zh->en": "cross-lingual ZH query, EN memory",
    "en->zh": "cross-lingual EN query, ZH memory",
    "kw": "identifier lookup",
}


@dataclass(frozen=True)
class QueryScore:
    query: str
    set: str
    gold: str
    rank: int | None  # 1-based rank of the gold memory in the top 10, None when absent
    after: dict[str, dict[str, int | None]] = field(default_factory=dict)  # horizon -> credit mode -> rank


@dataclass
class BilingualLog:
    outcomes: Counter[str] = field(default_factory=Counter)
    merged_into_other: list[tuple[str, str]] = field(default_factory=list)
    misses: list[QueryScore] = field(default_factory=list)
    horizons: list[after_maintain.Horizon] = field(default_factory=list)


def _rank(ranked: list[set[str]], gold: str) -> int | None:
    return next((i for i, keys in enumerate(ranked, start=1) if gold in keys), None)


async def evaluate(
    data_dir: Path,
    work: Path,
    budget_tokens: int,
    server_env: dict[str, str],
    after: bool = False,
    source: Path | None = None,
) -> tuple[list[QueryScore], BilingualLog]:
    data = orjson.loads((data_dir / "bilingual-dev.json").read_bytes())
    memories = data["memories"]
    log = BilingualLog()
    spec = ServerSpec(
        data_dir=Path(tempfile.mkdtemp(prefix="bilingual-", dir=work)),
        principal="bilingual",
        extra_env=server_env,
        source=source,
    )
    print(f"bilingual: {len(memories)} memories, {len(data['queries'])} queries", file=sys.stderr, flush=True)
    file_ids_of: dict[str, set[str]] = {}  # memory id -> the file ids it stands for
    scores: list[QueryScore] = []
    async with open_server(spec) as client:
        for start in range(0, len(memories), BATCH):
            batch = memories[start : start + BATCH]
            results = await client.remember([{"content": m["text"], "metadata": {"file_id": m["id"]}} for m in batch])
            for memory, result in zip(batch, results, strict=True):
                log.outcomes[str(result["outcome"])] += 1
                memory_id = result.get("id")
                if memory_id is None:
                    continue
                if result["outcome"] == "merged":
                    log.merged_into_other.append((memory["id"], ",".join(sorted(file_ids_of.get(memory_id, set())))))
                file_ids_of.setdefault(str(memory_id), set()).add(str(memory["id"]))
        loaded_at = time.time()
        for query in data["queries"]:
            served = await client.recall(query["q"], k=10, budget_tokens=budget_tokens)
            rank = next(
                (i for i, hit in enumerate(served["hits"], start=1) if query["gold"] in file_ids_of.get(hit["id"], ())),
                None,
            )
            score = QueryScore(query["q"], query["set"], query["gold"], rank)
            scores.append(score)
            if rank is None or rank > 1:
                log.misses.append(score)
        if after:
            text_of = {str(m["id"]): str(m["text"]) for m in memories}
            credit = after_maintain.Credit(file_ids_of, text_of)
            queries = [str(q["q"]) for q in data["queries"]]
            log.horizons = await after_maintain.run(
                client, spec, queries, credit, budget_tokens, loaded_at, "bilingual"
            )
            for i, (score, query) in enumerate(zip(scores, data["queries"], strict=True)):
                for h in log.horizons:
                    score.after[h.name] = {
                        mode: _rank(h.ranked[mode][i], str(query["gold"])) for mode in after_maintain.MODES
                    }
    return scores, log


def hit_at(score: QueryScore, k: int) -> float:
    return 1.0 if score.rank is not None and score.rank <= k else 0.0


def ordered_sets(scores: list[QueryScore]) -> list[str]:
    present = {s.set for s in scores}
    return [s for s in SETS if s in present] + sorted(present.difference(SETS))

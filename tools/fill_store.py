"""Large stores for the recall benchmarks, written in-process through ``SqliteStore.apply``.

Filling 100k memories through ``remember`` would spend most of the run embedding. Instead a pool
of distinct synthetic memories is embedded once with the server's own model; a store no larger
than the pool gets those texts with their exact vectors, and a larger store adds restatements of
pool texts (``synth.variant``) that reuse the vector of the text they restate. The rows are
built the way ``MemoryService.remember`` builds them, and the store records the real model id,
so the server opens it as its own. Only the recall measurement itself goes through MCP stdio.
"""

from __future__ import annotations

import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import synth

from mcp_memory.core.ids import new_id
from mcp_memory.core.models import MemoryRecord, NewMemory, NewOccurrence, Provenance, Scope, SecondVector
from mcp_memory.core.text import language, normalize, segment_for_index
from mcp_memory.embed.loader import Model
from mcp_memory.services import rules
from mcp_memory.services.intake import content_hash
from mcp_memory.storage.records import RecordStore
from mcp_memory.storage.sqlite import SqliteStore

KINDS = ("fact", "fact", "fact", "preference", "decision", "event", "observation")
POOL_SEED = 7
CHUNK = 32  # the server's embedding.batch_size


@dataclass(frozen=True)
class Pool:
    texts: list[str]
    vectors: np.ndarray
    seconds: float  # embedding time, 0 when read from the cache
    cached: bool
    second: np.ndarray | None = None  # the second model's vectors (ADR 14), when the server asks one
    second_id: str | None = None


def _embedded(model: Model, texts: list[str], cache_dir: Path) -> tuple[np.ndarray, float, bool]:
    """``texts``' vectors from ``model`` (cached per model id, size and seed), embedding seconds, cached."""
    cached = cache_dir / f"{model.model_id.replace('/', '_')}-{len(texts)}-{POOL_SEED}.npy"
    if cached.is_file():
        vectors = np.load(cached)
        if vectors.shape == (len(texts), model.dim):
            return vectors, 0.0, True
    print(f"embedding a pool of {len(texts)} synthetic memories in-process...", file=sys.stderr, flush=True)
    started = time.perf_counter()
    parts = [model.passages(texts[i : i + CHUNK]) for i in range(0, len(texts), CHUNK)]
    seconds = time.perf_counter() - started
    vectors = np.concatenate(parts).astype(np.float32)
    cache_dir.mkdir(parents=True, exist_ok=True)
    np.save(cached, vectors)
    return vectors, seconds, False


def embed_pool(model: Model, size: int, cache_dir: Path, second: Model | None = None) -> Pool:
    """``size`` distinct synthetic memories and their vectors, from ``second`` too when given."""
    texts = synth.distinct(synth.memory, size, POOL_SEED)
    vectors, seconds, cached = _embedded(model, texts, cache_dir)
    if second is None:
        return Pool(texts, vectors, seconds, cached)
    others, more, also = _embedded(second, texts, cache_dir)
    return Pool(texts, vectors, seconds + more, cached and also, others, second.model_id)


def _row(text: str, vector: np.ndarray, r: random.Random, now: float, second: SecondVector | None) -> NewMemory:
    content = normalize(text)
    kind = r.choice(KINDS)
    created = now - r.uniform(0, 120 * 86_400)  # a few months of history: recency varies as in real use
    provenance = Provenance(client_name="bench-fill", client_version=None, transport="in-process")
    record = MemoryRecord(
        id=new_id(),
        namespace=None,
        kind=kind,
        content=content,
        key=None,
        tags=[],
        metadata={},
        importance=rules.estimate_importance(content, kind),
        pinned=False,
        occurred_at=created,
        created_at=created,
        last_accessed_at=None,
        access_count=0,
        valid_from=created,
        valid_to=None,
        superseded_by=None,
        expires_at=None,
        tier="active",
        level=0,
        language=language(content),
        session_key=None,
        task_id=None,
        provenance=provenance,
        content_hash=content_hash(None, content),
    )
    occurrence = NewOccurrence(new_id(), None, created, {}, provenance)
    return NewMemory(record, vector.astype(np.float32), segment_for_index(content), occurrence, second=second)


async def fill_into(store: RecordStore, principal: str, pool: Pool, model: Model, count: int, offset: int = 0) -> None:
    """Write ``count`` memories for ``principal`` into an open store (SQLite or PostgreSQL), from the
    pool's texts starting at ``offset`` (so principals of one run hold different memories)."""
    scope = Scope(principal)
    r = random.Random(count + offset)
    now = time.time()
    size = len(pool.texts)
    await store.check_model(scope, model.model_id, model.dim)
    for start in range(0, count, 2_000):
        rows = []
        for i in range(start, min(start + 2_000, count)):
            base = (i + offset) % size
            text = pool.texts[base] if i < size else synth.variant(pool.texts[base], i)
            other = None
            if pool.second is not None and pool.second_id is not None:
                other = SecondVector(pool.second_id, pool.second[base].astype(np.float32))
            rows.append(_row(text, pool.vectors[base], r, now, other))
        await store.apply(scope, rows, [])


async def fill(data_dir: Path, principal: str, pool: Pool, model: Model, count: int) -> str:
    """Write ``count`` memories for ``principal``; returns how they were made, for the report."""
    started = time.perf_counter()
    size = len(pool.texts)
    async with SqliteStore(data_dir) as store:
        await fill_into(store, principal, pool, model, count)
    seconds = time.perf_counter() - started
    exact = min(count, size)
    how = f"{exact} pool texts with their own vectors"
    if count > size:
        how += f" + {count - size} restatements reusing the vector of the text they restate"
    return f"{how}; written in-process via SqliteStore.apply in {seconds:.0f} s"

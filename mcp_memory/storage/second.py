"""The second model's vectors (ADR 14): written with each memory, read for recall's first candidates.

A file's second vectors all come from one model, named in ``meta`` by the first write that stores
one. A write from another model stores none (they would not be comparable) and a read for another
model finds none: recall then ranks by the first model alone until `mcp-memory reindex` rewrites
them. Memories written without one (summaries, imports, files from before) get theirs from the
lifecycle pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import aiosqlite

from mcp_memory.core.models import NewMemory
from mcp_memory.storage.rows import blob, in_chunks, read_together, rows_of

if TYPE_CHECKING:
    from mcp_memory.core.models import Vector

MODEL_KEY = "second_model"


async def _model(conn: aiosqlite.Connection) -> str | None:
    rows = list(await conn.execute_fetchall("SELECT value FROM meta WHERE key = ?", (MODEL_KEY,)))
    return str(rows[0][0]) if rows else None


async def claim(conn: aiosqlite.Connection, model_id: str) -> bool:
    """Whether the file's second vectors may be ``model_id``'s: they are, or the file has none yet
    (``model_id`` is named now)."""
    await conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES (?, ?)", (MODEL_KEY, model_id))
    return await _model(conn) == model_id


async def writable(conn: aiosqlite.Connection, inserts: Sequence[NewMemory]) -> str | None:
    """The model whose vectors this write may store; None when the inserts carry none or another
    model's than the file's."""
    models = {item.second.model_id for item in inserts if item.second is not None}
    if len(models) != 1:
        return None
    (model_id,) = models
    return model_id if await claim(conn, model_id) else None


async def insert(conn: aiosqlite.Connection, n: int, item: NewMemory, model_id: str | None) -> None:
    if item.second is not None and item.second.model_id == model_id:
        await conn.execute("INSERT INTO second_vectors(memory_n, vec) VALUES (?, ?)", (n, blob(item.second.vector)))


async def read(conn: aiosqlite.Connection, ids: Sequence[str], model_id: str) -> dict[str, Vector]:
    """The vectors of memories ``ids`` from ``model_id``; none when the file's are another model's.
    The file's model and the vectors are read together (on PostgreSQL, one round trip)."""
    import numpy as np

    if not ids:
        return {}
    vectors = "SELECT m.id, s.vec FROM second_vectors s JOIN memories m ON m.n = s.memory_n WHERE m.id IN ({marks})"
    model, *chunks = await read_together(
        conn, [("SELECT value FROM meta WHERE key = ?", (MODEL_KEY,)), *in_chunks(vectors, ids)]
    )
    if not model or str(model[0][0]) != model_id:
        return {}
    return {str(ident): np.frombuffer(vec, dtype=np.float32) for chunk in chunks for ident, vec in chunk}


async def start_over(conn: aiosqlite.Connection, model_id: str) -> None:
    """Drop every second vector and name ``model_id`` as the file's (reindex writes them again)."""
    await conn.execute("DELETE FROM second_vectors")
    await conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (MODEL_KEY, model_id))


async def put(conn: aiosqlite.Connection, model_id: str, vectors: Sequence[tuple[str, Vector]]) -> int:
    """Store ``model_id``'s vectors of stored memories (by id), unless the file's are another model's."""
    if not await claim(conn, model_id):
        return 0
    rows = await rows_of(conn, [ident for ident, _ in vectors])
    found = [(rows[ident], blob(v)) for ident, v in vectors if ident in rows]
    await conn.executemany("INSERT OR REPLACE INTO second_vectors(memory_n, vec) VALUES (?, ?)", found)
    return len(found)


async def missing(conn: aiosqlite.Connection, limit: int, model_id: str) -> list[tuple[str, str]]:
    """(id, text) of up to ``limit`` current memories (what recall searches unless asked for more)
    without a second vector, the newest first; none when the file's are another model's."""
    if await _model(conn) not in (None, model_id):
        return []
    rows = await conn.execute_fetchall(
        "SELECT m.id, m.content FROM memories m LEFT JOIN second_vectors s ON s.memory_n = m.n "
        "WHERE s.memory_n IS NULL AND m.superseded_by IS NULL AND m.tier = 'active' ORDER BY m.n DESC LIMIT ?",
        (limit,),
    )
    return [(str(ident), str(text)) for ident, text in rows]

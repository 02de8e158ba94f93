"""What a data file says of its points in Qdrant: the file's random id (the principals' keys), the
vector token its last write to Qdrant committed, its change log, and how far the points lag (ADR 18).

Every function reads through the connection it is given: a reader's, or the writer's inside the
transaction that is about to commit.
"""

from __future__ import annotations

import secrets
import uuid

import aiosqlite

from mcp_memory.storage.lifecycle import PRUNED_MARK
from mcp_memory.storage.qdrant import Mark, principal_key


def new_token() -> str:
    return secrets.token_hex(8)


async def meta(conn: aiosqlite.Connection, key: str) -> str | None:
    rows = await conn.execute_fetchall("SELECT value FROM meta WHERE key = ?", (key,))
    return next((str(r[0]) for r in rows), None)


async def key(conn: aiosqlite.Connection, principal: str) -> str | None:
    """The principal's key in Qdrant, from its file's random id (None: no point was ever written)."""
    store_id = await meta(conn, "vector_store_id")
    return principal_key(store_id, principal) if store_id is not None else None


async def made_key(conn: aiosqlite.Connection, principal: str) -> str:
    """The key, the file's id made first if it has none (in a write transaction)."""
    store_id = await meta(conn, "vector_store_id")
    if store_id is None:
        store_id = uuid.uuid4().hex
        await conn.execute("INSERT INTO meta(key, value) VALUES ('vector_store_id', ?)", (store_id,))
    return principal_key(store_id, principal)


def unsettled(mark: Mark | None, token: str | None) -> tuple[int | None, tuple[int, ...] | None]:
    """What the points may not reflect of a file whose vector token is ``token``: the change-log
    position they are good up to (None: nothing known) and the rows to read again (None: every row)."""
    if mark is None:
        return None, None
    if token is not None and token == mark.token and mark.seq >= 0:
        return mark.seq, ()
    if mark.prev_token is not None and token == mark.prev_token and mark.pending is not None:
        return mark.prev_seq, mark.pending  # a write that has not committed (or never will)
    return None, None


async def since(conn: aiosqlite.Connection, base: int | None, head: int, *, gapless: bool) -> list[int] | None:
    """The rows the change log names after ``base``; None when it no longer reaches back that far.

    A prune records how far it went (``lifecycle.PRUNED_MARK``). A log whose numbers have no gaps
    of their own (SQLite's, one file per principal) also reads a gap after ``base`` as a prune, for
    a file pruned before the mark was kept; PostgreSQL's sequence leaves gaps, so there only the
    mark counts."""
    if base is None or base > head:
        return None
    rows = await conn.execute_fetchall(
        "SELECT seq, memory_n, NULL FROM changes WHERE seq > ? "
        "UNION ALL SELECT NULL, NULL, (SELECT value FROM meta WHERE key = ?) ORDER BY 1",
        (base, PRUNED_MARK),
    )
    pruned = next((r[2] for r in rows if r[0] is None), None)
    if pruned is not None and int(pruned) > base:
        return None
    changed = [r for r in rows if r[0] is not None]
    if gapless and changed and int(changed[0][0]) > base + 1:  # pruned past the mark
        return None
    return sorted({int(r[1]) for r in changed})


async def head(conn: aiosqlite.Connection) -> int:
    rows = await conn.execute_fetchall("SELECT COALESCE(MAX(seq), 0) FROM changes")
    return int(next(iter(rows))[0])


async def empty(conn: aiosqlite.Connection) -> bool:
    """Whether the principal has no vector at all (then it has no points and no mark)."""
    rows = await conn.execute_fetchall("SELECT NOT EXISTS (SELECT 1 FROM vectors)")
    return bool(next(iter(rows))[0])


async def model(conn: aiosqlite.Connection) -> tuple[str, int] | None:
    rows = await conn.execute_fetchall("SELECT key, value FROM meta WHERE key IN ('embed_model', 'embed_dim')")
    meta = {str(k): str(v) for k, v in rows}
    if "embed_model" not in meta or "embed_dim" not in meta:
        return None
    return meta["embed_model"], int(meta["embed_dim"])

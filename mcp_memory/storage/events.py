"""The event log of each memory: what happened to it, when, and by which rule.

Events are keyed by the memory's id, not its row, so a memory that is gone still has one: a forget,
an expiry or an eviction replaces everything logged about it with a single content-free event (the
word, the time) and nothing else of it remains. Details never carry a memory's text.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import aiosqlite
import orjson

from mcp_memory.core.models import GONE_EVENTS
from mcp_memory.storage.rows import rows_in

# What an event may be; the tools document each one.
EVENTS = (
    "created",  # stored (detail: kind, level, client)
    "merged",  # said again: one more occurrence (detail: occurrence)
    "superseded",  # replaced (detail: by, rule: named | key | rules | restated | expired copy | correction | judged)
    "flagged",  # may contradict another memory (detail: other)
    "unflagged",  # judged both true (detail: other)
    "archived",  # faded to the archive tier by a lifecycle pass (detail: retention, threshold)
    "summarized",  # archived under a summary (detail: into)
    "restored",  # back to the active tier when its summary was taken apart (detail: summary)
    "forgotten",  # deleted by a user's forget: the only event left of it
    "expired",  # erased when its time to live ran out: the only event left of it
    "evicted",  # deleted by a lifecycle pass: the only event left of it
    "undone",  # a summary taken apart: the only event left of it
)


TERMINAL = frozenset(GONE_EVENTS)  # the one event left of a memory gone


async def record(conn: aiosqlite.Connection, ids: Iterable[str], event: str, at: float, **detail: Any) -> None:
    assert event in EVENTS, event
    text = orjson.dumps(detail).decode()
    await conn.executemany(
        "INSERT INTO memory_events(memory_id, at, event, detail) VALUES (?, ?, ?, ?)",
        [(i, at, event, text) for i in dict.fromkeys(ids)],
    )


async def only(conn: aiosqlite.Connection, ids: Sequence[str], event: str, at: float) -> None:
    """``ids`` are gone: their log becomes this one content-free event."""
    await rows_in(conn, "DELETE FROM memory_events WHERE memory_id IN ({marks})", list(ids))
    await record(conn, ids, event, at)


async def read(conn: aiosqlite.Connection, memory_id: str) -> list[tuple[float, str, dict[str, Any]]]:
    rows = await conn.execute_fetchall(
        "SELECT at, event, detail FROM memory_events WHERE memory_id = ? ORDER BY n", (memory_id,)
    )
    return [(float(at), str(event), orjson.loads(detail)) for at, event, detail in rows]


async def counts(conn: aiosqlite.Connection) -> dict[str, int]:
    rows = await conn.execute_fetchall("SELECT event, COUNT(*) FROM memory_events GROUP BY event ORDER BY event")
    return {str(e): int(c) for e, c in rows}

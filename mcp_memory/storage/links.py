"""What memories name, and the links recall follows from its first hits (ADR 10).

Each memory's entities (``text.entities``: names, identifiers, titles) are kept in
``memory_entities``, written with the memory and deleted with it. Two memories are linked when they
share an entity that few memories of the file name (at most ``LINK_SHARE`` of them, never fewer
than two); a memory is also linked to the memories just before and after it in its session. Links
are read when recall asks, not stored: an entity that becomes common stops linking at once, and a
forgotten memory takes its entities with it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence

import aiosqlite

from mcp_memory.models import Link
from mcp_memory.storage.rows import rows_in, rows_of
from mcp_memory.text import entities

LINK_SHARE = 0.05  # an entity in more than this share of the memories ("user", a speaker) links nothing
MAX_LINKS = 20  # per memory, rarest entities first
# A source passes over at most MAX_LINKS + 1 memories it has seen and takes at most MAX_LINKS + 1, so
# an entity's first this many memories are all any source can use (under the 5% share, an entity of
# a 100k store may name thousands, which recall would read for nothing).
USABLE_PER_ENTITY = 2 * (MAX_LINKS + 1)


def entity_rows(n: int, content: str) -> list[tuple[str, int]]:
    return [(entity, n) for entity in sorted(entities(content))]


async def index_entities(conn: aiosqlite.Connection, memories: Iterable[tuple[int, str]]) -> None:
    rows = [row for n, content in memories for row in entity_rows(n, content)]
    if rows:
        await conn.executemany("INSERT OR IGNORE INTO memory_entities(entity, memory_n) VALUES (?, ?)", rows)


def backfill(conn: sqlite3.Connection) -> None:
    """The entities of every memory already stored (the schema 7 migration)."""
    memories = conn.execute("SELECT n, content FROM memories").fetchall()
    rows = [row for n, content in memories for row in entity_rows(int(n), str(content))]
    conn.executemany("INSERT OR IGNORE INTO memory_entities(entity, memory_n) VALUES (?, ?)", rows)


async def links(conn: aiosqlite.Connection, sources: Sequence[str], population: int) -> list[Link]:
    """The links of the memories ``sources`` (ids): shared rare entities (at most MAX_LINKS a
    source), then session neighbours."""
    if not sources:
        return []
    rows = await rows_of(conn, sources)
    found = await _row_links(conn, [rows[s] for s in sources if s in rows], population)
    named = sorted({n for source, target, _ in found for n in (source, target)})
    ids = {int(r[0]): str(r[1]) for r in await rows_in(conn, "SELECT n, id FROM memories WHERE n IN ({marks})", named)}
    return [Link(ids[source], ids[target], via) for source, target, via in found if target in ids]


async def _row_links(conn: aiosqlite.Connection, sources: Sequence[int], population: int) -> list[tuple[int, int, str]]:
    """(source, target, via) rows: shared rare entities (at most MAX_LINKS a source), then session neighbours."""
    if not sources:
        return []
    cap = max(2, int(LINK_SHARE * population))
    named = await rows_in(conn, "SELECT entity, memory_n FROM memory_entities WHERE memory_n IN ({marks})", sources)
    wanted = sorted({str(r[0]) for r in named})
    counts = await _counts(conn, wanted, cap)
    rare = sorted((e for e in wanted if counts.get(e, 0) <= cap), key=lambda e: (counts.get(e, 0), e))
    sharing: dict[str, list[int]] = {}
    for entity, n in await _first_named(conn, rare):
        sharing.setdefault(str(entity), []).append(int(n))
    by_source: dict[int, list[str]] = {}
    for entity, n in named:
        by_source.setdefault(int(n), []).append(str(entity))
    found: list[tuple[int, int, str]] = []
    for source in sources:
        seen: set[int] = {source}
        for entity in sorted(by_source.get(source, []), key=lambda e: (counts.get(e, 0), e)):
            if entity not in sharing:
                continue
            for target in sharing[entity]:
                if target not in seen and len(seen) <= MAX_LINKS:
                    seen.add(target)
                    found.append((source, target, entity))
    found.extend(await session_neighbours(conn, sources))
    return found


# Per-entity subqueries joined in one statement: each reads its entity's first rows from the primary
# key and stops (a window over an entity's every row cost 5 ms at 100k memories, this 0.1 ms).
_PER_STATEMENT = 100


async def _counts(conn: aiosqlite.Connection, wanted: Sequence[str], cap: int) -> dict[str, int]:
    """How many memories name each entity, counted up to ``cap`` + 1: beyond that it links nothing."""
    counted: dict[str, int] = {}
    one = (
        "SELECT entity, COUNT(*) FROM (SELECT entity FROM memory_entities WHERE entity = ? LIMIT ?) AS named "
        "GROUP BY entity"
    )
    for start in range(0, len(wanted), _PER_STATEMENT):
        chunk = wanted[start : start + _PER_STATEMENT]
        sql = " UNION ALL ".join([one] * len(chunk))
        params = [v for entity in chunk for v in (entity, cap + 1)]
        counted.update((str(r[0]), int(r[1])) for r in await conn.execute_fetchall(sql, params))
    return counted


async def _first_named(conn: aiosqlite.Connection, rare: Sequence[str]) -> list[tuple[str, int]]:
    """(entity, memory row) for the first USABLE_PER_ENTITY memories naming each of ``rare``."""
    found: list[tuple[str, int]] = []
    one = (
        "SELECT entity, memory_n FROM (SELECT entity, memory_n FROM memory_entities WHERE entity = ? "
        f"ORDER BY memory_n LIMIT {USABLE_PER_ENTITY}) AS earliest"
    )
    for start in range(0, len(rare), _PER_STATEMENT):
        chunk = rare[start : start + _PER_STATEMENT]
        rows = await conn.execute_fetchall(" UNION ALL ".join([one] * len(chunk)), chunk)
        found.extend((str(r[0]), int(r[1])) for r in rows)
    return found


async def session_neighbours(conn: aiosqlite.Connection, sources: Sequence[int]) -> list[tuple[int, int, str]]:
    rows = await rows_in(
        conn,
        "SELECT m.n, "
        "(SELECT p.n FROM memories p WHERE p.session_key = m.session_key AND p.n < m.n ORDER BY p.n DESC LIMIT 1), "
        "(SELECT x.n FROM memories x WHERE x.session_key = m.session_key AND x.n > m.n ORDER BY x.n LIMIT 1) "
        "FROM memories m WHERE m.session_key IS NOT NULL AND m.n IN ({marks})",
        sources,
    )
    return [(int(r[0]), int(t), "") for r in rows for t in (r[1], r[2]) if t is not None]

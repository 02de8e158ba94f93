"""How memory rows are read: the column list, row to MemoryRecord, the WHERE clause that keeps a
query inside its scope, the keyword-search match, and what a record carries besides its row.

Plain functions over an open connection: SqliteStore and LifecycleStore share them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import aiosqlite
import orjson

from mcp_memory.core.models import Criteria, MemoryRecord, Provenance, Scope

if TYPE_CHECKING:
    from mcp_memory.core.models import Vector

# One list of a memory row's columns, in order: the SELECT, the INSERT and both mappings follow it.
RECORD_FIELDS = (
    "id", "namespace", "kind", "content", "key", "tags", "metadata", "importance", "pinned", "occurred_at",
    "created_at", "last_accessed_at", "access_count", "valid_from", "valid_to", "superseded_by", "expires_at",
    "tier", "level", "language", "session_key", "task_id", "client_name", "client_version", "transport",
    "content_hash",
)  # fmt: skip
_JSON_FIELDS = frozenset({"tags", "metadata"})
_PROVENANCE_FIELDS = ("client_name", "client_version", "transport")

MEMORY_COLUMNS = ", ".join(("n", *RECORD_FIELDS))
INSERT_MEMORY = f"INSERT INTO memories ({', '.join(RECORD_FIELDS)}) VALUES ({','.join('?' * len(RECORD_FIELDS))})"


def blob(vector: Vector) -> bytes:
    """A vector as a row stores it: float32, native order."""
    import numpy as np

    return np.asarray(vector, dtype=np.float32).tobytes()


def record_values(rec: MemoryRecord) -> tuple[Any, ...]:
    """A record as the values of INSERT_MEMORY."""
    values: list[Any] = []
    for name in RECORD_FIELDS:
        value = getattr(rec.provenance if name in _PROVENANCE_FIELDS else rec, name)
        if name in _JSON_FIELDS:
            value = orjson.dumps(value).decode()
        elif name == "pinned":
            value = int(value)
        values.append(value)
    return tuple(values)


def row_to_record(row: Sequence[Any]) -> MemoryRecord:
    """A row read with MEMORY_COLUMNS as a record."""
    fields = dict(zip(RECORD_FIELDS, row[1:], strict=True))
    for name in _JSON_FIELDS:
        fields[name] = orjson.loads(fields[name])
    fields["pinned"] = bool(fields["pinned"])
    provenance = Provenance(**{name: fields.pop(name) for name in _PROVENANCE_FIELDS})
    return MemoryRecord(written=row[0], provenance=provenance, **fields)


# A flag stands while the other side is current: once it is replaced (corrected, superseded) or
# archived, the disagreement is settled, as the lifecycle's count of flagged conflicts already reads it.
STANDING_CONFLICTS = (
    "conflicts c JOIN memories other ON other.id = c.other_id "
    "WHERE other.superseded_by IS NULL AND other.tier = 'active'"
)
ALL_CONFLICTS = "conflicts c WHERE 1 = 1"


def visible_clause(scope: Scope, criteria: Criteria, now: float, alias: str = "m") -> tuple[str, list[Any]]:
    """The WHERE clause that keeps a query inside the scope and the criteria."""
    clauses: list[str] = []
    params: list[Any] = []
    if criteria.namespace_only:
        clauses.append(f"{alias}.namespace IS ?")
        params.append(scope.namespace)
    elif scope.namespace is None:
        clauses.append(f"{alias}.namespace IS NULL")
    else:
        clauses.append(f"({alias}.namespace IS NULL OR {alias}.namespace = ?)")
        params.append(scope.namespace)
    if not criteria.include_superseded:
        clauses.append(f"{alias}.superseded_by IS NULL")
    if not criteria.include_archived:
        clauses.append(f"{alias}.tier = 'active'")
    if not criteria.include_expired:
        clauses.append(f"({alias}.expires_at IS NULL OR {alias}.expires_at > ?)")
        params.append(now)
    for column, values in (("id", criteria.ids), ("kind", criteria.kinds or None), ("key", criteria.keys)):
        if values is not None:  # SQLite reads an empty IN list as matching nothing
            clauses.append(f"{alias}.{column} IN ({','.join('?' * len(values))})")
            params.extend(values)
    if criteria.tags:
        marks = ",".join("?" * len(criteria.tags))
        clauses.append(f"{alias}.n IN (SELECT memory_n FROM memory_tags WHERE tag IN ({marks}))")
        params.extend(criteria.tags)
    if criteria.occurred_after is not None:
        clauses.append(f"{alias}.occurred_at >= ?")
        params.append(criteria.occurred_after)
    if criteria.occurred_before is not None:
        clauses.append(f"{alias}.occurred_at < ?")
        params.append(criteria.occurred_before)
    if criteria.task_id is not None:
        clauses.append(f"{alias}.task_id = ?")
        params.append(criteria.task_id)
    if criteria.pinned is not None:
        # A literal, so the partial index on pinned = 1 serves it.
        clauses.append(f"{alias}.pinned = {int(criteria.pinned)}")
    if criteria.level is not None:
        clauses.append(f"{alias}.level = ?")
        params.append(criteria.level)
    if criteria.conflicted is not None:
        negation = "" if criteria.conflicted else "NOT "
        clauses.append(f"{alias}.id {negation}IN (SELECT c.memory_id FROM {STANDING_CONFLICTS})")
    return " AND ".join(clauses), params


def fts_match(terms: Iterable[str]) -> str:
    """An FTS5 query that searches every term as a quoted phrase: no operator can slip through."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


def in_chunks(sql: str, keys: Sequence[Any]) -> list[tuple[str, list[Any]]]:
    """``sql`` (with a ``{marks}`` placeholder for an IN list) over ``keys``, 500 at a time."""
    chunks = [list(keys[start : start + 500]) for start in range(0, len(keys), 500)]
    return [(sql.format(marks=",".join("?" * len(chunk))), chunk) for chunk in chunks]


async def rows_in(conn: aiosqlite.Connection, sql: str, keys: Sequence[Any]) -> list[Any]:
    """Run ``sql`` (with a ``{marks}`` placeholder for an IN list) over ``keys`` in chunks."""
    rows: list[Any] = []
    for statement, chunk in in_chunks(sql, keys):
        rows.extend(await conn.execute_fetchall(statement, chunk))
    return rows


async def read_together(conn: aiosqlite.Connection, reads: Sequence[tuple[str, Sequence[Any]]]) -> list[list[Any]]:
    """Each read's rows. A connection that sends several statements in one message (PostgreSQL's
    ``PgConn.read_together``) does, in one round trip; SQLite's, in this process, reads them in turn."""
    together = getattr(conn, "read_together", None)
    if together is not None:
        return list(await together(reads))
    return [list(await conn.execute_fetchall(sql, params)) for sql, params in reads]


async def rows_in_each(conn: aiosqlite.Connection, reads: Sequence[tuple[str, Sequence[Any]]]) -> list[list[Any]]:
    """``rows_in`` of each (statement with ``{marks}``, keys), every chunk of every read sent together."""
    chunked = [in_chunks(sql, keys) for sql, keys in reads]
    answers = iter(await read_together(conn, [chunk for chunks in chunked for chunk in chunks]))
    return [[row for _ in chunks for row in next(answers)] for chunks in chunked]


async def rows_of(conn: aiosqlite.Connection, ids: Sequence[str]) -> dict[str, int]:
    """id -> row number of those of the memories ``ids`` that are stored: what a service names by
    id, the file keys by row."""
    return {str(r[1]): int(r[0]) for r in await rows_in(conn, "SELECT n, id FROM memories WHERE id IN ({marks})", ids)}


async def attach_occurrences(
    conn: aiosqlite.Connection, records: list[MemoryRecord], *, every_flag: bool = False
) -> None:
    """Occurrence ids, conflicts and summary sources: what a record carries besides its row; the
    conflicts that still stand (STANDING_CONFLICTS), or ``every_flag`` (an export keeps them all)."""
    if not records:
        return
    by_n = {r.written: r for r in records}
    by_id = {r.id: r for r in records}
    occurrences, conflicts, sources = await rows_in_each(
        conn,
        [
            (
                "SELECT memory_n, id, occurred_at FROM occurrences WHERE memory_n IN ({marks}) "
                "ORDER BY occurred_at, id",
                list(by_n),
            ),
            (
                f"SELECT c.memory_id, c.other_id FROM {ALL_CONFLICTS if every_flag else STANDING_CONFLICTS} "
                "AND c.memory_id IN ({marks}) ORDER BY c.other_id",
                list(by_id),
            ),
            (
                "SELECT summary_id, source_id FROM summary_sources WHERE summary_id IN ({marks}) ORDER BY source_id",
                list(by_id),
            ),
        ],
    )
    for memory_n, occ_id, occurred_at in occurrences:
        record = by_n[int(memory_n)]
        record.occurrence_ids.append(str(occ_id))
        record.last_seen_at = float(occurred_at)
    for memory_id, other_id in conflicts:
        by_id[str(memory_id)].conflicts_with.append(str(other_id))
    for summary_id, source_id in sources:
        by_id[str(summary_id)].source_ids.append(str(source_id))


async def live_by_hash(conn: aiosqlite.Connection, scope: Scope, hashes: Sequence[str], now: float) -> dict[str, str]:
    """content hash -> id of a live memory in exactly the scope's namespace."""
    found = await conn.execute_fetchall(
        f"SELECT content_hash, id FROM memories m WHERE content_hash IN ({','.join('?' * len(hashes))}) "
        "AND m.namespace IS ? AND m.superseded_by IS NULL AND m.tier = 'active' "
        "AND (m.expires_at IS NULL OR m.expires_at > ?)",
        [*hashes, scope.namespace, now],
    )
    return {str(h): str(i) for h, i in found}


async def replaced_by_hash(
    conn: aiosqlite.Connection, scope: Scope, hashes: Sequence[str], now: float
) -> dict[str, str]:
    """content hash -> the live memory that replaced the latest copy of that text (following
    replacements of replacements), for texts no live memory says now."""
    copies = await conn.execute_fetchall(
        f"SELECT content_hash, superseded_by FROM memories m WHERE content_hash IN ({','.join('?' * len(hashes))}) "
        "AND m.namespace IS ? AND m.superseded_by IS NOT NULL ORDER BY m.n",
        [*hashes, scope.namespace],
    )
    latest = {str(h): str(by) for h, by in copies}  # the last copy wins
    found: dict[str, str] = {}
    for h, head in latest.items():
        for _ in range(50):  # a chain of replacements, bounded
            step = list(
                await conn.execute_fetchall(
                    "SELECT superseded_by, tier = 'active' AND (expires_at IS NULL OR expires_at > ?) "
                    "FROM memories WHERE id = ?",
                    (now, head),
                )
            )
            if not step:
                break
            if step[0][0] is None:
                if step[0][1]:
                    found[h] = head
                break
            head = str(step[0][0])
    return found

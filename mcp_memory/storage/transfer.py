"""Copying principals between the two systems of record (`mcp-memory migrate`, ADR 19).

Both backends run the same SQL (ADR 20), so a principal moves table by table: every column of every
table of its SQLite file, read in one transaction of the source (a consistent copy, no write
meanwhile) and written in one transaction of the target, numbers included, so the order of writing,
lineage, history, tasks and checkpoints arrive as they were. The keyword index is made again from
the memories' text, as every write makes it. What belongs to one store rather than to the data
(schema marks, the principal's name, Qdrant's marks, PostgreSQL's log epoch) stays behind.

A principal the target already holds is compared, not written: the same rows (by digest, per table)
count as copied, so a run that stopped midway is simply run again; different rows are refused with
the way out named. After writing, the target is read back and compared with the source.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from mcp_memory.core.errors import ConflictError, StorageError
from mcp_memory.core.models import EVERYWHERE, SWITCH_SEPARATOR, Scope
from mcp_memory.core.text import segment_for_index
from mcp_memory.storage.llm_usage import principal_hash
from mcp_memory.storage.schema import table_columns

# meta keys of one store, not of the data (PostgreSQL's keyword statistics are made again with its index)
LOCAL_META = ("schema_version", "min_code_schema", "written_by", "principal", "vector_store_id", "vector_token",
              "changes_epoch", "keyword_docs", "keyword_tokens")  # fmt: skip
NUMBERED = {"memories": "n", "changes": "seq", "erasures": "n", "memory_events": "n", "golden_checks": "n"}

Rows = dict[str, list[tuple[Any, ...]]]


class Side(Protocol):
    """A system of record as the copy uses it (SqliteStore, PostgresStore)."""

    def transaction(self, scope: Scope) -> Any: ...

    async def known_principals(self) -> list[str]: ...


@dataclass
class Copied:
    principal: str
    outcome: str  # "copied" or "present"
    rows: dict[str, int] = field(default_factory=dict)


def _canonical(value: Any) -> str:
    if value is None:
        return "n"
    if isinstance(value, bool | int):
        return f"i{int(value)}"
    if isinstance(value, float):
        return f"f{value!r}"
    if isinstance(value, bytes | bytearray | memoryview):
        return "b" + bytes(value).hex()
    return "s" + str(value)


def _line(row: tuple[Any, ...], skip: int = 0) -> str:
    """A row as text that is the same whichever backend returned it (from column ``skip`` on)."""
    return "\x1f".join(_canonical(v) for v in row[skip:])


def digest(rows: Sequence[tuple[Any, ...]]) -> str:
    """The same for the same rows in any order, whichever backend returned them."""
    return hashlib.sha256("\x1e".join(sorted(map(_line, rows))).encode()).hexdigest()


async def read_all(conn: Any) -> Rows:
    """Every row of every table of the principal, as ``conn`` (its transaction) sees them."""
    out: Rows = {}
    for table, columns in table_columns().items():
        where = f" WHERE key NOT IN ({', '.join('?' * len(LOCAL_META))})" if table == "meta" else ""
        params = LOCAL_META if table == "meta" else ()
        out[table] = list(await conn.execute_fetchall(f"SELECT {', '.join(columns)} FROM {table}{where}", params))
    return out


# A principal forgotten in the target keeps its erasure receipts (and meta): it holds no data then.
# Meta is the passes' state (marks of how far a pass got), which a pass on the target moves on.
_STATE = ("meta", "erasures")


def _holds_data(rows: Rows) -> bool:
    return any(found for table, found in rows.items() if table not in _STATE)


async def _write(conn: Any, rows: Rows) -> None:
    for table, columns in table_columns().items():
        if rows[table]:
            # meta replaces what a fresh store wrote; receipts join those of an earlier forget_user
            verb = {"meta": "INSERT OR REPLACE", "erasures": "INSERT OR IGNORE"}.get(table, "INSERT")
            marks = ", ".join("?" * len(columns))
            await conn.executemany(f"{verb} INTO {table}({', '.join(columns)}) VALUES ({marks})", rows[table])
    n, content = table_columns()["memories"].index("n"), table_columns()["memories"].index("content")
    await conn.executemany(
        "INSERT INTO memories_fts(rowid, body) VALUES (?, ?)",
        [(row[n], segment_for_index(str(row[content]))) for row in rows["memories"]],
    )


def _lines(rows: Sequence[tuple[Any, ...]], skip: int = 0) -> set[str]:
    return {_line(row, skip) for row in rows}


def _differs(source: Rows, target: Rows, *, state: bool) -> list[str]:
    """The tables whose rows differ: every data table exactly; with ``state``, the source's meta and
    erasure receipts (without their numbers) must be in the target too."""
    differ = [t for t in table_columns() if t not in _STATE and digest(source[t]) != digest(target[t])]
    if state:
        differ += [
            t for t, skip in (("meta", 0), ("erasures", 1)) if not _lines(source[t], skip) <= _lines(target[t], skip)
        ]
    return differ


def maxima(rows: Rows) -> dict[str, tuple[str, int]]:
    """Each numbered table's column and highest number (PostgreSQL's sequences must pass them first)."""
    out = {}
    for table, column in NUMBERED.items():
        at = table_columns()[table].index(column)
        out[table] = (column, max((int(r[at]) for r in rows[table]), default=0))
    return out


async def copy_principal(
    source: Side,
    target: Side,
    principal: str,
    before_write: Callable[[dict[str, tuple[str, int]]], Awaitable[None]] | None = None,
) -> Copied:
    """One principal from ``source`` to ``target``, all or nothing, verified."""
    scope = Scope(principal)
    async with source.transaction(scope) as conn:
        rows = await read_all(conn)
    counts = {t: len(found) for t, found in rows.items()}
    async with target.transaction(scope) as conn:
        held = await read_all(conn)
        if _holds_data(held):
            differ = _differs(rows, held, state=False)
            if not differ:
                return Copied(principal, "present", counts)
            raise ConflictError(
                f"principal {principal!r} already has other data in the target (tables {', '.join(differ)}): "
                "nothing of it was written. Leave it out (--only with the others' names), or, if the target's "
                "copy is the one to drop, run forget_user for it there and migrate again"
            )
        if before_write is not None:  # only for a principal about to be written (not one already there)
            await before_write(maxima(rows))
        try:
            await _write(conn, rows)
        except Exception as exc:
            if not str(getattr(exc, "sqlstate", "") or "").startswith("22"):  # SQLSTATE class 22: data exception
                raise
            # a value the target's columns refuse (a row an older import let through)
            cause = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ConflictError(
                f"principal {principal!r} holds a row the target cannot take ({cause}): nothing of it was "
                "written. Repair the row in the source (`mcp-memory export --principal` shows the memories), or "
                "leave the principal out (--only with the others' names)"
            ) from exc
    async with target.transaction(scope) as conn:
        differ = _differs(rows, await read_all(conn), state=True)
    if differ:
        raise StorageError(f"principal {principal!r} was written but reads back differently ({', '.join(differ)})")
    return Copied(principal, "copied", counts)


# What replicas share and a move takes along (leases, pass records, sessions and codes are short-lived)
SHARED_TABLES = {
    "tokens": ("id", "hash", "principal", "namespace", "label", "created_at", "expires_at", "revoked_at"),
    "switches": ("target", "state", "changed_at", "source"),
    "llm_usage": ("principal_hash", "day", "calls", "tokens", "failures"),
}


class SharedSide(Protocol):
    async def rows(self, table: str, columns: Sequence[str]) -> list[tuple[Any, ...]]: ...

    async def add_rows(self, table: str, columns: Sequence[str], rows: Sequence[tuple[Any, ...]]) -> int: ...


async def copy_shared(
    sources: dict[str, SharedSide], targets: dict[str, SharedSide], moved: set[str], refused: set[str], every: bool
) -> dict[str, int]:
    """The tokens, switches and LLM budgets the target does not have yet (by key); how many of each.
    They go along for the principals ``moved`` or, when ``every`` principal was asked for, for all but
    the ``refused`` (a principal may hold a token or a switch before its first memory). A switch over
    every principal stays behind: on a shared database it would stop principals the move never touched."""
    moved_hashes, refused_hashes = {principal_hash(p) for p in moved}, {principal_hash(p) for p in refused}

    def keep(table: str, row: tuple[Any, ...]) -> bool:
        if table == "llm_usage":
            return row[0] not in refused_hashes if every else row[0] in moved_hashes
        name = str(row[2]) if table == "tokens" else str(row[0]).split(SWITCH_SEPARATOR, 1)[0]
        if table == "switches" and row[0] == EVERYWHERE:
            return False
        return name not in refused if every else name in moved

    added = {}
    for table, columns in SHARED_TABLES.items():
        rows = [row for row in await sources[table].rows(table, columns) if keep(table, row)]
        added[table] = await targets[table].add_rows(table, columns, rows)
    return added

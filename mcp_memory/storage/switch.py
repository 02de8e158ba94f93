"""SwitchFile: the kill switch's state, in the control file every process on the data directory reads.

A row per target: the whole data directory (``*``), a principal, or one namespace of a principal.
Memory is off for a scope when any target covering it is off. `switch on` records "on" rather than
deleting the row, so the config key, which only seeds a state nobody has set, never overrides a
person's choice.
"""

from __future__ import annotations

import sqlite3

from mcp_memory.core.models import EVERYWHERE, Scope, switch_target, switch_targets
from mcp_memory.storage.control import ControlFile

_SCHEMA = """
CREATE TABLE IF NOT EXISTS switches (
    target TEXT PRIMARY KEY,
    state TEXT NOT NULL CHECK (state IN ('on', 'off')),
    changed_at REAL NOT NULL,
    source TEXT NOT NULL
);
"""


class SwitchFile(ControlFile):
    schema = ControlFile.schema + _SCHEMA

    @staticmethod
    def _set(conn: sqlite3.Connection, row_target: str, state: str, now: float, source: str) -> None:
        conn.execute(
            "INSERT INTO switches(target, state, changed_at, source) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(target) DO UPDATE SET state = excluded.state, changed_at = excluded.changed_at, "
            "source = excluded.source",
            (row_target, state, now, source),
        )

    async def set(self, row_target: str, state: str, now: float, source: str = "cli") -> None:
        await self._call(self._set, row_target, state, now, source)

    @staticmethod
    def _seed(conn: sqlite3.Connection, row_target: str, state: str, now: float) -> None:
        conn.execute(
            "INSERT OR IGNORE INTO switches(target, state, changed_at, source) VALUES (?, ?, ?, 'config')",
            (row_target, state, now),
        )

    async def seed(self, row_target: str, state: str, now: float) -> None:
        """The config key's state, only where no state was ever recorded (the CLI's wins)."""
        await self._call(self._seed, row_target, state, now)

    async def off_for(self, scope: Scope) -> list[tuple[str, float]]:
        """The switches covering ``scope`` that are off (none: memory is on), with when they went off."""
        targets = switch_targets(scope)
        marks = ",".join("?" * len(targets))
        rows = await self._select(
            f"SELECT target, changed_at FROM switches WHERE state = 'off' AND target IN ({marks})", *targets
        )
        return [(str(r[0]), float(r[1])) for r in rows]

    @staticmethod
    def _all(conn: sqlite3.Connection) -> list[tuple[str, str, float, str]]:
        rows = conn.execute("SELECT target, state, changed_at, source FROM switches ORDER BY target").fetchall()
        return [(str(r[0]), str(r[1]), float(r[2]), str(r[3])) for r in rows]

    async def all(self) -> list[tuple[str, str, float, str]]:
        found: list[tuple[str, str, float, str]] = await self._call(self._all)
        return found

    async def off_within(self, principal: str) -> bool:
        """Whether memory is off anywhere in ``principal``'s store (a namespace of it included)."""
        prefix = switch_target(principal, "")
        found = await self._lookup(
            "SELECT 1 FROM switches WHERE state = 'off' AND (target IN (?, ?) OR substr(target, 1, ?) = ?) LIMIT 1",
            EVERYWHERE, principal, len(prefix), prefix,
        )  # fmt: skip
        return found is not None

"""LlmLedger: each principal's LLM use per day, in the control file, shared by every process.

The budget of calls and tokens is per principal and per day whatever the number of processes on
the data directory (a server, a `maintain` run, a second server): each reads and charges the
same rows. Principals are recorded by a hash of their name, so the file holds no name.
"""

from __future__ import annotations

import hashlib
import sqlite3

from mcp_memory.storage.control import ControlFile, guarded_write

_SCHEMA = """
CREATE TABLE IF NOT EXISTS llm_usage (
    principal_hash TEXT NOT NULL,
    day INTEGER NOT NULL,
    calls INTEGER NOT NULL DEFAULT 0,
    tokens INTEGER NOT NULL DEFAULT 0,
    failures INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (principal_hash, day)
) WITHOUT ROWID;
"""


def principal_hash(principal: str) -> str:
    return hashlib.sha256(principal.encode()).hexdigest()[:32]


class LlmLedger(ControlFile):
    schema = _SCHEMA

    @staticmethod
    def _used(conn: sqlite3.Connection, key: str, day: int) -> tuple[int, int, int]:
        row = conn.execute(
            "SELECT calls, tokens, failures FROM llm_usage WHERE principal_hash = ? AND day = ?", (key, day)
        ).fetchone()
        return (0, 0, 0) if row is None else (int(row[0]), int(row[1]), int(row[2]))

    async def used(self, principal: str, day: int) -> tuple[int, int, int]:
        """(calls, tokens, failures) the principal has spent on ``day`` (days since the epoch)."""
        result: tuple[int, int, int] = await self._call(self._used, principal_hash(principal), day)
        return result

    @staticmethod
    def _reserve(conn: sqlite3.Connection, key: str, day: int, max_calls: int, max_tokens: int) -> bool:
        def within_budget() -> bool:  # read and charge as one: two processes cannot both take the last call
            row = conn.execute(
                "SELECT calls, tokens FROM llm_usage WHERE principal_hash = ? AND day = ?", (key, day)
            ).fetchone()
            return row is None or (int(row[0]) < max_calls and int(row[1]) < max_tokens)

        def charge() -> None:
            conn.execute(
                "INSERT INTO llm_usage(principal_hash, day, calls) VALUES (?, ?, 1) "
                "ON CONFLICT(principal_hash, day) DO UPDATE SET calls = calls + 1",
                (key, day),
            )

        return guarded_write(conn, within_budget, charge)

    async def reserve(self, principal: str, day: int, max_calls: int, max_tokens: int) -> bool:
        """Charge one call if the principal's budget for ``day`` allows it; False (nothing charged)
        when its calls or tokens are used up."""
        return bool(await self._call(self._reserve, principal_hash(principal), day, max_calls, max_tokens))

    @staticmethod
    def _charge(conn: sqlite3.Connection, key: str, day: int, calls: int, tokens: int, failures: int) -> None:
        conn.execute(
            "INSERT INTO llm_usage(principal_hash, day, calls, tokens, failures) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT(principal_hash, day) DO UPDATE SET calls = calls + excluded.calls, "
            "tokens = tokens + excluded.tokens, failures = failures + excluded.failures",
            (key, day, calls, tokens, failures),
        )
        conn.execute("DELETE FROM llm_usage WHERE day < ?", (day - 7,))  # a week of history at most

    async def charge(self, principal: str, day: int, *, calls: int = 0, tokens: int = 0, failures: int = 0) -> None:
        await self._call(self._charge, principal_hash(principal), day, calls, tokens, failures)

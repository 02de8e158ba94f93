"""forget_user's confirmation codes in the control tables, so that a dry run on one process and the
confirming call on another (a second replica, or the stdio server beside the network one) meet.
Only a digest of each code is stored."""

from __future__ import annotations

import hashlib
import hmac
import sqlite3

from mcp_memory.storage.control import ControlFile

_SCHEMA = """
CREATE TABLE IF NOT EXISTS forget_codes (
    principal TEXT PRIMARY KEY,
    code_hash TEXT NOT NULL,
    expires_at REAL NOT NULL
);
"""


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class ForgetCodes(ControlFile):
    schema = _SCHEMA

    @staticmethod
    def _issue(conn: sqlite3.Connection, key: str, digest: str, expires_at: float) -> None:
        with conn:
            conn.execute("DELETE FROM forget_codes WHERE expires_at < ?", (expires_at - 86_400,))
            conn.execute(
                "INSERT INTO forget_codes(principal, code_hash, expires_at) VALUES (?, ?, ?) "
                "ON CONFLICT(principal) DO UPDATE SET code_hash = excluded.code_hash, expires_at = excluded.expires_at",
                (key, digest, expires_at),
            )

    async def issue(self, principal: str, code: str, expires_at: float) -> None:
        await self._call(self._issue, _digest(principal), _digest(code), expires_at)

    @staticmethod
    def _take(conn: sqlite3.Connection, key: str) -> tuple[str, float] | None:
        with conn:  # read and void as one: a code is used once, by one process
            rows = conn.execute(
                "DELETE FROM forget_codes WHERE principal = ? RETURNING code_hash, expires_at", (key,)
            ).fetchall()
        return (str(rows[0][0]), float(rows[0][1])) if rows else None

    async def take(self, principal: str, code: str, now: float) -> bool:
        found: tuple[str, float] | None = await self._call(self._take, _digest(principal))
        return found is not None and found[1] >= now and hmac.compare_digest(found[0], _digest(code))

    @staticmethod
    def _void(conn: sqlite3.Connection, key: str) -> None:
        with conn:
            conn.execute("DELETE FROM forget_codes WHERE principal = ?", (key,))

    async def void(self, principal: str) -> None:
        await self._call(self._void, _digest(principal))

"""The web inspector's sign-ins, kept in the control file: a session id's SHA-256, never the id.

A session names the principal and namespace binding of the token (or the local principal) it
was opened with, the token's id (so revoking the token ends its sessions), its CSRF secret and
when it expires. Every process on the data directory sees the same sessions, so a sign-out or a
revocation holds for all of them.
"""

from __future__ import annotations

import hashlib
import secrets
import sqlite3
from dataclasses import dataclass

from mcp_memory.storage.control import ControlFile

_SCHEMA = """
CREATE TABLE IF NOT EXISTS ui_sessions (
    hash TEXT PRIMARY KEY,
    principal TEXT NOT NULL,
    namespace TEXT,
    token_id TEXT NOT NULL,
    csrf TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL
);
"""

_COLUMNS = "principal, namespace, token_id, csrf, created_at, expires_at"


@dataclass(frozen=True)
class UiSession:
    principal: str
    namespace: str | None
    token_id: str
    csrf: str
    created_at: float
    expires_at: float


def _hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


class UiSessionStore(ControlFile):
    """``services.control_ports.UiSessions`` (where its methods' contracts are) in the control file."""

    schema = _SCHEMA

    @staticmethod
    def _insert(conn: sqlite3.Connection, digest: str, session: UiSession) -> None:
        with conn:
            conn.execute("DELETE FROM ui_sessions WHERE expires_at <= ?", (session.created_at,))
            conn.execute(
                f"INSERT INTO ui_sessions(hash, {_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    digest,
                    session.principal,
                    session.namespace,
                    session.token_id,
                    session.csrf,
                    session.created_at,
                    session.expires_at,
                ),
            )

    async def open(
        self, principal: str, namespace: str | None, token_id: str, now: float, expires_at: float
    ) -> tuple[str, UiSession]:
        session_id = secrets.token_urlsafe(32)
        session = UiSession(principal, namespace, token_id, secrets.token_urlsafe(24), now, expires_at)
        await self._call(self._insert, _hash(session_id), session)
        return session_id, session

    @staticmethod
    def _find(conn: sqlite3.Connection, digest: str, now: float) -> tuple[object, ...] | None:
        row: tuple[object, ...] | None = conn.execute(
            f"SELECT {_COLUMNS} FROM ui_sessions WHERE hash = ? AND expires_at > ?", (digest, now)
        ).fetchone()
        return row

    async def find(self, session_id: str, now: float) -> UiSession | None:
        if not session_id or len(session_id) > 100:
            return None
        row = await self._read(self._find, _hash(session_id), now)  # every page asks: the kept connection
        if row is None:
            return None
        principal, namespace, token_id, csrf, created, expires = row
        return UiSession(
            str(principal),
            None if namespace is None else str(namespace),
            str(token_id),
            str(csrf),
            float(str(created)),
            float(str(expires)),
        )

    @staticmethod
    def _delete(conn: sqlite3.Connection, digest: str) -> None:
        with conn:
            conn.execute("DELETE FROM ui_sessions WHERE hash = ?", (digest,))

    async def close_session(self, session_id: str) -> None:
        await self._call(self._delete, _hash(session_id))

    @staticmethod
    def _delete_principal(conn: sqlite3.Connection, principal: str) -> None:
        with conn:
            conn.execute("DELETE FROM ui_sessions WHERE principal = ?", (principal,))

    async def close_principal(self, principal: str) -> None:
        await self._call(self._delete_principal, principal)

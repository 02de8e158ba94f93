"""Bearer tokens for the network transports, kept in the control file as SHA-256 hashes only.

A token is 256 random bits, so a plain SHA-256 is enough to make the stored hash useless to a
reader of the file (there is nothing to guess); the token itself is shown once, at creation.
Each token names its principal and, optionally, the namespace its writes go to. Verification
reads the file on every request, so `token revoke` in another process takes effect on the next
request. It reads through one connection kept open, on the event loop: in WAL mode each
statement is a fresh read transaction that sees every commit made before it, and a point lookup
never waits for a writer. Opening a connection per request instead cost about 60 ms a request
under 32 concurrent clients (tools/bench_http.py), most of it queueing for the control file.
On PostgreSQL the lookup runs on a connection kept for the event loop (``storage/pg/shared.py``).
"""

from __future__ import annotations

import hashlib
import secrets
import sqlite3
from dataclasses import dataclass

from mcp_memory.core.errors import InvalidInputError, NotFoundError
from mcp_memory.storage.control import ControlFile

TOKEN_PREFIX = "mcpm_"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tokens (
    id TEXT PRIMARY KEY,
    hash TEXT NOT NULL UNIQUE,
    principal TEXT NOT NULL,
    namespace TEXT,
    label TEXT,
    created_at REAL NOT NULL,
    expires_at REAL,
    revoked_at REAL
);
"""


@dataclass(frozen=True)
class TokenRecord:
    id: str
    principal: str
    namespace: str | None
    label: str | None
    created_at: float
    expires_at: float | None
    revoked_at: float | None

    def live(self, now: float) -> bool:
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


_COLUMNS = "id, principal, namespace, label, created_at, expires_at, revoked_at"


class TokenStore(ControlFile):
    """``services.control_ports.TokenCheck`` (where its methods' contracts are), and what the
    `token` command issues and revokes."""

    schema = _SCHEMA

    @staticmethod
    def _insert(conn: sqlite3.Connection, record: TokenRecord, digest: str) -> None:
        conn.execute(
            f"INSERT INTO tokens({_COLUMNS}, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (*_values(record), digest),
        )

    async def create(
        self, principal: str, namespace: str | None, label: str | None, now: float, expires_at: float | None
    ) -> tuple[str, TokenRecord]:
        """A new token and its record; the token is returned once and never stored."""
        if not principal.strip() or len(principal) > 200:
            raise InvalidInputError("principal", "must be 1 to 200 characters, not blank")
        if namespace is not None and (not namespace.strip() or len(namespace) > 200):
            raise InvalidInputError("namespace", "must be 1 to 200 characters, not blank")
        if expires_at is not None and expires_at <= now:
            raise InvalidInputError("expires", "is in the past; give a duration such as 90d or a future date")
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        record = TokenRecord("tok_" + secrets.token_hex(6), principal, namespace, label, now, expires_at, None)
        await self._call(self._insert, record, token_hash(token))
        return token, record

    @staticmethod
    def _find(conn: sqlite3.Connection, digest: str) -> tuple[object, ...] | None:
        # fetchall runs the statement to its end, so no read transaction (and no old snapshot)
        # outlives the lookup on a connection that stays open.
        rows: list[tuple[object, ...]] = conn.execute(
            f"SELECT {_COLUMNS} FROM tokens WHERE hash = ?", (digest,)
        ).fetchall()
        return rows[0] if rows else None

    async def verify(self, token: str, now: float) -> TokenRecord | None:
        if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
            return None
        row = await self._lookup(f"SELECT {_COLUMNS} FROM tokens WHERE hash = ?", token_hash(token))
        if row is None:
            return None
        record = _record(row)
        return record if record.live(now) else None

    async def alive(self, token_id: str, now: float) -> bool:
        row = await self._lookup(f"SELECT {_COLUMNS} FROM tokens WHERE id = ?", token_id)  # every inspector page
        return row is not None and _record(row).live(now)

    @staticmethod
    def _all(conn: sqlite3.Connection) -> list[tuple[object, ...]]:
        return conn.execute(f"SELECT {_COLUMNS} FROM tokens ORDER BY created_at").fetchall()

    async def list(self) -> list[TokenRecord]:
        return [_record(row) for row in await self._call(self._all)]

    @staticmethod
    def _revoke(conn: sqlite3.Connection, token_id: str, now: float) -> int:
        cursor = conn.execute("UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", (now, token_id))
        return cursor.rowcount

    async def revoke_secret(self, token: str, now: float) -> str:
        """Revoke the token itself (pasted instead of its id); its id. The token is never echoed."""
        row = await self._call(self._find, token_hash(token))
        if row is None:
            raise NotFoundError("token", "(the token you gave, not shown)")
        record = _record(row)
        await self.revoke(record.id, now)
        return record.id

    async def revoke(self, token_id: str, now: float) -> None:
        if not await self._call(self._revoke, token_id, now):
            known = {r.id for r in await self.list()}
            if token_id in known:
                return  # already revoked: revoking again changes nothing
            raise NotFoundError("token", token_id)

    @staticmethod
    def _count_live(conn: sqlite3.Connection, now: float) -> int:
        row = conn.execute(
            "SELECT COUNT(*) FROM tokens WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)",
            (now,),
        ).fetchone()
        return int(row[0])

    async def count_live(self, now: float) -> int:
        return int(await self._call(self._count_live, now))


def _values(record: TokenRecord) -> tuple[object, ...]:
    return (
        record.id,
        record.principal,
        record.namespace,
        record.label,
        record.created_at,
        record.expires_at,
        record.revoked_at,
    )


def _record(row: tuple[object, ...]) -> TokenRecord:
    ident, principal, namespace, label, created, expires, revoked = row
    return TokenRecord(
        id=str(ident),
        principal=str(principal),
        namespace=None if namespace is None else str(namespace),
        label=None if label is None else str(label),
        created_at=float(created),  # type: ignore[arg-type]
        expires_at=None if expires is None else float(expires),  # type: ignore[arg-type]
        revoked_at=None if revoked is None else float(revoked),  # type: ignore[arg-type]
    )

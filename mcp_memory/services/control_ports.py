"""Protocols of what the processes on one data directory share: pass leases and records, and the
bearer tokens the network server verifies (SQLite's control file today)."""

from __future__ import annotations

from typing import Any, Protocol


class PassControl(Protocol):
    """Leases that let one process at a time run a lifecycle pass, and the record of passes."""

    async def acquire(self, name: str, holder: str, now: float, seconds: float) -> bool:
        """Take (or renew) the lease ``name`` unless another live holder has it."""
        ...

    async def holder(self, name: str) -> tuple[str, float] | None:
        """Who holds the lease ``name`` and until when (it may have expired), or None."""
        ...

    async def release(self, name: str, holder: str) -> None: ...

    async def record(
        self, name: str, holder: str, started: float, finished: float, outcome: str, details: dict[str, Any]
    ) -> None: ...

    async def recent(self, limit: int = 10) -> list[dict[str, Any]]: ...


class TokenIdentity(Protocol):
    """Whom a live bearer token names."""

    @property
    def id(self) -> str: ...

    @property
    def principal(self) -> str: ...

    @property
    def namespace(self) -> str | None: ...

    @property
    def expires_at(self) -> float | None: ...


class TokenCheck(Protocol):
    """Verifies the bearer tokens `mcp-memory token create` issues (the store keeps hashes only)."""

    async def verify(self, token: str, now: float) -> TokenIdentity | None:
        """Whom the token names, or None when it is unknown, revoked or expired."""
        ...

    async def alive(self, token_id: str, now: float) -> bool:
        """Whether the token with this id is still live (neither revoked nor expired); the web
        inspector's sessions end with it."""
        ...


class UiSessionRecord(Protocol):
    @property
    def principal(self) -> str: ...

    @property
    def namespace(self) -> str | None: ...

    @property
    def token_id(self) -> str: ...

    @property
    def csrf(self) -> str: ...

    @property
    def expires_at(self) -> float: ...


class UiSessions(Protocol):
    """The web inspector's sign-ins, shared by every process on the data directory."""

    async def open(
        self, principal: str, namespace: str | None, token_id: str, now: float, expires_at: float
    ) -> tuple[str, UiSessionRecord]:
        """A new session's id (shown once, for the cookie; never stored) and its record."""
        ...

    async def find(self, session_id: str, now: float) -> UiSessionRecord | None:
        """The live session the id names, or None (unknown, signed out or expired)."""
        ...

    async def close_session(self, session_id: str) -> None: ...

    async def close_principal(self, principal: str) -> None:
        """End every session of the principal."""
        ...


class ConfirmationCodes(Protocol):
    """forget_user's open confirmation codes, one per principal, where every process of the
    deployment finds them (the second call may reach another replica than the first)."""

    async def issue(self, principal: str, code: str, expires_at: float) -> None:
        """Open ``code`` for the principal, voiding any code it had."""
        ...

    async def take(self, principal: str, code: str, now: float) -> bool:
        """Whether ``code`` is the principal's open, unexpired code; the open code is void after the
        call either way (single use, and a wrong guess voids it)."""
        ...

    async def void(self, principal: str) -> None: ...

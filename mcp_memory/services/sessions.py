"""Derived session keys: one per caller and client, renewed after an inactivity window."""

from __future__ import annotations

import threading

from mcp_memory.core.ids import new_id
from mcp_memory.core.models import Provenance, Scope

_PRUNE_ABOVE = 10_000


class SessionTracker:
    def __init__(self, idle_seconds: float) -> None:
        self.idle_seconds = idle_seconds
        self._lock = threading.Lock()
        self._sessions: dict[tuple[str, str | None, str | None, str | None], tuple[str, float]] = {}

    def touch(self, scope: Scope, provenance: Provenance, now: float) -> str:
        """The caller's current session key; a new one after ``idle_seconds`` of silence."""
        key = (scope.principal, scope.namespace, provenance.client_name, provenance.transport)
        with self._lock:
            current = self._sessions.get(key)
            expired = current is None or now - current[1] > self.idle_seconds
            session = f"s-{new_id()}" if expired or current is None else current[0]
            self._sessions[key] = (session, now)
            if len(self._sessions) > _PRUNE_ABOVE:  # many callers come and go: forget the idle ones
                self._sessions = {k: v for k, v in self._sessions.items() if now - v[1] <= self.idle_seconds}
            return session

"""forget_user: the deletion of everything a principal has, in two steps.

A dry run returns what would go and a short-lived, single-use confirmation code bound to the
principal; only a call that brings the code back deletes. So a model misled by a stored
instruction cannot wipe a user in one call. A wrong code voids the outstanding one.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from mcp_memory.core.errors import AccessDeniedError, InvalidInputError
from mcp_memory.core.models import Scope
from mcp_memory.services.checks import text_field
from mcp_memory.services.control_ports import ConfirmationCodes
from mcp_memory.services.ports import MemoryStore

CODE_SECONDS = 300


@dataclass(frozen=True, slots=True)
class Erasure:
    """What forget_user counted (a dry run: the code that confirms it, open until ``code_expires_at``,
    or withdrawn because the person said no) or deleted (``erased_at``; ``leaves`` says what the
    backend still holds for a while)."""

    counts: dict[str, int]
    confirmation_code: str | None = None
    code_expires_at: float | None = None
    withdrawn: bool = False
    erased_at: float | None = None
    leaves: str = ""

    @property
    def dry_run(self) -> bool:
        return self.erased_at is None


class LocalCodes:
    """Confirmation codes held by this process alone (a service built without the control tables)."""

    def __init__(self) -> None:
        self._codes: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()

    async def issue(self, principal: str, code: str, expires_at: float) -> None:
        with self._lock:
            self._codes[principal] = (code, expires_at)

    async def take(self, principal: str, code: str, now: float) -> bool:
        with self._lock:
            expected = self._codes.pop(principal, None)
        return expected is not None and expected[1] >= now and hmac.compare_digest(expected[0], code)

    async def void(self, principal: str) -> None:
        with self._lock:
            self._codes.pop(principal, None)


class ErasureService:
    def __init__(
        self, store: MemoryStore, clock: Callable[[], float] = time.time, codes: ConfirmationCodes | None = None
    ) -> None:
        self.store = store
        self.rows = store.counts
        self.clock = clock
        self.codes: ConfirmationCodes = codes if codes is not None else LocalCodes()

    async def forget_user(self, scope: Scope, confirmation_code: str | None = None) -> Erasure:
        """Everything of ``scope``'s principal, in every namespace: a caller bound to one namespace,
        which cannot see the others, may neither count nor erase them."""
        if scope.namespace is not None:
            raise AccessDeniedError(
                f"forget_user erases everything of {scope.principal!r} in every namespace, and this connection "
                f"is bound to namespace {scope.namespace!r}; call it through a connection (or token) without a "
                "namespace, or use forget with filters to delete this namespace's memories"
            )
        now = self.clock()
        if confirmation_code is None:
            counts = await self.rows.principal_counts(scope)
            code = f"{secrets.token_hex(3)}-{secrets.token_hex(3)}"
            await self.codes.issue(scope.principal, code, now + CODE_SECONDS)
            return Erasure(counts, confirmation_code=code, code_expires_at=now + CODE_SECONDS)
        return await self._erase(scope, confirmation_code, now)

    async def withdraw(self, scope: Scope, dry: Erasure) -> Erasure:
        """The person said no: the open code is void, and the dry run says so (without it)."""
        await self.codes.void(scope.principal)
        return replace(dry, confirmation_code=None, code_expires_at=None, withdrawn=True)

    async def _erase(self, scope: Scope, confirmation_code: str, now: float) -> Erasure:
        text_field("confirmation_code", confirmation_code)
        if not await self.codes.take(scope.principal, confirmation_code, now):
            raise InvalidInputError(
                "confirmation_code",
                "is wrong, used or expired, and nothing was deleted; call forget_user without it to get a new code",
            )
        counts = await self.store.erase_principal(scope, now)
        return Erasure(counts, erased_at=now, leaves=self.store.erasure_leaves)

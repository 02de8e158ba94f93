"""Who is looking: the inspector's sign-in, its session cookie and its CSRF check.

A person signs in with the bearer token their MCP client uses (or a JWT from the configured
issuer), verified by the same code as every MCP request; `mcp-memory ui` instead opens the
browser on a one-time link for the local principal, the way notebook servers do. Either opens a
session: a random id in an HttpOnly, SameSite=Strict cookie scoped to /ui/, whose hash the
control file keeps with the principal, the namespace binding, the token's id (revoking the token
ends the session) and a CSRF secret that every form carries back.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from mcp_memory.core.models import Scope
from mcp_memory.services.control_ports import TokenCheck, UiSessionRecord, UiSessions

COOKIE = "mcpm_ui"  # cookies ignore ports: the local inspector's has its own name, so the two never meet
LOCAL_COOKIE = "mcpm_ui_local"
LOCAL_TOKEN_ID = "local"
STORE_TOKEN_PREFIX = "tok_"  # ids of the tokens `mcp-memory token create` issues (revocable)
CODE_SECONDS = 600.0


@dataclass(frozen=True)
class SignedIn:
    """Whom a token names, as the MCP gateway verified it."""

    principal: str
    namespace: str | None
    token_id: str
    expires_at: float | None


Verify = Callable[[str], Awaitable[SignedIn | None]]


class OneTimeCodes:
    """Login links for the local principal: each code opens one session, within ten minutes."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._codes: dict[str, float] = {}

    def issue(self) -> str:
        now = self.clock()
        self._codes = {code: until for code, until in self._codes.items() if until > now}  # none piles up
        code = secrets.token_urlsafe(24)
        self._codes[code] = now + CODE_SECONDS
        return code

    def redeem(self, code: str) -> bool:
        until = self._codes.pop(code, None) if code else None
        return until is not None and until > self.clock()


@dataclass(frozen=True)
class Visitor:
    """A signed-in person: the scope every page reads and writes in, and the session's CSRF secret."""

    scope: Scope
    csrf: str
    session_id: str

    def csrf_ok(self, given: str) -> bool:
        return hmac.compare_digest(self.csrf.encode(), given.encode())


class SignIn:
    """Opens, finds and closes sessions; a session lives `session_hours`, or less when its token
    expires sooner, and ends with its token's revocation."""

    def __init__(
        self,
        sessions: UiSessions,
        *,
        verify: Verify | None,
        tokens: TokenCheck | None,
        local: Scope | None,
        session_hours: float,
        clock: Callable[[], float] = time.time,
        announce: Callable[[str], None] | None = None,
    ) -> None:
        self.sessions = sessions
        self.verify = verify
        self.tokens = tokens
        self.local = local
        self.codes = OneTimeCodes(clock)
        self.seconds = session_hours * 3600
        self.clock = clock
        self.announce = announce  # where a new one-time link is told (the terminal of `mcp-memory ui`)
        self.cookie = LOCAL_COOKIE if local is not None else COOKIE

    def new_link(self, base: str) -> str | None:
        """A fresh one-time link (``base`` is the inspector's root URL), told where the local
        inspector was started; None for an inspector that signs in with tokens."""
        if self.local is None:
            return None
        link = f"{base}/login?once={self.codes.issue()}"
        if self.announce is not None:
            self.announce(link)
        return link

    async def with_token(self, token: str) -> tuple[str, UiSessionRecord] | None:
        """A session for the token's owner, or None when the token is unknown, revoked or expired."""
        token = token.strip()
        if token[:7].lower() == "bearer ":  # pasted with its scheme, as a config file holds it
            token = token[7:].strip()
        if self.verify is None or not token or len(token) > 4096:
            return None
        who = await self.verify(token)
        if who is None:
            return None
        now = self.clock()
        until = now + self.seconds if who.expires_at is None else min(now + self.seconds, who.expires_at)
        return await self.sessions.open(who.principal, who.namespace, who.token_id, now, until)

    async def with_code(self, code: str) -> tuple[str, UiSessionRecord] | None:
        """A session for the local principal, when the one-time code is good."""
        if self.local is None or not self.codes.redeem(code):
            return None
        now = self.clock()
        return await self.sessions.open(
            self.local.principal, self.local.namespace, LOCAL_TOKEN_ID, now, now + self.seconds
        )

    async def visitor(self, session_id: str | None) -> Visitor | None:
        if not session_id:
            return None
        now = self.clock()
        session = await self.sessions.find(session_id, now)
        if session is None:
            return None
        if (session.token_id == LOCAL_TOKEN_ID) != (self.local is not None):
            return None  # a session of the other kind of inspector on this data directory: not ours
        revocable = session.token_id.startswith(STORE_TOKEN_PREFIX)
        if revocable and (self.tokens is None or not await self.tokens.alive(session.token_id, now)):
            await self.sessions.close_session(session_id)
            return None
        return Visitor(Scope(session.principal, session.namespace), session.csrf, session_id)

    async def sign_out(self, session_id: str) -> None:
        await self.sessions.close_session(session_id)

    async def sign_out_everywhere(self, principal: str) -> None:
        """End every session of the principal (its memories were just erased)."""
        await self.sessions.close_principal(principal)

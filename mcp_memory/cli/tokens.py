"""`mcp-memory token create | list | revoke`: bearer tokens for the network transports (their hashes
live in the data directory's control file; a token is shown once, at creation)."""

from __future__ import annotations

import argparse
import sys
import time
from contextlib import closing
from typing import TYPE_CHECKING

from mcp_memory.config import Settings

if TYPE_CHECKING:
    from mcp_memory.storage.tokens import TokenStore


def _out(text: str) -> None:
    sys.stdout.write(text + "\n")


def _err(text: str) -> None:
    sys.stderr.write(text + "\n")


async def run(settings: Settings, args: argparse.Namespace) -> int:
    from mcp_memory.storage.tokens import TokenStore

    with closing(TokenStore.for_settings(settings)) as store:
        return await _run(store, args)


async def _run(store: TokenStore, args: argparse.Namespace) -> int:
    now = time.time()
    if args.token_command == "create":
        expires = None if args.expires in (None, "never") else parse_expiry(args.expires, now)
        token, record = await store.create(args.for_principal, args.for_namespace, args.label, now, expires)
        _out(token)
        until = when(record.expires_at) if record.expires_at else "never"
        _err(f"token {record.id} for principal {record.principal!r}, expires {until}; shown once, keep it secret")
        return 0
    if args.token_command == "list":
        _out("id\tprincipal\tnamespace\tstate\tcreated\texpires\tlabel")
        for r in await store.list():
            state = "revoked" if r.revoked_at else ("expired" if not r.live(now) else "live")
            until = when(r.expires_at) if r.expires_at else "never"
            fields = [r.id, r.principal, r.namespace or "-", state, when(r.created_at), until, r.label or ""]
            fields = [" ".join(f.split()) for f in fields]  # a tab or newline in a label cannot break the columns
            _out("\t".join(fields))
        return 0
    from mcp_memory.storage.tokens import TOKEN_PREFIX

    if args.id.startswith(TOKEN_PREFIX):  # the token itself was pasted: revoke it, never print it
        token_id = await store.revoke_secret(args.id, now)
    else:
        token_id = args.id
        await store.revoke(token_id, now)
    _err(f"token {token_id} revoked; its next request is refused")
    return 0


def when(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def parse_expiry(text: str, now: float) -> float:
    """`90d`, `12h`, `30m` from now, or an ISO date/time (UTC when no zone is given)."""
    return moment(text, now, "expires", "a duration (90d, 12h, 30m) nor a date")


def moment(text: str, now: float, field: str, wanted: str, given: str | None = None) -> float:
    """A duration from now (`90d`, `12h`, `30m`) or an ISO date/time, UTC when it names no zone;
    ``given`` is what the user typed, when ``text`` is a part of it."""
    from datetime import UTC, datetime

    from mcp_memory.core.errors import InvalidInputError

    units = {"d": 86_400, "h": 3_600, "m": 60}
    if text[:-1].isdigit() and text[-1:] in units:
        return now + int(text[:-1]) * units[text[-1]]
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInputError(field, f"{given or text!r} is neither {wanted}") from None
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return at.timestamp()

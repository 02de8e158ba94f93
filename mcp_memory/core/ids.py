"""Opaque, sortable ids (ULID: 48-bit millisecond time + 80 random bits, Crockford base32)."""

from __future__ import annotations

import secrets
import threading
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_lock = threading.Lock()
_last = (0, 0)


def new_id(now_ms: int | None = None) -> str:
    """A 26-character ULID, monotonic within one process even inside one millisecond."""
    global _last
    with _lock:
        ms = int(time.time() * 1000) if now_ms is None else now_ms
        last_ms, last_rand = _last
        rand = last_rand + 1 if ms <= last_ms else secrets.randbits(80)
        if ms < last_ms:
            ms = last_ms
        _last = (ms, rand)
    value = (ms << 80) | (rand & ((1 << 80) - 1))
    chars = []
    for _ in range(26):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))

"""The one redactor: every persisted string and every log record passes through it.

It replaces credentials (API keys, bearer tokens, passwords, private keys, Authorization
headers, credentials in URLs) with a marker that names their kind, so a memory keeps its
meaning ("the OpenAI key is [REDACTED:openai-key]") without the secret.
"""

from __future__ import annotations

import logging
import re
from typing import Any

_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (
        "private-key",
        re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)", re.S),
    ),
    (
        "authorization",
        re.compile(r"(?i)(?<=authorization)(\s*[:=]\s*)(?:\"|')?(?:(?:bearer|basic|token)\s+)?[^\s\"',;]{6,}"),
    ),
    ("bearer-token", re.compile(r"(?i)(?<=bearer\s)\s*[A-Za-z0-9._~+/=-]{12,}")),
    # A key starts a word: "task-01J..." (our own task ids) ends in "sk-" but is no key.
    ("anthropic-key", re.compile(r"(?<![A-Za-z0-9])sk-ant-[A-Za-z0-9_-]{16,}")),
    ("openai-key", re.compile(r"(?<![A-Za-z0-9])sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}")),
    ("github-token", re.compile(r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})")),
    ("aws-access-key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("slack-token", re.compile(r"xox[abposr]-[A-Za-z0-9-]{10,}")),
    ("google-api-key", re.compile(r"AIza[0-9A-Za-z_-]{35}")),
    ("stripe-key", re.compile(r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}")),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    ("url-credentials", re.compile(r"(?<=://)[^/\s:@]{1,64}:[^/\s@]{1,128}(?=@)")),
    (
        "secret",
        re.compile(
            r"(?i)(?<![A-Za-z0-9])((?:api[_-]?key|apikey|secret[_-]?key|client[_-]?secret|access[_-]?token|"
            r"auth[_-]?token|refresh[_-]?token|password|passwd|pwd|token|secret)[\"']?\s*(?:[:=]|\bis\b)\s*)"
            r"(?:\"|')?([^\s\"',;]{4,})"
        ),
    ),
    (
        "password",
        re.compile(r"(?i)((?:密码|口令|密钥|令牌)\s*(?:[:：=]|是|为)\s*)([^\s，。,;；]{4,})"),
    ),
]


_KNOWN: set[str] = set()  # secrets this process was configured with: scrubbed whatever their shape


def known_secret(value: str) -> None:
    """Redact ``value`` wherever it appears from now on (a configured API key that no pattern
    matches, e.g. a corporate gateway's key, echoed back by an upstream error message)."""
    if len(value) >= 8:
        _KNOWN.add(value)


def redact(text: str) -> str:
    """Return ``text`` with every credential replaced by ``[REDACTED:<kind>]``."""
    if not text:
        return text
    for secret in _KNOWN:
        if secret in text:
            text = text.replace(secret, "[REDACTED:configured-key]")
    for kind, pattern in _PATTERNS:
        marker = f"[REDACTED:{kind}]"
        if pattern.groups:
            text = pattern.sub(lambda m, marker=marker: f"{m.group(1)}{marker}", text)  # type: ignore[misc]
        else:
            text = pattern.sub(marker, text)
    return text


# A JSON key that names a credential: its string values are secrets whatever they look like.
_SECRET_KEY = re.compile(
    r"(?i)(?:^|[_-])(?:api[_-]?key|apikey|secret[_-]?key|client[_-]?secret|access[_-]?token|auth[_-]?token|"
    r"refresh[_-]?token|password|passwd|pwd|token|secret|authorization|private[_-]?key|credentials?|cookie)$"
)


def redact_value(value: Any, key: str | None = None) -> Any:
    """Redact every string inside a JSON-like value; a value under a credential's key is redacted whole."""
    if isinstance(value, str):
        if key is not None and _SECRET_KEY.search(key) and value:
            return "[REDACTED:secret]"
        return redact(value)
    if isinstance(value, dict):
        return {redact(str(k)): redact_value(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_value(v, key) for v in value]
    return value


class RedactingFilter(logging.Filter):
    """Applies the redactor to every log record before any handler formats it."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message or record.args:
            record.msg = cleaned
            record.args = None
        if record.exc_info and record.exc_info[1] is not None:
            # Tracebacks carry exception text; format once, redact, and drop the raw info.
            formatted = logging.Formatter().formatException(record.exc_info)
            record.msg = f"{record.msg}\n{redact(formatted)}"
            record.exc_info = None
            record.exc_text = None
        return True

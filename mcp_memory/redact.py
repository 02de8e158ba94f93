"""The one redactor: every persisted string and every log record passes through it.

It replaces credentials (API keys, bearer tokens, passwords, private keys, Authorization
headers, credentials in URLs) with a marker that names their kind, so a memory keeps its
meaning ("the OpenAI key is [REDACTED:openai-key]") without the secret.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from typing import Any

# The shape of an AWS secret access key: 40 characters of base64 with both cases (a git SHA-1 is
# 40 characters too, but lowercase hex). Alone it is indistinguishable from other base64, so it is
# only a secret in the context `_AWS_CONTEXT` finds: an access key id or the key's name nearby.
_AWS_SECRET = re.compile(
    r"(?<![A-Za-z0-9/+=])(?=[A-Za-z0-9/+]*[A-Z])(?=[A-Za-z0-9/+]*[a-z])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"
)
_AWS_CONTEXT = re.compile(r"(?i)\b(?:AKIA|ASIA)[0-9A-Z]{16}\b|aws|secret[_ -]?access[_ -]?key")

_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (
        "private-key",
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
            re.S,
        ),
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
    ("slack-token", re.compile(r"\bxox[abposre]-[A-Za-z0-9-]{10,}|\bxapp-\d-[A-Za-z0-9-]{10,}")),
    ("slack-webhook", re.compile(r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/-]{16,}")),
    ("google-api-key", re.compile(r"AIza[0-9A-Za-z_-]{35}")),
    ("google-oauth", re.compile(r"\bGOCSPX-[A-Za-z0-9_-]{20,}|\bya29\.[0-9A-Za-z_-]{20,}")),
    # An Entra ID (Azure AD) client secret: three characters, a digit, "Q~", then 31 to 34 more.
    (
        "azure-client-secret",
        re.compile(r"(?<![A-Za-z0-9_~.-])[A-Za-z0-9_~.-]{3}\dQ~[A-Za-z0-9_~.-]{31,34}(?![A-Za-z0-9_~.-])"),
    ),
    # Storage and Service Bus connection strings, SAS signatures.
    (
        "azure-key",
        re.compile(r"(?i)((?:AccountKey|SharedAccessKey|SharedAccessSignature)\s*=\s*)([A-Za-z0-9+/=%]{16,})"),
    ),
    ("azure-sas", re.compile(r"(?i)([?&]sig=)([A-Za-z0-9+/=%]{16,})")),
    ("stripe-key", re.compile(r"\b(?:[rs]k_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{16,})")),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    # postgres://user:pass@host, redis://:pass@host, mongodb+srv://user:pass@cluster.
    ("url-credentials", re.compile(r"(?<=://)[^/\s:@]{0,64}:[^/\s@]{1,128}(?=@)")),
    (
        "secret",
        re.compile(
            r"(?i)(?<![A-Za-z0-9])((?:api[_-]?key|apikey|secret[_-]?(?:access[_-]?)?key|client[_-]?secret|"
            r"access[_-]?token|auth[_-]?token|refresh[_-]?token|password|passwd|pwd|token|secret)[\"']?\s*"
            r"(?:[:=]|\bis\b)\s*)(?:\"|')?(?!\[REDACTED)([^\s\"',;]{4,})"
        ),
    ),
    (
        "password",
        re.compile(r"(?i)((?:密码|口令|密钥|令牌)\s*(?:[:：=]|是|为)\s*)([^\s，。,;；]{4,})"),
    ),
]


_MARKER = re.compile(r"\[REDACTED:([a-z0-9-]+)\]")

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
    if _AWS_CONTEXT.search(text):
        text = _AWS_SECRET.sub("[REDACTED:aws-secret-key]", text)
    for kind, pattern in _PATTERNS:
        marker = f"[REDACTED:{kind}]"
        if pattern.groups:
            text = pattern.sub(lambda m, marker=marker: f"{m.group(1)}{marker}", text)  # type: ignore[misc]
        else:
            text = pattern.sub(marker, text)
    return text


def secret_kinds(text: str) -> list[str]:
    """The kinds of credential ``text`` holds: empty when the redactor would leave it as it is."""
    before = Counter(_MARKER.findall(text))
    after = Counter(_MARKER.findall(redact(text)))
    return sorted(kind for kind, n in after.items() if n > before[kind])


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

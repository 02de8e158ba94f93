"""The one redactor: every persisted string, every log record and every prompt passes through it.

It is called from three boundaries only (ADR 24): what comes in (`services.incoming`), what we say
(the log filter, `logs.scrub`), what goes to a model (`llm.client`).

It replaces credentials (API keys, bearer tokens, passwords, private keys, Authorization
headers, credentials in URLs) with a marker that names their kind, so a memory keeps its
meaning ("the OpenAI key is [REDACTED:openai-key]") without the secret.

Three ways a credential is known: its shape (`sk-proj-...`, `ghp_...`, a JWT); an assignment to
a credential's name (`password=...`, "the secret is ...", "密码：..."), whatever the value looks
like; and, for a value of no known shape and no assignment, its company: a random-looking token
of 16 characters or more in the same sentence as a credential word (password, passphrase,
secret, token, key, API key, vault, credential; 密码, 密钥, 口令, 令牌 ...), within a few words
of it ("vault passphrase 9fK2mQ...", "生产环境的令牌9fK2mQ...请勿外传"). Random-looking means both
letter cases; a character class that changes at almost every other character (not a word with a
number); mostly not words (not a CamelCase or snake_case name: "getUserById2FactorAuth",
"AWS_S3_Bucket_2024"); and about 3.5 bits of entropy a character. A random 40-character token
meets all four but about once in a thousand; a 16-character one misses about once in forty.

What that last rule leaves alone, by design: a token of hex digits and hyphens (a git commit, a
digest, a UUID) is never a secret by its company, only by an explicit assignment ("password:
3f9a...", "secret=..."): "key commit 3f9a2c1d..." is a code review note, not a key. Nor are our
own ids (ULIDs: one case), single-case tokens (base32 2FA seeds slip through), ticket ids,
version strings, paths, URLs (a token inside a URL is the URL's; a URL's credentials have their
own pattern), or words that merely contain a credential word ("keyboard", "monkey", "tokenizer").
"""

from __future__ import annotations

import math
import re
from collections import Counter
from itertools import pairwise
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

# A credential word, whole ("keyboard" and "monkey" are not "key"), not the kind in a marker.
_CREDENTIAL_WORD = re.compile(
    r"(?i)(?<![A-Za-z])(?<!REDACTED:)(?:pass(?:word|wd|phrase|code)s?|pwd|secrets?|tokens?|(?:api[ _-]?)?keys?|"
    r"vaults?|credentials?|creds)(?![A-Za-z])|密码|密钥|秘钥|口令|令牌|凭证|凭据"
)
_TOKEN_CHARS = r"A-Za-z0-9+/=_~!@#$%^&*-"
_TOKEN = re.compile(rf"(?<![{_TOKEN_CHARS}])[{_TOKEN_CHARS}]{{16,}}(?![{_TOKEN_CHARS}])")
_HEX_ONLY = re.compile(r"[0-9A-Fa-f-]+")
_WORDISH = re.compile(r"[A-Z]?[a-z]{2,}")  # the words of a CamelCase or snake_case name
_VOWEL = re.compile(r"(?i)[aeiouy]")
_PART = re.compile(r"(?<![A-Za-z0-9])(?:[A-Z]{2,5}|[0-9]+)(?![A-Za-z0-9])")  # "AWS_", "-GNU-", "_2024"
_SENTENCE_END = re.compile(r"[.!?;](?=\s)|[。！？；\n]")  # the word must be in the token's sentence
_BEFORE, _AFTER = 48, 32  # characters around the token the word may be in

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
    return _redact_by_company(text)


def _looks_random(token: str) -> bool:
    """Both letter cases, classes mixed at almost every other character, high entropy (see the module)."""
    if _HEX_ONLY.fullmatch(token):
        return False
    classes = [0 if c.isdigit() else 1 if c.isupper() else 2 for c in token if c.isascii() and c.isalnum()]
    if 1 not in classes or 2 not in classes or len(classes) < 8:
        return False
    changes = sum(1 for a, b in pairwise(classes) if a != b)
    if changes < 0.3 * (len(classes) - 1):  # "ProductionDatabase2024": long runs of one class
        return False
    worded = sum(len(w) for w in _WORDISH.findall(token) if len(w) >= 3 and _VOWEL.search(w))
    worded += sum(len(part) for part in _PART.findall(token))
    if worded >= 0.6 * len(classes):  # "getUserById2FactorAuth", "AWS_S3_Bucket_2024": words, not noise
        return False
    entropy = -sum(n / len(token) * math.log2(n / len(token)) for n in Counter(token).values())
    return entropy >= min(3.5, math.log2(len(token)) - 0.8)  # 16 characters hold at most 4 bits each


def _in_company(text: str, start: int, end: int) -> bool:
    """A credential word in the token's sentence, within a few words of it."""
    before = text[max(0, start - _BEFORE) : start]
    ends = [m.end() for m in _SENTENCE_END.finditer(before)]
    before = before[ends[-1] :] if ends else before
    after = text[end : end + _AFTER]
    cut = _SENTENCE_END.search(after)
    after = after[: cut.start()] if cut else after
    return bool(_CREDENTIAL_WORD.search(before) or _CREDENTIAL_WORD.search(after))


def _redact_by_company(text: str) -> str:
    """A random-looking token near a credential word becomes ``[REDACTED:secret]``."""
    if not _CREDENTIAL_WORD.search(text):
        return text

    def replace(match: re.Match[str]) -> str:
        token = match.group(0)
        chunk_start = max(text.rfind(" ", 0, match.start()), text.rfind("\n", 0, match.start())) + 1
        if "://" in text[chunk_start : match.end()] or not _looks_random(token):
            return token
        return "[REDACTED:secret]" if _in_company(text, match.start(), match.end()) else token

    return _TOKEN.sub(replace, text)


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

"""What comes in: the one redaction point for every text a caller gives that may be stored or echoed.

Redaction happens at three boundaries and nowhere else (ADR 24): here, for what comes in; in the
log filter (`mcp_memory.logs.scrub`), for what we say (log lines, the client's log notifications,
a tool error's message); in the LLM client, for what goes to a model. Only these modules and the
redactor itself import `mcp_memory.redact` (tests/test_code_shape.py holds the list).

What passes through here: a memory's content, tags and metadata (`intake.persisted`); a task's
title, goal, constraints, checkpoint changes and tree edits (`services.tasks`); a golden query
(`services.golden`); imported memories and golden queries (`services.portability`); the recall query
echoed back in the answer (`services.recall`, `services.memory`). And the refusals: an identifier
(`checks.identifier`) or a memory file's line (`memory_file`) that holds a credential is refused,
not rewritten, so the caller learns which kind and keeps an id that matches what is stored.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mcp_memory import redact


def redacted(text: str) -> str:
    """``text`` with every credential replaced by ``[REDACTED:<kind>]``, before it is stored or echoed."""
    return redact.redact(text)


def redacted_or_none(text: str | None) -> str | None:
    return None if text is None else redact.redact(text)


def redacted_all(texts: Iterable[str]) -> list[str]:
    return [redact.redact(t) for t in texts]


def redacted_value(value: Any) -> Any:
    """Every string inside a JSON-like value redacted; a value under a credential's key redacted whole."""
    return redact.redact_value(value)


def secret_kinds(text: str) -> list[str]:
    """The kinds of credential ``text`` holds (empty when none): for what is refused rather than
    rewritten, because it is stored verbatim (an identifier) or the caller must fix it at its source."""
    return redact.secret_kinds(text)

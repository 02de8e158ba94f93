"""Argument checks shared by the services: text SQLite and JSON can carry faithfully."""

from __future__ import annotations

from typing import Any

from mcp_memory.config import Limits
from mcp_memory.core.errors import InvalidInputError, LimitExceededError
from mcp_memory.core.text import TextProblem, check_text
from mcp_memory.services import incoming

MIN_BUDGET_TOKENS = 200
"""The least ``budget_tokens`` recall and resume take: a resume packet's goal and tree, or a few
recalled memories with their reasons. One bound for both, as the two mean the same thing."""


def budget(value: int | None, default: int, limits: Limits) -> int:
    """``budget_tokens`` as given (``default`` when not), within the bounds recall and resume share."""
    tokens = default if value is None else value
    if tokens < MIN_BUDGET_TOKENS:
        raise InvalidInputError(
            "budget_tokens",
            f"is {tokens}, too few for an answer; use {MIN_BUDGET_TOKENS} to {limits.max_recall_budget_tokens}"
            " (or leave it out for the default), and lower k for fewer memories",
        )
    if tokens > limits.max_recall_budget_tokens:
        raise LimitExceededError(
            "budget_tokens",
            f"is {tokens}; use {MIN_BUDGET_TOKENS} to {limits.max_recall_budget_tokens}",
            limit_name="limits.max_recall_budget_tokens",
            limit=limits.max_recall_budget_tokens,
        )
    return tokens


def text_field(name: str, value: str) -> None:
    try:
        check_text(value)
    except TextProblem as exc:
        raise InvalidInputError(name, str(exc)) from None


def identifier(name: str, value: str) -> None:
    """An id the caller reuses (a task id, a node id, a key): stored verbatim, so a credential in it
    is refused rather than rewritten, which would leave the caller holding an id that matches nothing."""
    text_field(name, value)
    if not value.strip() or len(value) > 200:
        raise InvalidInputError(name, "must be 1 to 200 characters, not all blank")
    kinds = incoming.secret_kinds(value)
    if kinds:
        raise InvalidInputError(
            name,
            f"holds what looks like a credential ({', '.join(kinds)}); identifiers are stored as given and "
            "cannot be redacted, so choose one without the secret",
        )


def json_strings(name: str, value: Any) -> None:
    if isinstance(value, str):
        text_field(name, value)
    elif isinstance(value, dict):
        for k, v in value.items():
            text_field(f"{name} key", str(k))
            json_strings(f"{name}.{k}", v)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            json_strings(f"{name}[{i}]", v)

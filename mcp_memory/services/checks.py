"""Argument checks shared by the services: text SQLite and JSON can carry faithfully."""

from __future__ import annotations

from typing import Any

from mcp_memory.errors import InvalidInputError
from mcp_memory.text import TextProblem, check_text


def text_field(name: str, value: str) -> None:
    try:
        check_text(value)
    except TextProblem as exc:
        raise InvalidInputError(name, str(exc)) from None


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

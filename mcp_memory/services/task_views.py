"""Listing cursors and the size the checkpoint limit measures."""

from __future__ import annotations

import base64
from typing import Any

import orjson

from mcp_memory.core.errors import InvalidInputError
from mcp_memory.core.task_model import TaskHead


def serialised_size(head: TaskHead) -> int:
    """What the checkpoint limit measures: the structured JSON plus the snapshot's UTF-8 bytes."""
    return len(orjson.dumps(head.model_dump(mode="json", exclude={"snapshot"}))) + len(head.snapshot.encode("utf-8"))


def to_cursor(value: Any) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(value)).decode()


def from_cursor(cursor: str | None) -> Any:
    if cursor is None:
        return None
    try:
        return orjson.loads(base64.urlsafe_b64decode(cursor.encode()))
    except (ValueError, orjson.JSONDecodeError):
        raise InvalidInputError("cursor", "is not a cursor this server returned; omit it to start over") from None

"""How tasks and checkpoints are shown: their resource URIs, checkpoint infos, listing cursors and
the size the checkpoint limit measures."""

from __future__ import annotations

import base64
from typing import Any

import orjson

from mcp_memory.core.errors import InvalidInputError
from mcp_memory.core.models import CheckpointRow, to_datetime
from mcp_memory.core.task_schemas import CheckpointInfo, TaskHead


def dt(seconds: float) -> Any:
    return to_datetime(seconds)


def info(row: CheckpointRow) -> CheckpointInfo:
    return CheckpointInfo(
        id=row.id,
        task_id=row.task_id,
        seq=row.seq,
        parent_id=row.parent_id,
        reason=row.reason,
        created_at=dt(row.created_at),
        size=row.size,
        checksum=row.checksum,
    )


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

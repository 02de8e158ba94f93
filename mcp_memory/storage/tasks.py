"""TaskStore: tasks (identity, intent, the live head) and their immutable checkpoints.

Tasks live in the principal's file beside the memories. A write names the head sequence it was
built on; if another client moved the head meanwhile the write is refused (StaleHeadError) and
nothing is written, so two clients never fork a task silently. Checkpoints are never updated or
deleted by this store: a rollback is a new checkpoint.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import aiosqlite
import orjson

from mcp_memory.core.errors import ConflictError, StaleHeadError
from mcp_memory.core.models import CheckpointRow, Scope, TaskRow
from mcp_memory.storage.records import RecordStore

_TASK_COLUMNS = (
    "t.task_id, t.namespace, t.title, t.goal, t.constraints, t.head, t.head_seq, t.created_at, t.updated_at, "
    "t.latest_checkpoint_id, (SELECT COUNT(*) FROM checkpoints c WHERE c.task_id = t.task_id)"
)
_CHECKPOINT_COLUMNS = "id, task_id, seq, parent_id, reason, created_at, size, checksum"


def _task(row: Sequence[Any]) -> TaskRow:
    return TaskRow(
        task_id=row[0],
        namespace=row[1],
        title=row[2],
        goal=row[3],
        constraints=orjson.loads(row[4]),
        head=bytes(row[5]),
        head_seq=int(row[6]),
        created_at=row[7],
        updated_at=row[8],
        latest_checkpoint_id=row[9],
        checkpoints=int(row[10]),
    )


def _checkpoint(row: Sequence[Any], with_envelope: bool = False) -> CheckpointRow:
    return CheckpointRow(
        id=row[0],
        task_id=row[1],
        seq=int(row[2]),
        parent_id=row[3],
        reason=row[4],
        created_at=row[5],
        size=int(row[6]),
        checksum=row[7],
        envelope=bytes(row[8]) if with_envelope else None,
    )


def _visible(scope: Scope) -> tuple[str, list[Any]]:
    """Tasks are principal-wide unless created with a namespace; then only that namespace sees them."""
    if scope.namespace is None:
        return "t.namespace IS NULL", []
    return "(t.namespace IS NULL OR t.namespace = ?)", [scope.namespace]


class TaskStore:
    """The task role (``services.task_ports.TaskRows``, where each method's contract is) over a record
    store's connections, for both backends."""

    def __init__(self, store: RecordStore) -> None:
        self.store = store

    def one_transaction(self, scope: Scope, *, write: bool = False) -> AbstractAsyncContextManager[None]:
        return self.store.one_transaction(scope, write=write)

    async def get(self, scope: Scope, task_id: str) -> TaskRow | None:
        where, params = _visible(scope)
        conn = await self.store.reader(scope)
        rows = list(
            await conn.execute_fetchall(
                f"SELECT {_TASK_COLUMNS} FROM tasks t WHERE t.task_id = ? AND {where}", [task_id, *params]
            )
        )
        return _task(rows[0]) if rows else None

    async def save(
        self, scope: Scope, task: TaskRow, base_seq: int | None, checkpoints: Sequence[CheckpointRow] = ()
    ) -> None:
        async with self.store.transaction(scope) as conn:
            await _check_head(conn, scope, task.task_id, base_seq)
            await conn.execute(
                "INSERT INTO tasks(task_id, namespace, title, goal, constraints, head, head_seq, created_at, "
                "updated_at, latest_checkpoint_id) VALUES (?,?,?,?,?,?,?,?,?,?) "
                "ON CONFLICT(task_id) DO UPDATE SET title = excluded.title, goal = excluded.goal, "
                "constraints = excluded.constraints, head = excluded.head, head_seq = excluded.head_seq, "
                "updated_at = excluded.updated_at, latest_checkpoint_id = excluded.latest_checkpoint_id",
                (
                    task.task_id,
                    task.namespace,
                    task.title,
                    task.goal,
                    orjson.dumps(task.constraints).decode(),
                    task.head,
                    task.head_seq,
                    task.created_at,
                    task.updated_at,
                    task.latest_checkpoint_id,
                ),
            )
            await conn.executemany(
                f"INSERT INTO checkpoints({_CHECKPOINT_COLUMNS}, envelope) VALUES (?,?,?,?,?,?,?,?,?)",
                [
                    (c.id, c.task_id, c.seq, c.parent_id, c.reason, c.created_at, c.size, c.checksum, c.envelope)
                    for c in checkpoints
                ],
            )

    async def checkpoint(self, scope: Scope, task_id: str, checkpoint_id: str) -> CheckpointRow | None:
        if await self.get(scope, task_id) is None:
            return None
        conn = await self.store.reader(scope)
        rows = list(
            await conn.execute_fetchall(
                f"SELECT {_CHECKPOINT_COLUMNS}, envelope FROM checkpoints WHERE task_id = ? AND id = ?",
                [task_id, checkpoint_id],
            )
        )
        return _checkpoint(rows[0], with_envelope=True) if rows else None

    async def heads(self, scope: Scope) -> dict[str, int]:
        conn = await self.store.reader(scope)
        return {str(t): int(s) for t, s in await conn.execute_fetchall("SELECT task_id, head_seq FROM tasks")}

    async def list_tasks(self, scope: Scope, after: tuple[float, str] | None, limit: int) -> list[TaskRow]:
        where, params = _visible(scope)
        if after is not None:
            where += " AND (t.updated_at < ? OR (t.updated_at = ? AND t.task_id < ?))"
            params.extend([after[0], after[0], after[1]])
        conn = await self.store.reader(scope)
        rows = await conn.execute_fetchall(
            f"SELECT {_TASK_COLUMNS} FROM tasks t WHERE {where} ORDER BY t.updated_at DESC, t.task_id DESC LIMIT ?",
            [*params, limit],
        )
        return [_task(r) for r in rows]

    async def list_checkpoints(
        self, scope: Scope, task_id: str, before_seq: int | None, limit: int
    ) -> list[CheckpointRow]:
        conn = await self.store.reader(scope)
        rows = await conn.execute_fetchall(
            f"SELECT {_CHECKPOINT_COLUMNS} FROM checkpoints WHERE task_id = ? AND seq < ? ORDER BY seq DESC LIMIT ?",
            [task_id, before_seq if before_seq is not None else 2**62, limit],
        )
        return [_checkpoint(r) for r in rows]


async def _check_head(conn: aiosqlite.Connection, scope: Scope, task_id: str, base_seq: int | None) -> None:
    """Inside the write: the task's head is still at ``base_seq`` (None: there is no such task), and
    a task of that id, if any, is one the scope may see."""
    rows = list(await conn.execute_fetchall("SELECT t.head_seq FROM tasks t WHERE t.task_id = ?", [task_id]))
    if not rows:
        if base_seq is not None:
            raise StaleHeadError(task_id, 0, base_seq)
        return
    where, params = _visible(scope)
    visible = list(
        await conn.execute_fetchall(f"SELECT 1 FROM tasks t WHERE t.task_id = ? AND {where}", [task_id, *params])
    )
    if not visible:
        # Another namespace's task by this id: the caller may not see it, nor take the id.
        raise ConflictError(f"the task id {task_id!r} is taken; choose another task_id")
    current = int(rows[0][0])
    if base_seq != current:
        raise StaleHeadError(task_id, current, base_seq)

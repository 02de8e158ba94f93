"""The protocol the task service stores through (SQLite's `storage.tasks.TaskStore` today)."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from mcp_memory.core.models import CheckpointRow, Scope, TaskRow


class TaskRows(Protocol):
    """Tasks (identity, intent, the live head) and their immutable checkpoints, one principal's."""

    def one_transaction(self, scope: Scope, *, write: bool = False) -> AbstractAsyncContextManager[None]:
        """The calls made inside the block in one transaction, where the store has them."""
        ...

    async def get(self, scope: Scope, task_id: str) -> TaskRow | None:
        """The task if the scope sees it (principal-wide, or created in the scope's namespace)."""
        ...

    async def save(
        self, scope: Scope, task: TaskRow, base_seq: int | None, checkpoints: Sequence[CheckpointRow] = ()
    ) -> None:
        """Write the new head (and checkpoints) if the head is still at ``base_seq`` (None: the task
        must not exist yet), in one transaction; else StaleHeadError and nothing written."""
        ...

    async def checkpoint(self, scope: Scope, task_id: str, checkpoint_id: str) -> CheckpointRow | None:
        """One checkpoint with its envelope, if the task is visible to the scope."""
        ...

    async def heads(self, scope: Scope) -> dict[str, int]:
        """Every task of the principal (all namespaces) with its head's sequence number."""
        ...

    async def list_tasks(self, scope: Scope, after: tuple[float, str] | None, limit: int) -> list[TaskRow]:
        """Most recently updated first, past ``after``: the (updated_at, task_id) of the last row seen."""
        ...

    async def list_checkpoints(
        self, scope: Scope, task_id: str, before_seq: int | None, limit: int
    ) -> list[CheckpointRow]:
        """A task's checkpoints, newest first; ``before_seq`` continues after the last row seen."""
        ...

"""TaskService: checkpoint, update_task, resume (with rollback) and the task listings (ADR 6)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import orjson
from pydantic import ValidationError

from mcp_memory.config import Limits
from mcp_memory.core.envelope import (
    CheckpointFormatError,
    CorruptCheckpointError,
    Envelope,
    compress_snapshot,
    encode,
    unpack,
)
from mcp_memory.core.errors import InvalidInputError, LimitExceededError, NotFoundError, StaleHeadError, StorageError
from mcp_memory.core.ids import new_id
from mcp_memory.core.models import CheckpointRow, MemoryFilter, Page, Scope, TaskRow
from mcp_memory.core.task_model import Checkpointed, CheckpointReason, Resumption, Task, TaskEdit, TaskHead
from mcp_memory.core.text import strip_query_syntax, task_uri
from mcp_memory.services import checks, incoming, packet, task_tree
from mcp_memory.services.checks import identifier, text_field
from mcp_memory.services.memory import MemoryService
from mcp_memory.services.one_call import in_one_transaction
from mcp_memory.services.task_checks import check_checkpoint
from mcp_memory.services.task_ports import TaskRows
from mcp_memory.services.task_views import from_cursor, serialised_size, to_cursor

log = logging.getLogger(__name__)

HEAD_FIELDS = frozenset(TaskHead.model_fields)
_RETRIES = 5


class TaskService:
    def __init__(
        self, tasks: TaskRows, memory: MemoryService, limits: Limits, clock: Callable[[], float] = time.time
    ) -> None:
        self.tasks = tasks
        self.memory = memory
        self.limits = limits
        self.clock = clock

    # ----- reading a head ------------------------------------------------------------------

    @staticmethod
    def _head_from(envelope: Envelope) -> TaskHead:
        structured = envelope.structured.get("head", envelope.structured)
        return TaskHead.model_validate({**structured, "snapshot": envelope.snapshot})

    async def _valid_checkpoint(
        self, scope: Scope, task_id: str, start: str | None, warnings: list[str]
    ) -> tuple[CheckpointRow, Envelope] | None:
        """The newest readable checkpoint from ``start`` back through its parents."""
        current = start
        while current is not None:
            row = await self.tasks.checkpoint(scope, task_id, current)
            if row is None or row.envelope is None:
                warnings.append(f"checkpoint {current} is missing; looking at older ones")
                return None
            try:
                return row, unpack(row.envelope)
            except CorruptCheckpointError as exc:
                warnings.append(f"checkpoint {row.id} (seq {row.seq}) is corrupted ({exc}); using its parent")
                log.warning("corrupted checkpoint %s of task %s: %s", row.id, task_id, exc)
                current = row.parent_id
        return None

    async def _head(self, scope: Scope, row: TaskRow, warnings: list[str]) -> TaskHead:
        try:
            return self._head_from(unpack(row.head))
        except CorruptCheckpointError as exc:
            warnings.append(f"the task's head is corrupted ({exc}); resuming from the newest valid checkpoint")
            log.warning("corrupted head of task %s: %s", row.task_id, exc)
        found = await self._valid_checkpoint(scope, row.task_id, row.latest_checkpoint_id, warnings)
        if found is None:
            raise StorageError(f"task {row.task_id!r} has no readable head or checkpoint left")
        warnings.append(f"resumed from checkpoint {found[0].id} (seq {found[0].seq})")
        return self._head_from(found[1])

    async def _row(self, scope: Scope, task_id: str) -> TaskRow:
        text_field("task_id", task_id)
        row = await self.tasks.get(scope, task_id)
        if row is None:
            raise NotFoundError("task", task_id, "list_tasks shows your tasks' ids")
        return row

    # ----- writing -------------------------------------------------------------------------

    def _check_size(self, head: TaskHead) -> int:
        size = serialised_size(head)
        if size > self.limits.max_checkpoint_bytes:
            raise LimitExceededError(
                "checkpoint",
                f"is {size} bytes serialised (structured JSON plus snapshot); keep the full "
                "transcript elsewhere and checkpoint a summary",
                limit_name="limits.max_checkpoint_bytes",
                limit=self.limits.max_checkpoint_bytes,
            )
        return size

    def _merge(self, base: TaskHead, changes: dict[str, Any]) -> TaskHead:
        unknown = set(changes) - HEAD_FIELDS
        if unknown:
            raise InvalidInputError(sorted(unknown)[0], "is not a field of a task head")
        for name, value in changes.items():
            if isinstance(value, str):  # text is checked as text below; no need to encode a 1 MB snapshot twice
                continue
            try:
                orjson.dumps(value)
            except TypeError as exc:  # the head is kept as JSON: what JSON cannot hold is the caller's to fix
                raise InvalidInputError(
                    name, f"cannot be stored: {exc}; send a number beyond 64 bits as a string"
                ) from None
        try:
            merged = TaskHead.model_validate({**base.model_dump(mode="json"), **changes})
        except ValidationError as exc:
            err = exc.errors(include_input=False)[0]
            raise InvalidInputError(".".join(str(p) for p in err["loc"]) or "head", err["msg"]) from None
        text_field("snapshot", merged.snapshot)
        task_tree.validate(merged.tree, "tree", self.limits.max_tree_depth)
        if merged.current_node is not None and task_tree.find(merged.tree, merged.current_node) is None:
            if "current_node" in changes:
                raise InvalidInputError("current_node", f"no node {merged.current_node!r} in this task's tree")
            raise InvalidInputError(
                "tree",
                f"has no node {merged.current_node!r}, the task's current node; pass current_node as well "
                "(a node of the new tree, or null)",
            )
        return merged

    def _pack_head(self, head: TaskHead, packed: bytes | None = None) -> bytes:
        _, raw = encode({"head": head.model_dump(mode="json", exclude={"snapshot"})}, head.snapshot, packed=packed)
        return raw

    def _new_checkpoint(
        self, task: TaskRow, head: TaskHead, seq: int, reason: str, parent: str | None, now: float, packed: bytes
    ) -> CheckpointRow:
        structured = {
            "task": {
                "task_id": task.task_id,
                "namespace": task.namespace,
                "title": task.title,
                "goal": task.goal,
                "constraints": task.constraints,
            },
            "seq": seq,
            "reason": reason,
            "parent_id": parent,
            "created_at": now,
            "head": head.model_dump(mode="json", exclude={"snapshot"}),
        }
        envelope, raw = encode(structured, head.snapshot, packed=packed)
        return CheckpointRow(
            id=new_id(),
            task_id=task.task_id,
            seq=seq,
            parent_id=parent,
            reason=reason,
            created_at=now,
            size=envelope.size,
            checksum=envelope.checksum,
            envelope=raw,
        )

    @in_one_transaction("tasks", write=True)
    async def checkpoint(
        self,
        scope: Scope,
        task_id: str | None,
        *,
        changes: dict[str, Any],
        title: str | None = None,
        goal: str | None = None,
        constraints: list[str] | None = None,
        reason: CheckpointReason = "manual",
        expected_head: int | None = None,
        in_namespace: bool = False,
    ) -> Checkpointed:
        """Save the head (creating the task on first use) and an immutable copy of it."""
        check_checkpoint(scope, task_id, title, goal, constraints, changes, in_namespace)
        task_id = task_id or f"task-{new_id()}"
        # The one redaction of what a checkpoint stores (the stored head was redacted when written).
        title, goal = incoming.redacted_or_none(title), incoming.redacted_or_none(goal)
        constraints = incoming.redacted_all(constraints) if constraints is not None else None
        changes = incoming.redacted_value(changes)
        for _ in range(_RETRIES):
            now = self.clock()
            row, base_head, base_seq = await self._base(scope, task_id, title, goal, constraints, in_namespace, now)
            if expected_head is not None and expected_head != (base_seq or 0):
                raise StaleHeadError(task_id, base_seq or 0, expected_head)
            head = self._merge(base_head, changes)
            self._check_size(head)
            seq = (base_seq or 0) + 1
            packed = compress_snapshot(head.snapshot)
            cp = self._new_checkpoint(row, head, seq, reason, row.latest_checkpoint_id, now, packed)
            new_row = replace(
                row, head=self._pack_head(head, packed), head_seq=seq, updated_at=now, latest_checkpoint_id=cp.id
            )
            try:
                await self.tasks.save(scope, new_row, base_seq, [cp])
            except StaleHeadError:
                if expected_head is not None:
                    raise
                continue  # another client moved the head: re-read and re-apply these fields
            await self.memory.reopen_task(scope, new_row.task_id, head.tree.status if head.tree else None)
            return Checkpointed(checkpoint=cp, created_task=base_seq is None, serialized_size=serialised_size(head))
        raise StaleHeadError(task_id, -1, None)

    async def _base(
        self,
        scope: Scope,
        task_id: str,
        title: str | None,
        goal: str | None,
        constraints: list[str] | None,
        in_namespace: bool,
        now: float,
    ) -> tuple[TaskRow, TaskHead, int | None]:
        """The task as stored with this call's title, goal and constraints (a new one if there is
        none), its head, and the head's sequence number (None: the task is new)."""
        row = await self.tasks.get(scope, task_id)
        if row is None:
            if not goal:
                raise InvalidInputError("goal", "is required when a task is created; say what the task is for")
            new = TaskRow(
                task_id=task_id,
                namespace=scope.namespace if in_namespace else None,
                title=title or goal[:80],
                goal=goal,
                constraints=list(constraints or []),
                head=b"",
                head_seq=0,
                created_at=now,
                updated_at=now,
                latest_checkpoint_id=None,
            )
            return new, TaskHead(), None
        head = await self._head(scope, row, [])
        return (
            replace(
                row,
                title=title if title is not None else row.title,
                goal=goal if goal is not None else row.goal,
                constraints=constraints if constraints is not None else row.constraints,
            ),
            head,
            row.head_seq,
        )

    async def update_task(
        self, scope: Scope, task_id: str, edits: Sequence[TaskEdit], expected_head: int | None = None
    ) -> Task:
        if not edits:
            raise InvalidInputError("edits", "is empty; give at least one edit")
        for _ in range(_RETRIES):
            row = await self._row(scope, task_id)
            if expected_head is not None and expected_head != row.head_seq:
                raise StaleHeadError(task_id, row.head_seq, expected_head, call="update_task")
            for i, edit in enumerate(edits):
                for name in ("node_id", "parent_id"):
                    if (value := getattr(edit, name)) is not None:
                        identifier(f"edits[{i}].{name}", value)
                if edit.node is not None:
                    for node, _ in task_tree.walk(edit.node):
                        identifier(f"edits[{i}].node", node.id)
            clean_edits = [TaskEdit.model_validate(incoming.redacted_value(e.model_dump(mode="json"))) for e in edits]
            head = task_tree.apply_edits(await self._head(scope, row, []), clean_edits, self.limits.max_tree_depth)
            self._check_size(head)
            now = self.clock()
            new_row = replace(row, head=self._pack_head(head), head_seq=row.head_seq + 1, updated_at=now)
            try:
                await self.tasks.save(scope, new_row, row.head_seq)
            except StaleHeadError:
                if expected_head is not None:
                    raise
                continue
            await self.memory.reopen_task(scope, new_row.task_id, head.tree.status if head.tree else None)
            return Task(new_row, head)
        raise StaleHeadError(task_id, -1, None)

    async def rollback(
        self, scope: Scope, task_id: str, checkpoint_id: str
    ) -> tuple[TaskRow, TaskHead, str, list[str]]:
        """Make the named checkpoint the head again, as a new checkpoint whose parent is the target."""
        text_field("checkpoint_id", checkpoint_id)
        for _ in range(_RETRIES):
            row = await self._row(scope, task_id)
            warnings: list[str] = []
            found = await self._valid_checkpoint(scope, task_id, checkpoint_id, warnings)
            if found is None:
                if await self.tasks.checkpoint(scope, task_id, checkpoint_id) is None:
                    raise NotFoundError("checkpoint", checkpoint_id, "list_checkpoints shows the task's checkpoints")
                raise StorageError(f"checkpoint {checkpoint_id!r} and all its ancestors are unreadable")
            target, envelope = found
            head = self._head_from(envelope)
            now = self.clock()
            saved: list[CheckpointRow] = []
            parent = row.latest_checkpoint_id
            latest = await self.tasks.checkpoint(scope, task_id, parent) if parent else None
            if latest is None or latest.seq < row.head_seq:
                # Edits made since the last checkpoint would otherwise be lost: keep the head first.
                current = await self._head(scope, row, warnings)
                kept = self._new_checkpoint(
                    row, current, row.head_seq, "before_rollback", parent, now, compress_snapshot(current.snapshot)
                )
                saved.append(kept)
            seq = row.head_seq + 1
            packed = compress_snapshot(head.snapshot)
            cp = self._new_checkpoint(row, head, seq, "rollback", target.id, now, packed)
            saved.append(cp)
            new_row = replace(
                row, head=self._pack_head(head, packed), head_seq=seq, updated_at=now, latest_checkpoint_id=cp.id
            )
            try:
                await self.tasks.save(scope, new_row, row.head_seq, saved)
            except StaleHeadError:
                continue
            await self.memory.reopen_task(scope, new_row.task_id, head.tree.status if head.tree else None)
            return new_row, head, target.id, warnings
        raise StaleHeadError(task_id, -1, None)

    # ----- reading -------------------------------------------------------------------------

    async def state(self, scope: Scope, task_id: str, warnings: list[str] | None = None) -> Task:
        row = await self._row(scope, task_id)
        return Task(row, await self._head(scope, row, warnings if warnings is not None else []))

    async def heads(self, scope: Scope) -> dict[str, int]:
        """Every task of the principal with its head's sequence number (what a watcher compares)."""
        return await self.tasks.heads(scope)

    async def latest_checkpoint(self, scope: Scope, task_id: str) -> CheckpointRow | None:
        row = await self._row(scope, task_id)
        if row.latest_checkpoint_id is None:
            return None
        return await self.tasks.checkpoint(scope, task_id, row.latest_checkpoint_id)

    async def read_checkpoint(self, scope: Scope, task_id: str, checkpoint_id: str) -> tuple[CheckpointRow, Envelope]:
        """The complete checkpoint: its record and its envelope (the structured part and the whole snapshot)."""
        await self._row(scope, task_id)
        row = await self.tasks.checkpoint(scope, task_id, checkpoint_id)
        if row is None or row.envelope is None:
            raise NotFoundError("checkpoint", checkpoint_id, "list_checkpoints shows the task's checkpoints")
        try:
            envelope = unpack(row.envelope)
        except (CorruptCheckpointError, CheckpointFormatError) as exc:
            raise StorageError(f"checkpoint {checkpoint_id!r} cannot be read: {exc}") from None
        return row, envelope

    async def list_tasks(self, scope: Scope, cursor: str | None = None, limit: int = 20) -> Page[Task]:
        if not 1 <= limit <= 200:
            raise InvalidInputError("limit", "must be between 1 and 200")
        after = from_cursor(cursor)
        rows = await self.tasks.list_tasks(scope, tuple(after) if after else None, limit + 1)
        tasks = [Task(row, await self._head(scope, row, [])) for row in rows[:limit]]
        more = len(rows) > limit
        return Page(tasks, to_cursor([rows[limit - 1].updated_at, rows[limit - 1].task_id]) if more else None)

    async def list_checkpoints(
        self, scope: Scope, task_id: str, cursor: str | None = None, limit: int = 20
    ) -> Page[CheckpointRow]:
        if not 1 <= limit <= 200:
            raise InvalidInputError("limit", "must be between 1 and 200")
        await self._row(scope, task_id)
        before = from_cursor(cursor)
        if before is not None and not isinstance(before, int):
            raise InvalidInputError("cursor", "is not a cursor this server returned; omit it to start over")
        rows = await self.tasks.list_checkpoints(scope, task_id, before, limit + 1)
        more = len(rows) > limit
        return Page(rows[:limit], to_cursor(rows[limit - 1].seq) if more else None)

    # ----- resume --------------------------------------------------------------------------

    @in_one_transaction("tasks")
    async def resume(
        self, scope: Scope, task_id: str, *, checkpoint_id: str | None = None, budget_tokens: int | None = None
    ) -> Resumption:
        """What the packet for the task's head is made of, or (with ``checkpoint_id``) for a rollback to
        that checkpoint; the face packs it into the budget."""
        budget = checks.budget(budget_tokens, self.limits.default_resume_budget_tokens, self.limits)
        warnings: list[str] = []
        rolled_back_to = None
        if checkpoint_id is not None:
            row, head, rolled_back_to, warnings = await self.rollback(scope, task_id, checkpoint_id)
            state = Task(row, head)
        else:
            state = await self.state(scope, task_id, warnings)
        latest = await self.latest_checkpoint(scope, task_id)
        if latest is not None and latest.seq < state.row.head_seq:
            warnings.append(
                f"the head changed after the last checkpoint (seq {latest.seq}); {task_uri(task_id)} shows all of it"
            )
        elapsed = max(self.clock() - state.row.updated_at, 0.0)
        query = state.row.goal
        current = task_tree.find(state.head.tree, state.head.current_node) if state.head.current_node else None
        if current is not None:
            query = f"{current[0].title} {state.row.goal}"
        if not strip_query_syntax(query):  # a goal and title of no words, stored before blanks were refused
            query = f"task {task_id}"
        recalled = await self.memory.recall(
            scope,
            query[: self.limits.max_query_chars],
            k=10,
            budget_tokens=min(budget, self.limits.max_recall_budget_tokens),
            filters=MemoryFilter(task_id=task_id),
            reinforce=False,
            detail="full",
        )
        return Resumption(
            task=state,
            elapsed=elapsed,
            budget=budget,
            hints=packet.hints(state.head, elapsed),
            checkpoint=latest,
            memories=recalled.hits,
            pinned=recalled.pinned,
            warnings=warnings,
            rolled_back_to=rolled_back_to,
        )

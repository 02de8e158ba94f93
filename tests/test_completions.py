"""Completions for prompt and resource-template arguments: the caller's own task and checkpoint ids."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp.client import Client
from mcp_types import PromptReference, ResourceTemplateReference

from mcp_memory.mcp.server import Server
from tests.conftest import call
from tests.test_tasks import connect, first_checkpoint

pytestmark = pytest.mark.anyio

TASK = ResourceTemplateReference(type="ref/resource", uri="memory://tasks/{task_id}")
CHECKPOINT = ResourceTemplateReference(type="ref/resource", uri="memory://tasks/{task_id}/checkpoints/{checkpoint_id}")
RESUME = PromptReference(type="ref/prompt", name="resume_task")


async def _values(client: Client, ref: PromptReference | ResourceTemplateReference, **argument: str) -> list[str]:
    (name, value), *known = argument.items()
    result = await client.complete(ref, {"name": name, "value": value}, dict(known) or None)
    return list(result.completion.values)


async def test_task_and_checkpoint_ids_complete_for_their_owner_only(data_dir: Path, mode: str) -> None:
    async with connect(data_dir, mode) as alice, connect(data_dir, mode, principal="bob") as bob:
        first = await call(alice, "checkpoint", first_checkpoint())
        second = await call(alice, "checkpoint", first_checkpoint(task_id="billing-v3", reason="manual"))
        await call(bob, "checkpoint", first_checkpoint(task_id="bob-secret-plan"))
        assert await _values(alice, RESUME, task_id="") == ["billing-v3", "billing-v2"]  # newest first
        assert await _values(alice, TASK, task_id="billing-v2") == ["billing-v2"]
        assert await _values(alice, TASK, task_id="bob") == []
        assert await _values(bob, RESUME, task_id="") == ["bob-secret-plan"]
        checkpoint_id = first["checkpoint"]["id"]
        assert await _values(alice, CHECKPOINT, checkpoint_id="", task_id="billing-v2") == [checkpoint_id]
        assert second["checkpoint"]["id"] not in await _values(
            alice, CHECKPOINT, checkpoint_id="", task_id="billing-v2"
        )
        # Another principal's task, or none chosen yet, completes nothing (and says nothing of it).
        assert await _values(bob, CHECKPOINT, checkpoint_id="", task_id="billing-v2") == []
        assert await _values(alice, CHECKPOINT, checkpoint_id="") == []


async def test_arguments_that_name_no_id_complete_nothing(client: Client) -> None:
    await call(client, "checkpoint", first_checkpoint())
    recall_context = PromptReference(type="ref/prompt", name="recall_context")
    assert await _values(client, recall_context, query="bill") == []
    assert await _values(client, ResourceTemplateReference(type="ref/resource", uri="memory://other/{x}"), x="") == []


async def test_the_server_declares_completions_in_the_handshake(runtime: Server) -> None:
    async with Client(runtime.mcp, mode="legacy") as client:  # the initialize handshake declares them
        capabilities = client.server_capabilities
    assert capabilities is not None
    assert capabilities.prompts is not None  # positive control: the handshake was read
    assert capabilities.completions is not None

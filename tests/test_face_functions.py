"""The MCP face's functions are plain async functions of a Face: a test calls them with a runtime it
built (``compose.open_runtime``), without an MCP server, a client or a connection."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from mcp.server.elicitation import AcceptedElicitation, DeclinedElicitation
from mcp.server.mcpserver import Context

from mcp_memory.compose import open_runtime
from mcp_memory.config import Settings
from mcp_memory.core.errors import InvalidInputError, NotFoundError
from mcp_memory.mcp import erasure, memory_tools, resources, task_tools
from mcp_memory.mcp.face import Face
from mcp_memory.mcp.notify import ResourceNotifier
from mcp_memory.mcp.wire_recall import hit_tokens
from mcp_memory.scope import ScopeResolver
from tests.conftest import Clock

pytestmark = pytest.mark.anyio


class Offline(Context):
    """A context without a request: what the tools report as progress is kept here."""

    def __init__(self) -> None:
        super().__init__()
        self._told: list[str] = []

    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        self._told.append(message or "")


NO_REQUEST = Offline()


@pytest.fixture
async def face(settings: Settings, clock: Clock) -> AsyncIterator[Face]:
    async with open_runtime(settings, hit_cost=hit_tokens, clock=clock) as rt:
        scopes = ScopeResolver(settings.principal, settings.namespace)
        yield Face(rt.memory, rt.tasks, rt.stats, rt.browse, rt.erasure, rt.golden, scopes, ResourceNotifier(scopes))


async def test_a_memory_remembered_by_calling_the_tool_is_recalled_by_calling_the_tool(face: Face) -> None:
    ctx = Offline()
    stored = await memory_tools.remember(face, ctx, content="Alice's cat is called Miso", kind="fact")
    assert (stored.structured_content or {})["stored"] == 1
    assert ctx._told[-1] == "1 of 1 memories stored"
    answer = await memory_tools.recall(face, NO_REQUEST, query="what is the name of Alice's cat?")
    hits = (answer.structured_content or {})["hits"]
    assert hits[0]["text"] == "Alice's cat is called Miso"
    assert "Miso" in answer.content[0].text  # type: ignore[union-attr]  # the text block renders the hit


async def test_called_directly_a_tool_raises_the_services_error_not_an_mcp_result(face: Face) -> None:
    with pytest.raises(InvalidInputError, match="give either content"):
        await memory_tools.remember(face, NO_REQUEST, content="one", memories=[])
    with pytest.raises(NotFoundError):
        await task_tools.resume(face, NO_REQUEST, task_id="no-such-task")


async def test_a_checkpoint_made_by_the_tool_is_read_by_the_resource_function(face: Face) -> None:
    made = await task_tools.checkpoint(face, NO_REQUEST, task_id="deploy", goal="ship the release")
    assert (made.structured_content or {})["checkpoint"]["task_id"] == "deploy"
    page = await resources.task(face, "deploy")
    assert "ship the release" in page


async def test_forget_user_takes_the_persons_answer_as_a_plain_argument(face: Face) -> None:
    await memory_tools.remember(face, NO_REQUEST, content="Bob prefers green tea")
    declined = (await erasure.forget_user(face, NO_REQUEST, person=DeclinedElicitation())).structured_content or {}
    assert declined["dry_run"]
    assert declined["counts"]["memories"] == 1
    yes = AcceptedElicitation[erasure.Confirmation](data=erasure.Confirmation(delete_everything=True))
    erased = (await erasure.forget_user(face, NO_REQUEST, person=yes)).structured_content or {}
    assert erased["dry_run"] is False
    after = await memory_tools.recall(face, NO_REQUEST, query="what does Bob drink?")
    assert (after.structured_content or {})["hits"] == []

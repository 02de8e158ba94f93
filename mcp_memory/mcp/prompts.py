"""MCP prompts: resume_task and recall_context. Their text lives in the prompts/ folder."""

from __future__ import annotations

from mcp.server.mcpserver.prompts.base import Message, UserMessage

from mcp_memory.mcp.face import Face
from mcp_memory.mcp.templates import recall_text, resume_text
from mcp_memory.mcp.wire_recall import recall_result
from mcp_memory.mcp.wire_tasks import resume_packet

RESUME_TASK_DOC = "The messages that put an agent back on track with a task"
RECALL_CONTEXT_DOC = "A context block of the memories that matter for a question"


async def resume_task(face: Face, task_id: str) -> list[Message]:
    found = await face.tasks.resume(face.scopes.scope(), task_id)
    return [UserMessage(resume_text(resume_packet(found)))]


async def recall_context(face: Face, query: str) -> list[Message]:
    result = recall_result(await face.memory.recall(face.scopes.scope(), query, reinforce=False))
    return [UserMessage(recall_text(query, result.pinned, result.hits))]

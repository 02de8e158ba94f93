"""MCP logging: a refused call is told to its own client at the level that client asked for."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp.client import Client
from mcp_types import LoggingMessageNotificationParams

from mcp_memory.mcp.server import Server

pytestmark = pytest.mark.anyio

SECRET = "sk-proj-" + "Q7h2" * 10


class Heard:
    def __init__(self) -> None:
        self.messages: list[LoggingMessageNotificationParams] = []
        self._arrived = anyio.Event()

    async def __call__(self, params: LoggingMessageNotificationParams) -> None:
        self.messages.append(params)
        self._arrived.set()

    async def settled(self, count: int) -> int:
        """How many arrived, once ``count`` have or half a second passed (notifications are read
        beside the call's answer, not before it)."""
        with anyio.move_on_after(0.5):
            while len(self.messages) < count:
                await self._arrived.wait()
                self._arrived = anyio.Event()
        await anyio.sleep(0.05)  # and none more
        return len(self.messages)


async def _refused(client: Client) -> None:
    # forget of an id that is not there is refused, and the message quotes the id
    result = await client.call_tool("forget", {"ids": [SECRET]})
    assert result.is_error


# The client's logging/setLevel call warns: the capability is deprecated from protocol 2026-07-28 on.
@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
async def test_a_handshake_client_hears_refusals_at_its_level(runtime: Server) -> None:
    heard = Heard()
    async with Client(runtime.mcp, mode="legacy", logging_callback=heard) as client:
        capabilities = client.server_capabilities
        assert capabilities is not None
        assert capabilities.logging is not None
        await _refused(client)  # the default level, warning, lets a refusal through
        assert await heard.settled(1) == 1
        told = heard.messages[0]
        assert told.level == "warning"
        assert "forget refused" in str(told.data)
        assert SECRET not in str(told.data)  # redacted like the error itself
        await client.set_logging_level("error")
        await _refused(client)
        assert await heard.settled(2) == 1  # below the level asked for: not sent
        await client.set_logging_level("debug")
        await _refused(client)
        assert await heard.settled(2) == 2


async def test_from_2026_07_28_a_client_opts_in_per_request(runtime: Server) -> None:
    heard, silent = Heard(), Heard()
    kwargs: dict[str, Any] = {"mode": "2026-07-28"}
    async with Client(runtime.mcp, logging_callback=heard, log_level="info", **kwargs) as client:
        await _refused(client)
        await heard.settled(1)
    async with Client(runtime.mcp, logging_callback=silent, **kwargs) as client:
        await _refused(client)
        await silent.settled(1)
    assert [m.level for m in heard.messages] == ["warning"]
    assert silent.messages == []


async def test_arguments_of_the_wrong_type_or_name_are_told_too(runtime: Server) -> None:
    heard = Heard()
    async with Client(runtime.mcp, mode="legacy", logging_callback=heard) as client:
        for arguments in ({"query": "tea", "k": "3"}, {"query": "tea", "limit": 3}):
            result = await client.call_tool("recall", arguments)
            assert result.is_error
        assert await heard.settled(2) == 2
        said = [str(message.data) for message in heard.messages]
        assert "recall refused: k: takes a JSON number, not the string '3'" in said[0]
        assert "recall refused: unknown argument(s) 'limit'" in said[1]

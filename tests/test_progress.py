"""Progress notifications: a long remember tells the client how far it has come, when asked."""

from __future__ import annotations

import pytest
from mcp.client import Client

pytestmark = pytest.mark.anyio

BATCH = [
    {"content": f"Release note {i}: the importer now handles case {i * 7} of the archive format"} for i in range(100)
]


async def test_a_batch_of_a_hundred_reports_its_progress(client: Client) -> None:
    heard: list[tuple[float, float | None, str | None]] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append((progress, total, message))

    result = await client.call_tool("remember", {"memories": BATCH}, progress_callback=progress)
    assert not result.is_error
    assert len(heard) >= 3  # the texts embed in several calls, then the write
    assert all(total == len(BATCH) for _, total, _ in heard)
    done = [d for d, _, _ in heard]
    assert done == sorted(done)
    assert done[-1] == len(BATCH)
    assert heard[-1][2] == "100 of 100 memories stored"
    assert any(m and "embedded" in m for _, _, m in heard)

"""The OpenAI-compatible embeddings provider, through the real openai client and a local fake server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp.client import Client

from mcp_memory.config import load_settings
from mcp_memory.mcp.server import open_server
from tests.conftest import call, call_error, hit_texts, row_counts
from tests.fake_openai import FakeOpenAI, fake_openai_server

pytestmark = pytest.mark.anyio

KEY = "sk-test-embeddings-key-0123456789abcdef"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    monkeypatch.setenv("MCP_MEMORY_EMBEDDING_API_KEY", KEY)
    with fake_openai_server() as server:
        yield server


async def test_memories_are_embedded_by_the_configured_endpoint(data_dir: Path, fake: FakeOpenAI, mode: str) -> None:
    settings = load_settings(
        data_dir=data_dir,
        principal="alice",
        embedding={"provider": "openai", "base_url": fake.base_url, "model": "fake-embed-1"},
    )
    async with open_server(settings) as runtime, Client(runtime.mcp, mode=mode) as client:
        await call(
            client,
            "remember",
            {
                "memories": [
                    {"content": "the garden hose is in the blue shed"},
                    {"content": "tax documents are in the attic box"},
                ]
            },
        )
        result = await call(client, "recall", {"query": "where is the garden hose", "k": 1})
        assert hit_texts(result) == ["the garden hose is in the blue shed"]
        model = await runtime.embedder.ready()
        assert model.model_id.startswith("openai-compatible/")
        assert model.dim == 64
    assert fake.authorizations
    assert all(a == f"Bearer {KEY}" for a in fake.authorizations)
    for path in data_dir.rglob("*"):  # noqa: ASYNC240 - the test reads its own tmp dir
        if path.is_file():
            assert KEY.encode() not in path.read_bytes()


async def test_a_failing_endpoint_is_a_clear_error_and_writes_nothing(
    data_dir: Path, fake: FakeOpenAI, mode: str
) -> None:
    settings = load_settings(
        data_dir=data_dir,
        principal="alice",
        embedding={"provider": "openai", "base_url": fake.base_url, "model": "fake-embed-1"},
    )
    async with open_server(settings) as runtime, Client(runtime.mcp, mode=mode) as client:
        await call(client, "remember", {"content": "a memory stored while the endpoint worked"})
        before = row_counts(data_dir, "alice")
        fake.fail_with = 503
        message = await call_error(client, "remember", {"content": "a memory sent while the endpoint is down"})
        assert "embedding endpoint failed" in message
        assert row_counts(data_dir, "alice") == before

"""Queries are text, never search syntax: hostile questions are searched as words."""

from __future__ import annotations

import re

import pytest
from mcp.client import Client

from tests.conftest import call

pytestmark = pytest.mark.anyio

CORPUS = [
    "Invoice INV-767 for ACME was paid in May",
    "The deploy script lives in tools/deploy.sh and needs bash 5",
    "Carol prefers tea over coffee and hates mornings",
    "The API gateway returns 502 when the auth service is down",
    "我们决定在三月发布新的计费系统",
    "Use NOT NULL constraints on every foreign key column",
]

HOSTILE = [
    '"INV-767"',
    '"unterminated quote about the deploy script',
    "(tea OR coffee) AND mornings",
    "gateway NOT auth*",
    "*",
    "deploy*",
    '")( AND OR NOT',
    ")(",
    "NEAR(deploy script)",
    "[计费] {系统} ^发布",
    "foreign key' OR '1'='1",
    "'; DROP TABLE memories; --",
    'Carol "prefers" (tea)',
    "AND",
    "OR NOT AND coffee",
]
_SYNTAX = re.compile(r"[\"'`()\[\]{}*^]")


def _without_punctuation(query: str) -> str:
    return " ".join(_SYNTAX.sub(" ", query).split())


async def _ids(client: Client, query: str) -> list[str]:
    result = await call(client, "recall", {"query": query, "k": 5, "reinforce": False})
    return [h["id"] for h in result["hits"]]


@pytest.mark.parametrize("query", HOSTILE)
async def test_a_hostile_query_returns_the_same_hits_as_its_words(client: Client, query: str) -> None:
    await call(client, "remember", {"memories": [{"content": c} for c in CORPUS]})
    plain = _without_punctuation(query)
    if set(plain.lower().split()) <= {"and", "or", "not"}:  # no words, or glue words alone
        result = await client.call_tool("recall", {"query": query})
        assert result.is_error  # nothing to search for: a clear error, not a crash
        return
    hostile_ids = await _ids(client, query)
    assert hostile_ids, f"no hits for {query!r}"
    assert hostile_ids == await _ids(client, plain)


async def test_an_injection_attempt_leaves_the_store_intact(client: Client) -> None:
    await call(client, "remember", {"memories": [{"content": c} for c in CORPUS]})
    await call(client, "recall", {"query": "'; DROP TABLE memories; --"})
    result = await call(client, "recall", {"query": "invoice paid", "k": 1})
    assert result["hits"][0]["text"] == CORPUS[0]

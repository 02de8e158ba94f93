"""Chinese conversations are stored and recalled well: paraphrase questions find their memory."""

from __future__ import annotations

import pytest
from mcp.client import Client

from mcp_memory.mcp.server import Server
from tests.conftest import call
from tests.fixtures.bilingual import MEMORIES, QUESTIONS

pytestmark = pytest.mark.anyio

# Measured on this fixture: multilingual-e5-small 0.963 (misses the cross-lingual question), USE 1.00.
R5_FLOOR = 0.90


async def test_chinese_paraphrase_questions_find_their_memory_in_the_top_five(client: Client, runtime: Server) -> None:
    result = await call(
        client, "remember", {"memories": [{"content": t, "metadata": {"key": k}} for k, t in MEMORIES.items()]}
    )
    assert result["stored"] == len(MEMORIES)
    found = 0
    misses = []
    for question, gold in QUESTIONS:
        hits = (await call(client, "recall", {"detail": "full", "query": question, "k": 5, "reinforce": False}))["hits"]
        keys = [h["metadata"]["key"] for h in hits]
        if gold in keys:
            found += 1
        else:
            misses.append((question, gold, keys))
    recall_at_5 = found / len(QUESTIONS)
    await runtime.embedder.ready()
    assert len(QUESTIONS) >= 20
    assert recall_at_5 >= R5_FLOOR, misses


async def test_chinese_text_is_stored_unchanged_and_tagged_with_its_language(client: Client) -> None:
    text = "以后都用中文回复我，技术术语可以保留英文"
    await call(client, "remember", {"content": text})
    hit = (await call(client, "recall", {"detail": "full", "query": "用什么语言回复", "k": 1}))["hits"][0]
    assert hit["text"] == text
    assert hit["language"] == "zh"
    assert hit["importance"] > 0.5  # "以后都" is an explicit standing instruction


async def test_a_two_character_chinese_word_is_found_by_keyword(client: Client) -> None:
    await call(
        client, "remember", {"memories": [{"content": "周五下午要去银行办理转账"}, {"content": "周五晚上和朋友吃火锅"}]}
    )
    result = await call(client, "recall", {"detail": "full", "query": "银行", "k": 1, "explain": True})
    assert result["hits"][0]["text"] == "周五下午要去银行办理转账"
    assert result["hits"][0]["signals"]["keyword_rank"] == 1

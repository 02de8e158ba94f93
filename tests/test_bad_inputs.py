"""Bad input gets a clear error naming the field (and the limit), and nothing is written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from mcp.client import Client

from mcp_memory.core.nesting import MAX_NESTING, nesting, too_deep
from tests.conftest import call, call_error, deep_tree, row_counts

pytestmark = pytest.mark.anyio

UNKNOWN_ID = "01ZZZZZZZZZZZZZZZZZZZZZZZZ"


DEEP_TREE = deep_tree(100)

# (tool, arguments, words the message must contain)
BAD_INPUTS: list[tuple[str, dict[str, Any], list[str]]] = [
    ("remember", {"content": ""}, ["content", "empty"]),
    ("remember", {"content": "   \n\t"}, ["content", "empty"]),
    ("remember", {"content": "x" * 16_385}, ["content", "limits.max_content_bytes", "16384"]),
    ("remember", {"content": "好" * 5_462}, ["content", "limits.max_content_bytes"]),
    ("remember", {"content": "null\x00byte"}, ["content", "NUL"]),
    ("remember", {"content": "lone \ud800 surrogate"}, ["content", "surrogate"]),
    ("remember", {"content": "A valid note about gardening", "kind": "Not A Kind!"}, ["kind"]),
    ("remember", {"content": "A valid note about gardening", "importance": 1.5}, ["importance"]),
    ("remember", {"content": "A valid note about gardening", "importance": -0.1}, ["importance"]),
    (
        "remember",
        {"content": "A valid note about gardening", "tags": [f"t{i}" for i in range(33)]},
        ["tags", "limits.max_tags"],
    ),
    ("remember", {"content": "A valid note about gardening", "tags": [""]}, ["tags[0]", "empty"]),
    ("remember", {"content": "A valid note about gardening", "tags": ["x" * 65]}, ["tags[0]", "limits.max_tag_chars"]),
    (
        "remember",
        {"content": "A valid note about gardening", "metadata": {"blob": "x" * 9_000}},
        ["metadata", "limits.max_metadata_bytes"],
    ),
    ("remember", {"content": "A valid note about gardening", "metadata": {"k": "nul\x00"}}, ["metadata.k", "NUL"]),
    ("remember", {"content": "A valid note about gardening", "ttl_seconds": 0}, ["ttl_seconds"]),
    ("remember", {"content": "A valid note about gardening", "supersedes": [UNKNOWN_ID]}, [UNKNOWN_ID]),
    (
        "remember",
        {"content": "A valid note about gardening", "key": "k", "supersedes": [UNKNOWN_ID]},
        ["supersedes", "key"],
    ),
    ("remember", {"content": "A valid note about gardening", "key": ""}, ["key"]),
    ("remember", {"content": "A valid note about gardening", "occurred_at": "yesterday-ish"}, ["occurred_at"]),
    ("remember", {}, ["content", "missing"]),
    ("remember", {"memories": []}, ["memories", "empty"]),
    ("remember", {"memories": [{"content": f"note {i}"} for i in range(101)]}, ["memories", "limits.max_batch"]),
    ("remember", {"content": "a", "memories": [{"content": "b"}]}, ["memories", "not both"]),
    ("remember", {"memories": [{"kind": "fact"}]}, ["memories", "content"]),
    ("remember", {"memories": [{"content": "ok fine", "colour": "red"}]}, ["memories", "colour"]),
    ("remember", {"memories": [{"content": "valid one"}, {"content": ""}]}, ["memories[1].content"]),
    ("recall", {"query": ""}, ["query"]),
    ("recall", {"query": '*()[]"'}, ["query", "words"]),
    ("recall", {"query": "??? !!!"}, ["query", "words"]),
    ("recall", {"query": "the of and"}, ["query", "nothing to search for"]),
    ("recall", {"query": "的 了"}, ["query", "nothing to search for"]),
    ("recall", {"query": "and (then)? 是吗"}, ["query", "nothing to search for"]),
    ("recall", {"query": "q" * 2_001}, ["query", "limits.max_query_chars"]),
    ("recall", {"query": "nul\x00"}, ["query", "NUL"]),
    ("recall", {"query": "coffee", "k": 0}, ["k", "limits.max_k"]),
    ("recall", {"query": "coffee", "k": 51}, ["k", "limits.max_k"]),
    ("recall", {"query": "coffee", "k": "many"}, ["k"]),
    ("recall", {"query": "coffee", "budget_tokens": 0}, ["budget_tokens"]),
    ("recall", {"query": "coffee", "preset": "fastest"}, ["preset"]),
    (
        "recall",
        {"query": "coffee", "filters": {"namespace": "someone-else"}},
        ["filters.namespace", "has no namespace and sees principal-wide memories only"],
    ),
    ("recall", {"query": "coffee", "filters": {"colour": "red"}}, ["colour"]),
    (
        "recall",
        {"query": "coffee", "filters": {"occurred_after": "2026-02-01T00:00:00Z", "occurred_before": "2026-01-01"}},
        ["occurred_after"],
    ),
    # A quoted number or flag is the caller's mistake, named, not silently coerced.
    ("recall", {"query": "coffee", "k": "10"}, ["k", "not the string '10'"]),
    ("recall", {"query": "coffee", "explain": "true"}, ["explain", "not the string"]),
    ("remember", {"content": "A valid note about gardening", "importance": "0.9"}, ["importance", "string"]),
    ("remember", {"memories": [{"content": "A valid note", "pinned": "yes"}]}, ["pinned", "string"]),
    ("checkpoint", {"goal": "Ship it", "iterations": "3"}, ["iterations", "string"]),
    ("recall", {"query": "coffee", "k": True}, ["k", "takes a JSON number, not true"]),
    ("recall", {"query": "coffee", "reinforce": 0}, ["reinforce", "takes true or false, not 0"]),
    # checkpoint's task_id is checked as remember's is.
    ("checkpoint", {"task_id": "   ", "goal": "Ship it"}, ["task_id", "1 to 200"]),
    ("checkpoint", {"task_id": "t" * 201, "goal": "Ship it"}, ["task_id", "1 to 200"]),
    ("checkpoint", {"goal": "Ship it", "tree": DEEP_TREE}, ["tree", "deep", "limits.max_tree_depth"]),
    # A tree sent as its list of steps is told it must be one object (the root), not pydantic's words.
    ("checkpoint", {"goal": "Ship it", "tree": [{"id": "a", "title": "A"}]}, ["tree", "is a list", "one JSON object"]),
    ("forget", {}, ["ids", "filter"]),
    ("forget", {"ids": []}, ["ids", "empty"]),
    ("forget", {"ids": [UNKNOWN_ID], "dry_run": False}, [UNKNOWN_ID]),
    ("forget", {"filters": {}, "dry_run": False}, ["filter", "empty"]),
    ("forget", {"ids": ["a"], "filters": {"tags": ["x"]}}, ["ids", "filter"]),
]


@pytest.mark.parametrize(
    ("tool", "args", "words"), BAD_INPUTS, ids=[f"{t}-{i}" for i, (t, _, _) in enumerate(BAD_INPUTS)]
)
async def test_bad_input_is_an_error_that_names_the_field_and_writes_nothing(
    client: Client, data_dir: Path, tool: str, args: dict[str, Any], words: list[str]
) -> None:
    await call(client, "remember", {"content": "A memory that must survive every bad call"})
    before = row_counts(data_dir, "alice")
    message = await call_error(client, tool, args)
    for word in words:
        assert word in message, message
    assert "pydantic.dev" not in message  # in plain words, not the validator's whole report
    assert "validation error for" not in message
    assert row_counts(data_dir, "alice") == before
    survivor = await call(client, "recall", {"query": "memory that must survive", "reinforce": False})
    assert [h["text"] for h in survivor["hits"]] == ["A memory that must survive every bad call"]


async def test_a_bad_item_in_a_batch_writes_none_of_the_batch(client: Client, data_dir: Path) -> None:
    await call(client, "remember", {"content": "Seed memory about the batch test"})
    before = row_counts(data_dir, "alice")
    await call_error(
        client, "remember", {"memories": [{"content": "Good item one about llamas"}, {"content": "x" * 20_000}]}
    )
    assert row_counts(data_dir, "alice") == before
    result = await call(client, "recall", {"query": "llamas", "reinforce": False})
    assert all("llamas" not in h["text"] for h in result["hits"])


@pytest.mark.parametrize(
    ("tool", "args", "unknown"),
    [
        ("recall", {"query": "coffee", "filter": {"kinds": ["decision"]}}, "'filter'"),
        ("recall", {"query": "coffee", "limit": 5}, "'limit'"),
        ("forget", {"filter": {"tags": ["x"]}}, "'filter'"),
        ("remember", {"content": "A note about llamas", "colour": "red"}, "'colour'"),
    ],
)
async def test_an_argument_the_tool_does_not_take_is_an_error_not_ignored(
    client: Client, data_dir: Path, tool: str, args: dict[str, Any], unknown: str
) -> None:
    await call(client, "remember", {"content": "A memory that must survive every bad call"})
    before = row_counts(data_dir, "alice")
    message = await call_error(client, tool, args)
    assert f"unknown argument(s) {unknown}" in message
    assert row_counts(data_dir, "alice") == before


@pytest.mark.parametrize("tool", ["recall", "resume"])
@pytest.mark.parametrize("budget", [1, 199, 32_001])
async def test_recall_and_resume_take_the_same_token_budgets_and_say_which(
    client: Client, tool: str, budget: int
) -> None:
    """recall took budget_tokens=1 (an answer that can hold nothing) where resume refused anything
    under 200: both now take 200 to limits.max_recall_budget_tokens, and the refusal says so."""
    await call(client, "checkpoint", {"task_id": "release", "goal": "Ship 2.4"})
    args = {"query": "coffee"} if tool == "recall" else {"task_id": "release"}
    message = await call_error(client, tool, {**args, "budget_tokens": budget})
    assert f"budget_tokens: is {budget}" in message, message
    assert "use 200 to 32000" in message, message
    assert (await call(client, tool, {**args, "budget_tokens": 200}))["budget_tokens"] == 200


async def test_a_question_of_common_words_that_points_at_someone_is_still_searched(client: Client) -> None:
    """Glue words alone ("the of and") are refused like "???", but a question made of words the keyword
    side skips that still point at something ("who am I?", "我是谁") is searched by meaning."""
    await call(client, "remember", {"content": "The user's name is Dana Novak"})
    for question in ["who am I?", "what is it", "我是谁"]:
        assert (await call(client, "recall", {"query": question, "floor": False}))["hits"], question


@pytest.mark.parametrize(
    ("tool", "args", "where"),
    [
        ("resume", {"task_id": "blgo"}, "list_tasks"),
        ("list_checkpoints", {"task_id": "blgo"}, "list_tasks"),
        ("resume", {"task_id": "blog", "checkpoint_id": "01NOPE"}, "list_checkpoints"),
        ("pin", {"id": "01NOPE"}, "list_memories"),
        ("get_memory", {"id": "01NOPE"}, "list_memories"),
        ("correct_memory", {"id": "01NOPE", "text": "The user drinks tea"}, "list_memories"),
        ("forget", {"ids": ["01NOPE"]}, "list_memories"),
    ],
)
async def test_an_unknown_id_is_named_with_the_tool_that_lists_the_right_ones(
    client: Client, tool: str, args: dict[str, Any], where: str
) -> None:
    await call(client, "checkpoint", {"task_id": "blog", "goal": "Write a post"})
    message = await call_error(client, tool, args)
    assert "by the id of" in message, message
    assert where in message, message


def test_brackets_inside_strings_are_text_not_nesting() -> None:
    """A memory of 300 brackets is no deep message: only objects and arrays count towards the limit."""
    text = orjson.dumps({"jsonrpc": "2.0", "params": {"content": "[{" * 300 + '\\"]'}})
    assert nesting(text) == 2
    assert not too_deep(text)
    assert nesting(orjson.dumps({"x": deep_tree(MAX_NESTING // 2)})) == MAX_NESTING
    assert too_deep(orjson.dumps({"x": deep_tree(MAX_NESTING // 2 + 1)}))

"""Long texts cost the model time, not meaning: what is embedded is clipped, and calls are cut small."""

from __future__ import annotations

import time

import anyio
import pytest
from mcp.client import Client

from mcp_memory.embed.loader import MAX_EMBED_TOKENS, TOKENS_PER_CALL, ModelGate, calls, clip
from mcp_memory.server import Runtime
from mcp_memory.text import estimate_tokens
from tests.conftest import call, hit_texts

pytestmark = pytest.mark.anyio


def test_a_long_text_is_clipped_to_what_the_model_reads_at_a_word_boundary() -> None:
    latin = "The billing migration notes go on and on. " * 400
    clipped = clip(latin)
    assert estimate_tokens(clipped) <= MAX_EMBED_TOKENS
    assert estimate_tokens(clipped) > MAX_EMBED_TOKENS - 20
    assert latin.startswith(clipped)
    assert not clipped.endswith(" ")
    assert latin[len(clipped)] == " "
    chinese = "计费数据库迁移到新的集群。" * 200
    assert estimate_tokens(clip(chinese)) <= MAX_EMBED_TOKENS
    assert clip("short text") == "short text"


def test_model_calls_are_cut_by_count_and_by_tokens() -> None:
    short = ["a few words"] * 70
    assert [len(g) for g in calls(short, 32)] == [32, 32, 6]
    long = [clip("word " * 2000)] * 5  # about 510 tokens each: one to a call
    groups = calls(long, 32)
    assert all(sum(estimate_tokens(t) for t in g) <= TOKENS_PER_CALL for g in groups)
    assert sum(len(g) for g in groups) == 5


async def test_long_memories_are_stored_whole_and_found_by_their_tail(
    runtime: Runtime, client: Client, mode: str
) -> None:
    """The keyword index keeps the whole text; only the embedding reads the head."""
    body = "Quarterly notes about the caching layer and the API gateway rollout. " * 120
    text = body + "The final action item: rotate the signing key KEY-9931 before Friday."
    started = time.perf_counter()
    memories = [{"content": text}, *({"content": body + f" part {i}"} for i in range(7))]
    await call(client, "remember", {"memories": memories})
    assert time.perf_counter() - started < 60  # eight long memories, clipped: seconds, not minutes
    hits = await call(client, "recall", {"query": "KEY-9931", "reinforce": False})
    assert hit_texts(hits)[0] == text


async def test_words_run_together_are_clipped_by_the_models_own_count(runtime: Runtime) -> None:
    """16,000 characters without a space: the estimate once called that 2 tokens and e5 read ~9,000."""
    model = await runtime.embedder.ready()
    run_together = "".join(f"billingmigration{i}notes" for i in range(800))[:16_000]
    assert model.token_count(run_together) > 4 * MAX_EMBED_TOKENS  # positive control: it is long
    clipped = clip(run_together, count=model.token_count)
    assert model.token_count(clipped) <= MAX_EMBED_TOKENS
    assert len(clipped) > 500  # and not cut to nothing
    assert estimate_tokens(run_together) > MAX_EMBED_TOKENS  # the estimate no longer misses it either


async def test_the_model_is_handed_to_queries_first_then_to_owners_in_turn() -> None:
    """While A's batch holds the model, A queues two more calls, B one, and someone recalls: the
    recall goes next, then B's call before either of A's (turns by owner, not arrival)."""
    gate = ModelGate()
    order: list[str] = []
    holding = anyio.Event()
    release = anyio.Event()

    async def hold() -> None:
        async with gate.turn("A"):
            holding.set()
            await release.wait()
            order.append("A0")

    async def wait_turn(label: str, owner: str | None) -> None:
        async with gate.turn(owner):
            order.append(label)

    async with anyio.create_task_group() as group:
        group.start_soon(hold)
        await holding.wait()
        for label, owner in (("A1", "A"), ("A2", "A"), ("B1", "B"), ("Q", None)):
            group.start_soon(wait_turn, label, owner)
            await anyio.wait_all_tasks_blocked()
        release.set()
    assert order == ["A0", "Q", "B1", "A1", "A2"]


async def test_a_call_cancelled_while_waiting_for_the_model_leaves_the_gate_usable() -> None:
    gate = ModelGate()
    async with gate.turn("A"):
        with anyio.move_on_after(0.05):
            async with gate.turn("B"):
                raise AssertionError("B cannot have the model while A holds it")
    with anyio.fail_after(1):
        async with gate.turn(None):
            pass

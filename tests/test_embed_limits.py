"""Long texts cost the model time, not meaning: what is embedded is clipped, and calls are cut small."""

from __future__ import annotations

import time

import anyio
import pytest
from mcp.client import Client

from mcp_memory.core.text import estimate_tokens
from mcp_memory.embed.gate import QUESTIONS, TOKENS_PER_CALL, ModelGate, SharedCalls
from mcp_memory.embed.loader import MAX_EMBED_TOKENS, calls, clip
from mcp_memory.mcp.server import Server
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
    runtime: Server, client: Client, mode: str
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


async def test_words_run_together_are_clipped_by_the_models_own_count(runtime: Server) -> None:
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


async def test_a_short_passage_call_may_use_the_question_engine_and_a_long_one_may_not() -> None:
    gate = ModelGate(engines=2)
    async with gate.turn("A") as first:  # engine 0 busy with A's memories
        assert first == 0
        async with gate.turn("B", short=True) as borrowed:
            assert borrowed == 1  # the twin was idle: a memory or two may run there
        with anyio.move_on_after(0.05) as waited:
            async with gate.turn("C"):
                raise AssertionError("a long call never takes the question engine")
        assert waited.cancelled_caught
        async with gate.turn(None) as question:
            assert question == 1


async def test_engine_zero_serves_waiting_memories_before_questions_once_a_twin_exists() -> None:
    gate = ModelGate(engines=2)
    order: list[tuple[str, int]] = []
    release = anyio.Event()

    async def hold(owner: str | None) -> None:
        async with gate.turn(owner) as engine:
            await release.wait()
            order.append((f"held {owner}", engine))

    async def wait_turn(label: str, owner: str | None) -> None:
        async with gate.turn(owner) as engine:
            order.append((label, engine))

    async with anyio.create_task_group() as group:
        group.start_soon(hold, "A")
        group.start_soon(hold, None)  # both engines busy
        await anyio.wait_all_tasks_blocked()
        group.start_soon(wait_turn, "memory", "B")
        await anyio.wait_all_tasks_blocked()
        group.start_soon(wait_turn, "question", None)
        await anyio.wait_all_tasks_blocked()
        release.set()
    assert ("memory", 0) in order
    assert ("question", 1) in order


async def test_questions_waiting_together_are_embedded_in_one_call_exactly_as_alone() -> None:
    """Eight questions arrive while the only engine is busy: one call embeds all eight, and each
    caller gets the row of its own text; a ninth arriving after that call started waits for the next."""
    import numpy as np

    gate = ModelGate()
    shared = SharedCalls(gate)
    batches: list[list[str]] = []

    def embed(engine: int, texts: list[str]) -> np.ndarray:
        batches.append(list(texts))
        return np.array([[float(len(t)), float(engine)] for t in texts], dtype=np.float32)

    texts = [f"question {'?' * i}" for i in range(8)]
    answers: dict[str, np.ndarray] = {}

    async def ask(text: str) -> None:
        answers[text] = await shared.run(QUESTIONS, [text], 0, embed)

    async with anyio.create_task_group() as group, gate.turn("A"):  # the engine is busy: they wait together
        for text in texts:
            group.start_soon(ask, text)
        await anyio.wait_all_tasks_blocked()
    assert batches == [texts]
    assert all(answers[t][0][0] == len(t) for t in texts)


async def test_shared_calls_survive_the_caller_who_was_to_run_them_going_away() -> None:
    import numpy as np

    gate = ModelGate()
    shared = SharedCalls(gate)

    def embed(engine: int, texts: list[str]) -> np.ndarray:
        return np.array([[float(len(t))] for t in texts], dtype=np.float32)

    got: list[float] = []

    async def follower() -> None:
        got.append(float((await shared.run(QUESTIONS, ["follower"], 0, embed))[0][0]))

    # The engine is busy: the leader opens a shared call and waits; the follower joins it.
    async with anyio.create_task_group() as group, anyio.create_task_group() as leader, gate.turn("A"):
        leader.start_soon(shared.run, QUESTIONS, ["leader"], 0, embed)
        await anyio.wait_all_tasks_blocked()
        group.start_soon(follower)
        await anyio.wait_all_tasks_blocked()
        leader.cancel_scope.cancel()  # the leader goes away before the engine frees
        await anyio.wait_all_tasks_blocked()
    assert got == [float(len("follower"))]


async def test_a_question_asked_again_comes_from_the_owners_cache_unchanged(runtime: Server) -> None:
    first = await runtime.embedder.query("what does the user like to drink?", owner="alice")
    again = await runtime.embedder.query("what does the user like to drink?", owner="alice")
    model = await runtime.embedder.ready()
    assert again is first
    assert not first.flags.writeable
    assert float(first @ model.query("what does the user like to drink?")) > 0.999

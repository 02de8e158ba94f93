"""The memory file: Markdown list items become pinned memories; an edit supersedes, a deletion unpins,
a broken file is reported by line and applied not at all, and every process follows the file."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client

from mcp_memory.config import Limits, load_settings
from mcp_memory.core.models import MemoryDraft, Scope
from mcp_memory.mcp.server import Server, open_server
from mcp_memory.services.memory import CallContext
from mcp_memory.services.memory_file import MemoryFileError, parse
from tests.conftest import Clock, call
from tests.test_stdio import spawn_server

pytestmark = pytest.mark.anyio

FILE = """# Memory

The items below are pinned; this line is prose and not a memory.

- The user prefers answers in British English. {#spelling}
- 用户喜欢喝乌龙茶，不加糖 {#tea}
- Deploys to production need the approval
  of Ingrid from the platform team.

```
- not an item: inside a code block
```
<!--
- not an item: inside a comment
-->
"""


def test_items_keys_and_continuations_are_read_and_the_rest_is_not() -> None:
    items = parse(Path("MEMORY.md"), FILE.encode(), Limits())
    assert [(i.key, i.text, i.line) for i in items[:2]] == [
        ("spelling", "The user prefers answers in British English.", 5),
        ("tea", "用户喜欢喝乌龙茶，不加糖", 6),
    ]
    assert items[2].text == "Deploys to production need the approval of Ingrid from the platform team."
    assert items[2].key.startswith("t-")  # no key given: keyed by its text
    assert len(items) == 3


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        ("- a {#k}\n- b {#k}\n", 2, "the key 'k' is already used on line 1"),
        ("# M\n\n- fine\n- bad key {#two words}\n", 4, "is not a key"),
        ("- ok\n-   {#empty}\n", 2, "the item is empty"),
        ("- the deploy token is ghp_1234567890abcdefghijklmnopqrstuvwxyzAB\n", 1, "looks like a credential"),
        ("- fine\n- " + "x" * 20_000 + "\n", 2, "max_content_bytes"),
        ("- fine\n- ok\n", 2, "only acknowledges"),
        ("- Tea at four\n- Lunch at noon\n- Tea at four\n", 3, "the same text as the item on line 1"),
        (
            "- The deploy\n  uses this token\n  ghp_1234567890abcdefghijklmnopqrstuvwxyzAB\n",
            3,
            "looks like a credential",
        ),
        ("".join(f"- item number {n}\n" for n in range(101)), 101, "over limits.max_batch (100)"),
    ],
)
def test_errors_are_reported_by_line(text: str, line: int, problem: str) -> None:
    with pytest.raises(MemoryFileError) as caught:
        parse(Path("MEMORY.md"), text.encode(), Limits())
    assert any(n == line and problem in message for n, message in caught.value.problems)
    assert f"line {line}: " in str(caught.value)


def test_a_file_that_is_not_utf8_names_the_line() -> None:
    with pytest.raises(MemoryFileError, match="line 2: not UTF-8"):
        parse(Path("MEMORY.md"), b"- fine\n- caf\xe9\n", Limits())


def _write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


async def _pins(client: Client) -> dict[str, dict[str, Any]]:
    pinned = (await call(client, "recall", {"query": "anything", "reinforce": False, "detail": "full"}))["pinned"]
    return {p["key"]: p for p in pinned if (p.get("key") or "").startswith("file:")}


@pytest.fixture
def memory_file(tmp_path: Path) -> Path:
    return tmp_path / "MEMORY.md"


@pytest.fixture
async def file_runtime(data_dir: Path, memory_file: Path, clock: Clock) -> Any:
    settings = load_settings(data_dir=data_dir, principal="alice", memory_file=memory_file)
    async with open_server(settings, clock=clock, warm=False) as runtime:
        yield runtime


async def test_add_edit_and_delete_items(file_runtime: Server, memory_file: Path) -> None:
    _write(memory_file, FILE)
    outcome = await file_runtime.memory_file.sync()
    assert outcome is not None
    assert (outcome.items, outcome.pinned) == (3, 3)
    assert await file_runtime.memory_file.sync() is None  # unchanged: not read again
    pinned = {p.key: p for p in await file_runtime.memory.pinned(Scope("alice"))}
    assert pinned["file:tea"].content == "用户喜欢喝乌龙茶，不加糖"
    assert pinned["file:spelling"].metadata == {"memory_file": str(memory_file), "line": 5}
    old_tea = pinned["file:tea"].id

    edited = FILE.replace("不加糖", "加一点蜂蜜").replace(
        "- The user prefers answers in British English. {#spelling}\n", ""
    )
    _write(memory_file, edited)
    outcome = await file_runtime.memory_file.sync(force=True)
    assert outcome is not None
    assert (outcome.pinned, outcome.unpinned) == (1, 1)
    now = {p.key: p for p in await file_runtime.memory.pinned(Scope("alice"))}
    assert len(now) == 2
    assert "file:spelling" not in now
    assert now["file:tea"].content == "用户喜欢喝乌龙茶，加一点蜂蜜"
    old = next(r for r in await file_runtime.store.export_rows(Scope("alice")) if r.id == old_tea)
    assert old.superseded_by == now["file:tea"].id  # the edit supersedes, history kept
    assert old.pinned is False  # no longer a pin anywhere (stats count it so)
    spelling = next(r for r in await file_runtime.store.export_rows(Scope("alice")) if r.key == "file:spelling")
    assert (spelling.pinned, spelling.superseded_by) == (False, None)  # deleted from the file: unpinned, kept


async def test_a_look_applies_the_file_unless_another_process_holds_it_past_the_wait(
    file_runtime: Server, memory_file: Path
) -> None:
    """What the SessionStart hook calls: a process that does not watch the file applies it at once,
    and waits for another process applying it no longer than it was told."""
    _write(memory_file, FILE)
    mf, scope = file_runtime.memory_file, Scope("alice")
    assert mf.control is not None
    lease = "memory-file:alice"
    assert await mf.control.acquire(lease, "another-process", time.time(), 60)
    with anyio.fail_after(5):
        await mf.look(within=0.3)  # held all along: the look gives up, nothing applied
    assert await file_runtime.memory.pinned(scope) == []
    await mf.control.release(lease, "another-process")
    await mf.look(within=0.3)
    assert {p.key for p in await file_runtime.memory.pinned(scope)} >= {"file:spelling", "file:tea"}


async def test_an_item_an_agent_already_said_becomes_the_one_current_memory(
    file_runtime: Server, memory_file: Path
) -> None:
    said = "Deploys to production need Ingrid's approval"
    scope = Scope("alice")
    stored = await file_runtime.memory.remember(scope, [MemoryDraft(content=said)], CallContext())
    _write(memory_file, f"- {said} {{#deploys}}\n")
    await file_runtime.memory_file.sync()
    current = [r for r in await file_runtime.store.export_rows(scope) if r.content == said and r.superseded_by is None]
    assert [(r.key, r.pinned) for r in current] == [("file:deploys", True)]
    (agents,) = [r for r in await file_runtime.store.export_rows(scope) if r.id == stored.items[0].id]
    assert agents.superseded_by == current[0].id  # kept as history, replaced by the file's pin


async def test_a_broken_file_changes_nothing(file_runtime: Server, memory_file: Path) -> None:
    _write(memory_file, "- The user lives in Berlin {#home}\n")
    await file_runtime.memory_file.sync()
    _write(memory_file, "- The user lives in Lisbon {#home}\n- also {#home}\n")
    with pytest.raises(MemoryFileError, match=r"line 2: the key 'home' is already used on line 1"):
        await file_runtime.memory_file.sync(force=True)
    (pin,) = await file_runtime.memory.pinned(Scope("alice"))
    assert pin.content == "The user lives in Berlin"
    assert "line 2" in file_runtime.memory_file.status


@pytest.mark.slow
async def test_every_process_follows_the_file(tmp_path: Path, mode: str) -> None:
    path = tmp_path / "MEMORY.md"  # beside the spawned server's config file: its default
    _write(path, "- The release train leaves on Thursdays {#train}\n")
    settings = load_settings(data_dir=tmp_path / "data", principal="stdio-user", memory_file=path)
    async with spawn_server(tmp_path, mode) as (client, _), open_server(settings) as other:
        await _until(
            client, lambda pins: pins.get("file:train", {}).get("text") == "The release train leaves on Thursdays"
        )
        _write(path, "- The release train leaves on Wednesdays {#train}\n- Freeze on Fridays\n")
        pins = await _until(client, lambda pins: len(pins) == 2)
        assert pins["file:train"]["text"] == "The release train leaves on Wednesdays"
        shown = await client.read_resource("memory://pinned")
        text = "".join(getattr(part, "text", "") for part in shown.contents)
        assert "Wednesdays _(id" in text
        assert "from the memory file, {#train}" in text
        with anyio.fail_after(15):  # the in-process server reads the file too (and finds the work done)
            while True:
                if "2 items" in other.memory_file.status:
                    break
                await anyio.sleep(0.2)
        rows = [r for r in await other.store.export_rows(Scope("stdio-user")) if (r.key or "").startswith("file:")]
        assert sorted(r.content for r in rows if r.superseded_by is None) == [
            "Freeze on Fridays",
            "The release train leaves on Wednesdays",
        ]  # both processes applied the file: one copy of each
        assert len(rows) == 3  # and the Thursday version, superseded


@pytest.mark.slow
async def test_the_first_recall_after_a_start_carries_the_pins_of_the_file(tmp_path: Path, mode: str) -> None:
    """A server's calls wait for its first look at the file (at most a few seconds): the first recall
    a client makes used to race the file's application and come back without its pins."""
    async with spawn_server(tmp_path, mode) as (client, _):  # a store in use: a file written since
        await call(client, "remember", {"memories": [{"content": f"Note {i} about the garden"} for i in range(5)]})
    rules = [f"Rule {i}: the release train number {i} leaves from platform {i}" for i in range(40)]
    _write(tmp_path / "MEMORY.md", "".join(f"- {rule}\n" for rule in rules))  # 40 to embed: a while
    async with spawn_server(tmp_path, mode, run=1) as (client, _):
        first = await call(client, "recall", {"query": "when does the release train leave?"})
    assert sorted(pin["text"] for pin in first["pinned"]) == sorted(rules)


async def _until(client: Client, done: Any, seconds: float = 20.0) -> dict[str, dict[str, Any]]:
    with anyio.fail_after(seconds):
        while True:
            pins = await _pins(client)
            if done(pins):
                return pins
            await anyio.sleep(0.2)


async def test_a_file_over_the_pin_cap_is_refused_whole(data_dir: Path, memory_file: Path) -> None:
    settings = load_settings(
        data_dir=data_dir, principal="alice", memory_file=memory_file, limits=Limits(pinned_cap_tokens=20)
    )
    _write(memory_file, "- The user lives in Berlin {#home}\n- " + "The user reads long novels. " * 5 + "{#books}\n")
    async with open_server(settings, warm=False) as runtime:
        with pytest.raises(MemoryFileError, match=r"line 1: its pins would bring .* over limits.pinned_cap_tokens"):
            await runtime.memory_file.sync()
        assert await runtime.memory.pinned(Scope("alice")) == []
        assert await runtime.store.export_rows(Scope("alice")) == []


async def test_an_edit_that_frees_pins_fits_under_the_cap(data_dir: Path, memory_file: Path) -> None:
    """33 tokens pinned; the edit keeps 10: applied, though old and new together would be 43."""
    settings = load_settings(
        data_dir=data_dir, principal="alice", memory_file=memory_file, limits=Limits(pinned_cap_tokens=35)
    )
    three = "".join(f"- The {name} server runs in the basement rack {{#{name}}}\n" for name in ("mail", "web", "db"))
    _write(memory_file, three)
    async with open_server(settings, warm=False) as runtime:
        await runtime.memory_file.sync()
        assert len(await runtime.memory.pinned(Scope("alice"))) == 3
        _write(memory_file, "- Every server now runs in the cloud {#web}\n")
        outcome = await runtime.memory_file.sync(force=True)
        assert outcome is not None
        assert (outcome.pinned, outcome.unpinned) == (1, 2)
        (pin,) = await runtime.memory.pinned(Scope("alice"))
        assert pin.content == "Every server now runs in the cloud"

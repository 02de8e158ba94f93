"""The memory file: a Markdown file the person edits whose list items are pinned memories.

    # Memory
    - The user prefers answers in British English. {#spelling}
    - 用户喜欢喝乌龙茶，不加糖 {#tea}
    - Deploys need Ingrid's approval.

Every list item (``-``, ``*``, ``+`` or ``1.``; indented lines continue it) is one memory, pinned,
keyed ``file:<key>``. ``{#key}`` at the end names the key, so editing the item supersedes the old
pin; an item without one is keyed by its text (an edit unpins the old text and pins the new).
Deleting an item unpins its memory (kept, history intact). Headings, prose and HTML comments are
not memories. A file with any error (a key used twice, a malformed key, an empty or oversized item,
a credential) is reported with the line of each error and nothing of it is applied.

Every process on the data directory checks the file's modification time and size at each call of
``sync`` (the server does so every two seconds) and, when it changed, compares the file with the
store under a lease in the control file: one process writes the differences, the others find
nothing left to write.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import anyio

from mcp_memory.config import Limits
from mcp_memory.core.errors import MemoryServerError
from mcp_memory.core.models import Criteria, MemoryDraft, MemoryRecord, Provenance, Scope
from mcp_memory.core.text import TextProblem, check_text, estimate_tokens
from mcp_memory.services import incoming
from mcp_memory.services.control_ports import PassControl
from mcp_memory.services.intake import CallContext
from mcp_memory.services.memory import MemoryService
from mcp_memory.services.rules import is_throwaway
from mcp_memory.services.switch import refuse_if_off

log = logging.getLogger(__name__)
MAX_FILE_BYTES = 262_144
POLL_SECONDS = 2.0  # how often a server looks at the file's modification time and size
LEASE_SECONDS = 60.0  # a process that died applying the file holds it no longer than this
FIRST_LOOK_SECONDS = 10.0  # the longest a server's first calls wait for its first look at the file
KEY_PREFIX = "file:"
FILE_PROVENANCE = Provenance(client_name="memory file", transport="file")
_ITEM = re.compile(r"^(?P<indent>\s{0,3})(?:[-*+]|\d{1,9}[.)])\s+(?P<text>.*)$")
_KEY = re.compile(r"\s*\{#(?P<key>[^}]*)\}\s*$")
_GOOD_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_HEADING = re.compile(r"^\s{0,3}#{1,6}(\s|$)")
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")


@dataclass(frozen=True)
class FileItem:
    key: str  # without the prefix
    text: str
    line: int


class MemoryFileError(MemoryServerError):
    """The file has errors: each one with its line, and nothing of it applied."""

    def __init__(self, path: Path, problems: list[tuple[int, str]]) -> None:
        self.problems = problems
        listed = "; ".join(f"line {line}: {problem}" for line, problem in problems[:10])
        more = f" (and {len(problems) - 10} more)" if len(problems) > 10 else ""
        super().__init__(f"the memory file {str(path)!r} was not applied: {listed}{more}")


@dataclass(frozen=True)
class SyncOutcome:
    pinned: int  # new or edited items written (and pinned)
    repinned: int  # unchanged items whose memory had been unpinned
    unpinned: int  # items gone from the file
    items: int  # items in the file


def parse(path: Path, data: bytes, limits: Limits) -> list[FileItem]:
    """The file's items, or MemoryFileError naming every problem by line."""
    if len(data) > MAX_FILE_BYTES:
        raise MemoryFileError(path, [(1, f"the file is {len(data)} bytes, over {MAX_FILE_BYTES}; split it or trim it")])
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise MemoryFileError(path, [(line, "not UTF-8 text; save the file as UTF-8")]) from None
    problems: list[tuple[int, str]] = []
    items = [_item(parts, problems, limits) for parts in _blocks(text)]
    keys: dict[str, int] = {}
    texts: dict[str, int] = {}
    for item in items:
        if item.text in texts:
            problems.append((item.line, f"the same text as the item on line {texts[item.text]}; keep one"))
        elif item.key in keys:
            problems.append((item.line, f"the key {item.key!r} is already used on line {keys[item.key]}"))
        keys.setdefault(item.key, item.line)
        texts.setdefault(item.text, item.line)
    if len(items) > limits.max_batch:
        first_over = items[limits.max_batch].line
        problems.append((first_over, f"the file has {len(items)} items, over limits.max_batch ({limits.max_batch})"))
    if problems:
        raise MemoryFileError(path, sorted(problems))
    return items


def _blocks(text: str) -> list[list[tuple[int, str]]]:
    """Each list item's lines (number, text): an indented line continues the item above it; a
    heading or unindented prose ends it; code blocks and HTML comments are skipped."""
    blocks: list[list[tuple[int, str]]] = []
    open_item = fenced = in_comment = False
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if _FENCE.match(line):
            fenced, open_item = not fenced, False
            continue
        if fenced or in_comment:
            in_comment = in_comment and "-->" not in line
            continue
        if stripped.startswith("<!--") and "-->" not in stripped:
            in_comment = True
            continue
        item = _ITEM.match(line)
        if item is not None:
            blocks.append([(number, item.group("text"))])
            open_item = True
        elif stripped and open_item and line[:1].isspace():
            blocks[-1].append((number, stripped))
        elif stripped:
            open_item = False  # a heading or prose: not a memory
    return blocks


def _item(parts: list[tuple[int, str]], problems: list[tuple[int, str]], limits: Limits) -> FileItem:
    line = parts[0][0]
    for number, part in parts:  # a credential is named on its own line, not the item's first
        kinds = incoming.secret_kinds(part)
        if kinds:
            problems.append((number, f"holds what looks like a credential ({', '.join(kinds)}); keep secrets out"))
    body = re.sub(r"<!--.*?-->", "", " ".join(part for _, part in parts if part)).strip()
    key = None
    found = _KEY.search(body)
    if found is not None:
        key, body = found.group("key").strip(), body[: found.start()].strip()
        if not _GOOD_KEY.match(key):
            problems.append((line, f"{{#{key}}} is not a key: use 1-64 letters, digits, '-', '_' or '.'"))
    if not body:
        problems.append((line, "the item is empty; write the memory after the '-'"))
    elif len(body.encode()) > limits.max_content_bytes:
        problems.append((line, f"the item is over limits.max_content_bytes ({limits.max_content_bytes} bytes)"))
    elif is_throwaway(body):
        problems.append((line, f"{body!r} only acknowledges; write what should be remembered"))
    else:
        try:
            check_text(body)
        except TextProblem as exc:
            problems.append((line, str(exc)))
    return FileItem(key or "t-" + hashlib.sha256(body.encode()).hexdigest()[:16], body, line)


@dataclass(frozen=True)
class _Plan:
    write: list[FileItem]  # new and edited items
    replaced: dict[str, MemoryRecord]  # key -> the current version an edit supersedes
    repin: list[MemoryRecord]  # unchanged items whose memory was unpinned
    gone: list[MemoryRecord]  # pins of items no longer in the file


class MemoryFile:
    """Applies one file to one principal (principal-wide pins) whenever the file changes."""

    def __init__(
        self, memory: MemoryService, path: Path, scope: Scope, limits: Limits, control: PassControl | None = None
    ) -> None:
        self.control = control  # a lease, so two processes never write the same change twice
        self.holder = f"{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.memory = memory
        self.path = path
        self.scope = Scope(scope.principal)
        self.limits = limits
        self._seen: tuple[int, int] | None = None  # (mtime_ns, size) last applied (or found broken)
        self.status = "not read yet"
        self._first_look: anyio.Event | None = None  # set once a watching server has looked

    def expect_first_look(self) -> None:
        """A server is about to watch the file: its calls wait (``settled``) until the first look."""
        self._first_look = anyio.Event()

    async def settled(self) -> None:
        """Return once the watching server has looked at the file (at most FIRST_LOOK_SECONDS), so
        the first recall after a start already carries the pins the file holds; at once otherwise."""
        if self._first_look is not None and not self._first_look.is_set():
            with anyio.move_on_after(FIRST_LOOK_SECONDS):
                await self._first_look.wait()
            self._first_look.set()  # a look slower than that holds up no later call

    async def look(self, within: float = FIRST_LOOK_SECONDS) -> None:
        """Apply the file now if it differs from the store, for a process that does not watch it (a
        Claude Code hook): what a server's first calls wait for (``settled``). While another process
        holds the lease, wait for it to finish, at most ``within`` seconds; a broken file is logged
        and left (the store's pins stand)."""
        give_up = time.monotonic() + within
        while True:
            try:
                await self.sync()
            except MemoryServerError as exc:  # a broken file, memory switched off, the pin cap
                log.warning("%s", exc)
                return
            if self._seen is not None or not self.path.is_file():  # applied (or nothing to apply)
                return
            if time.monotonic() >= give_up:
                log.warning("memory file %s: another process was still applying it after %.0f s", self.path, within)
                return
            await anyio.sleep(0.2)  # another process is applying it: its work is done in a moment

    async def sync(self, force: bool = False) -> SyncOutcome | None:
        """Apply the file if it changed since the last look (or ``force``); None when nothing was read.
        Raises MemoryFileError (nothing applied) for a file with errors."""
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            self._seen, self.status = None, f"no memory file at {self.path}"
            return None
        mark = (stat.st_mtime_ns, stat.st_size)
        if mark == self._seen and not force:
            return None
        try:
            items = parse(self.path, self.path.read_bytes(), self.limits)
        except MemoryFileError as exc:
            self._seen, self.status = mark, str(exc)
            raise
        lease = f"memory-file:{self.scope.principal}"
        if self.control is not None and not await self.control.acquire(lease, self.holder, time.time(), LEASE_SECONDS):
            return None  # another process is applying it: the next look finds its work done
        try:
            outcome = await self.apply(items)
        finally:
            if self.control is not None:
                await self.control.release(lease, self.holder)
        self._seen = mark
        self.status = f"{outcome.items} items from {self.path}"
        return outcome

    async def watch(self, stop: anyio.Event, every: float = POLL_SECONDS) -> None:
        """Sync now and whenever the file changes, until ``stop``; each new problem is logged once."""
        told = ""
        while not stop.is_set():
            try:
                outcome = await self.sync()
            except MemoryServerError as exc:  # a broken file, memory switched off, the pin cap
                if str(exc) != told:
                    log.warning("%s", exc)
                told = str(exc)
            else:
                if outcome is not None and (outcome.pinned or outcome.repinned or outcome.unpinned):
                    log.info(
                        "memory file %s: %d pinned, %d pinned again, %d unpinned",
                        self.path,
                        outcome.pinned,
                        outcome.repinned,
                        outcome.unpinned,
                    )
                told = ""
            if self._first_look is not None:
                self._first_look.set()
            with anyio.move_on_after(every):
                await stop.wait()

    async def check(self) -> int:
        """What applying the file now would do, without doing it: its item count, or MemoryFileError
        (a broken file, or pins over limits.pinned_cap_tokens). For `mcp-memory doctor`."""
        items = parse(self.path, self.path.read_bytes(), self.limits)
        await self._plan(items)
        return len(items)

    async def _plan(self, items: list[FileItem]) -> _Plan:
        now = self.memory.clock()
        store = self.memory.store
        wanted = {KEY_PREFIX + i.key: i for i in items}
        current = await store.select_memories(
            self.scope, Criteria(keys=tuple(wanted), include_archived=True, namespace_only=True), now
        )
        by_key = {r.key: r for r in current if r.key is not None}
        write = [i for k, i in wanted.items() if k not in by_key or by_key[k].content != i.text]
        replaced = {k: by_key[k] for k in (KEY_PREFIX + i.key for i in write) if k in by_key}
        repin = [r for k, r in by_key.items() if not r.pinned and r.content == wanted[k].text]
        # Every pin of the principal-wide scope: the file's (those gone from it unpinned) and the cap's.
        pinned = await store.select_memories(self.scope, Criteria(pinned=True), now)
        gone = [r for r in pinned if (r.key or "").startswith(KEY_PREFIX) and r.key not in wanted]
        # The cap is checked here, before anything is written, so a file is applied whole or not at all.
        leaving = {r.id for r in gone} | {r.id for r in replaced.values() if r.pinned}
        total = sum(estimate_tokens(r.content) for r in pinned if r.id not in leaving)
        total += sum(estimate_tokens(i.text) for i in write) + sum(estimate_tokens(r.content) for r in repin)
        if total > self.limits.pinned_cap_tokens:
            first = min((i.line for i in write), default=1)
            problem = (
                f"its pins would bring pinned memories to {total} tokens, over limits.pinned_cap_tokens "
                f"({self.limits.pinned_cap_tokens}); shorten or remove items, or unpin other memories"
            )
            raise MemoryFileError(self.path, [(first, problem)])
        return _Plan(write, replaced, repin, gone)

    async def apply(self, items: list[FileItem]) -> SyncOutcome:
        """Make the store's file pins match ``items``: unpin what left the file, write new and edited
        items (one batch: all or nothing; an edit supersedes its old version by key), pin again
        what was unpinned."""
        plan = await self._plan(items)
        await refuse_if_off(self.memory.switch, self.scope, "the memory file was not applied")
        for record in plan.gone:
            await self.memory.pin(self.scope, record.id, pinned=False)
        if plan.write:
            # An edit's old version leaves the pins first (the cap counts what stays); the new one
            # supersedes it by its key. Should the write fail, the old pins come back.
            store = self.memory.store
            edited = [old for old in plan.replaced.values() if old.pinned]
            for old in edited:
                await store.set_pinned(self.scope, old.id, False)
            try:
                await self.memory.remember(
                    self.scope,
                    [
                        MemoryDraft(
                            content=i.text,
                            key=KEY_PREFIX + i.key,
                            pinned=True,
                            metadata={"memory_file": str(self.path), "line": i.line},
                        )
                        for i in plan.write
                    ],
                    CallContext(FILE_PROVENANCE),
                )
            except BaseException:
                for old in edited:
                    await store.set_pinned(self.scope, old.id, True)
                raise
        for record in plan.repin:
            await self.memory.pin(self.scope, record.id)
        return SyncOutcome(pinned=len(plan.write), repinned=len(plan.repin), unpinned=len(plan.gone), items=len(items))

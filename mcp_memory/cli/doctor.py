"""``mcp-memory doctor``: what is in effect, and whether each part works, one line a part."""

from __future__ import annotations

import sys
import time
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from mcp_memory import __version__
from mcp_memory.config import ENV_PREFIX, Settings, config_path, environment_snapshot
from mcp_memory.core.errors import MemoryServerError
from mcp_memory.storage.permissions import file_mode, loose_paths, settings_files, survey

if TYPE_CHECKING:  # the server's modules are imported when the command runs
    from mcp_memory.compose import Runtime
    from mcp_memory.core.models import Scope
    from mcp_memory.services.memory_file import MemoryFile


def _descriptors(settings: Settings) -> str:
    """The descriptor limit against the pool: what this shell's limit allows, and what a network
    server (which lifts its soft limit to the hard one at start) will have."""
    from mcp_memory import descriptors

    soft, hard = descriptors.limits()
    max_open = settings.pool.max_open
    here = descriptors.budget(max_open, soft).describe(max_open)
    if soft is None or hard == soft:
        return f"file descriptors: {here}"
    lifted = min(hard or descriptors.SOFT_LIMIT_CEILING, descriptors.SOFT_LIMIT_CEILING)
    served = descriptors.budget(max_open, lifted).describe(max_open)
    return f"file descriptors: {here}; `serve --transport http|sse` lifts the soft limit: {served}"


def _out(text: str) -> None:
    sys.stdout.write(text + "\n")


def _in_effect(settings: Settings) -> str:
    """What a new user checks first of the settings: where, who, which backend and model."""
    emb = settings.embedding
    model = f"{emb.provider}" + (f" {emb.model}" if emb.model else "")
    namespace = f", namespace {settings.namespace!r}" if settings.namespace else ""
    return (
        f"in effect: data dir {settings.data_dir}, principal {settings.principal!r}{namespace}, "
        f"backend {settings.storage.backend}, embedding provider {model} (`doctor --settings` prints every setting)"
    )


async def run(settings: Settings, explicit: Path | None, every_setting: bool = False) -> int:
    """The checks, one line a part, and the verdict; with ``every_setting`` the settings in effect
    after them, as JSON (about 150 lines: a new user reads the verdicts first)."""
    code = await _check(settings, explicit)
    if every_setting:
        _out("settings in effect:")
        _out(orjson.dumps(settings.model_dump(mode="json"), option=orjson.OPT_INDENT_2).decode())
    return code


async def _check(settings: Settings, explicit: Path | None) -> int:
    from mcp_memory.compose import open_runtime
    from mcp_memory.core.models import Scope
    from mcp_memory.mcp.wire_recall import hit_tokens

    path = config_path(explicit)
    _out(f"mcp-memory {__version__}")
    _out(f"config file: {path if path else '(none; defaults and environment)'}")
    env = environment_snapshot()
    _out(f"environment: {env if env else '(no MCP_MEMORY_* variables)'}")
    _out(_in_effect(settings))
    scope = Scope(settings.principal, settings.namespace)
    _out(_descriptors(settings))
    missing = _no_store(settings)
    if missing is not None:  # opening the runtime would create one: a mistyped path would pass
        if "data_dir" not in settings.model_fields_set:  # the default place, before the first serve
            _out(f"store: none yet: {missing}; `mcp-memory serve` creates it there on its first run")
            await _model_alone(settings)
            _out("status: OK (no store yet)")
            return 0
        _out(f"store: NONE: {missing}; nothing was created")
        await _model_alone(settings)
        principal = f"the principal (--principal or {ENV_PREFIX}PRINCIPAL; by default the OS user name), then "
        _out(
            f"status: NO STORE: check {principal if _other_stores(settings) else ''}the path (--data-dir, "
            f"{ENV_PREFIX}DATA_DIR or data_dir in the config file); "
            "if it is the one you meant, `mcp-memory serve` creates the store on its first run"
        )
        return 1
    loose = _permissions(settings)
    ok = not loose  # a problem even once fixed below: other users could read the memories until now
    if settings.storage.backend == "postgres":
        from mcp_memory.cli import database

        ok = await database.doctor(settings.storage.postgres, _out) and ok
    try:
        async with open_runtime(settings, hit_cost=hit_tokens) as runtime:
            ok = await _runtime_checks(runtime, scope, bool(loose)) and ok
    except MemoryServerError as exc:
        ok = False
        _out(f"store: FAILED: {exc}")
    _out("status: OK" if ok else "status: BROKEN")
    return 0 if ok else 1


def _no_store(settings: Settings) -> str | None:
    """Why the data directory has no store of the principal's to check (SQLite), or None."""
    from mcp_memory.storage.pool import principal_file

    if settings.storage.backend != "sqlite":
        return None
    where = settings.data_dir
    if not where.exists():
        return f"the data directory {where} does not exist"
    if not where.is_dir():
        return f"the data directory {where} is not a directory"
    if not principal_file(where, settings.principal).exists():
        others = _other_stores(settings)
        held = f" (it holds the stores of {', '.join(others)})" if others else ""
        return f"{where} holds no store of the principal {settings.principal!r}{held}"
    return None


def _other_stores(settings: Settings) -> list[str]:
    """The principals whose stores the data directory holds, as their file names spell them: a
    principal mistyped or left to its default (the OS user name) finds none of its own there."""
    from mcp_memory.storage.pool import principal_file

    folder = principal_file(settings.data_dir, settings.principal).parent
    if not folder.is_dir():
        return []
    return sorted(path.stem.rsplit("-", 1)[0] for path in folder.glob("*-*.db"))


async def _model_alone(settings: Settings) -> None:
    """The embedding model, loaded without a store: whether it works before the first run."""
    from mcp_memory.compose import embedder_config
    from mcp_memory.embed.loader import Embedder

    embedder = Embedder(embedder_config(settings))
    try:
        model = await embedder.ready()
        _out(f"embedding model: {model.model_id} (dimension {model.dim}) loads")
    except MemoryServerError as exc:
        _out(f"embedding model: FAILED: {exc}")


async def _runtime_checks(runtime: Runtime, scope: Scope, loose: bool) -> bool:
    """The parts the runtime opened: permissions made owner-only, the memory file, the model against
    the store, the vectors, the switch, the network tokens."""
    from mcp_memory.services.switch import off_reason
    from mcp_memory.storage.tokens import TokenStore

    settings = runtime.settings
    if loose:  # the store made them owner-only as it opened
        still = len(loose_paths(settings.data_dir, settings_files(settings)))
        _out(f"permissions: {still} path(s) still open to others" if still else "permissions: now owner-only")
    ok = await _memory_file_check(runtime.memory_file)
    _out(f"data file: {runtime.store.path_for(scope)}")
    ok = await _model_check(runtime, scope) and ok
    _out(f"store stats: {await runtime.store.count(scope)}")
    healthy, said = await runtime.store.vectors.health(scope)
    ok = ok and healthy
    _out(f"vectors: {said}" if healthy else f"vectors: PROBLEM: {said}")
    off = await off_reason(runtime.memory.switch, scope)
    _out(f"memory switch: {off or 'on'}")  # off is a person's choice, not a broken set-up
    with closing(TokenStore.for_settings(settings)) as tokens:
        live = await tokens.count_live(time.time())
    http = settings.http
    _out(
        f"network: http://{http.host}:{http.port}{http.path} (sse {http.sse_path}), auth {http.auth}, "
        f"{live} live token(s)" + ("" if live or http.auth == "none" else " (create one to serve sse/http)")
    )
    return ok


async def _model_check(runtime: Runtime, scope: Scope) -> bool:
    """The embedding model loads and embeds, and is the one the store was built with."""
    ok = True
    started = time.perf_counter()
    try:
        model = await runtime.embedder.ready()
        vec = await runtime.embedder.query("doctor check")
        _out(
            f"embedding model: {model.model_id} (dimension {model.dim}), loaded in "
            f"{time.perf_counter() - started:.2f} s, test vector norm {float((vec @ vec) ** 0.5):.3f}"
        )
    except MemoryServerError as exc:
        ok = False
        _out(f"embedding model: FAILED: {exc}")
        model = None
    stored_model, stored_dim = await runtime.store.stored_model(scope)
    _out(f"store built with: {stored_model or '(no vectors yet)'}")
    if model is not None and stored_model is not None and (stored_model, stored_dim) != (model.model_id, model.dim):
        ok = False
        _out("store/model mismatch: run `mcp-memory reindex`")
    return ok


def _permissions(settings: Settings) -> list[Path]:
    """Say which of our paths other users may open (and what in the data directory is not ours)."""
    found = survey(settings.data_dir, settings_files(settings))
    if (note := found.foreign_note()) is not None:  # not a problem: theirs, and ours stay private
        _out(f"permissions: note: {note}")
    loose = found.loose()
    if loose:
        shown = ", ".join(f"{p.relative_to(settings.data_dir)} {file_mode(p) or 0:o}" for p in loose[:3])
        _out(
            f"permissions: PROBLEM: {len(loose)} path(s) in {settings.data_dir} other users may open ({shown}); "
            "opening the store below makes them owner-only (0700/0600)"
        )
    else:
        _out(f"permissions: mcp-memory's files in {settings.data_dir} are owner-only")
    return loose


async def _memory_file_check(memory_file: MemoryFile) -> bool:
    """Whether the memory file, if there is one, would be applied (every error listed by line)."""
    from mcp_memory.services.memory_file import MemoryFileError

    path = memory_file.path
    if not path.is_file():
        _out(f"memory file: none at {path} (create it to pin memories by hand)")
        return True
    try:
        items = await memory_file.check()
    except MemoryFileError as exc:
        _out(f"memory file: PROBLEM: {exc}")
        return False
    _out(f"memory file: {path}, {items} item(s), applied by every server within seconds of a change")
    return True

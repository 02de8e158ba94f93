"""The ``mcp-memory`` command: serve, doctor, export, import, reindex."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import orjson

from mcp_memory import __version__
from mcp_memory.config import Settings, config_path, environment_snapshot, load_settings
from mcp_memory.errors import MemoryServerError


def _global_options(suppress: bool) -> argparse.ArgumentParser:
    """The options every command takes, before or after the command's name."""
    options = argparse.ArgumentParser(add_help=False)
    default: dict[str, Any] = {"default": argparse.SUPPRESS} if suppress else {}
    options.add_argument(
        "--config",
        type=Path,
        help="TOML settings file (default: $MCP_MEMORY_CONFIG, else ~/.config/mcp-memory/config.toml on Linux)",
        **default,
    )
    options.add_argument("--data-dir", type=Path, help="where the SQLite files live", **default)
    options.add_argument("--principal", help="the local principal (default: the OS user name)", **default)
    options.add_argument("--namespace", help="the namespace writes go to (a project name)", **default)
    return options


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcp-memory",
        description="Long-term memory and task state for AI agents over MCP.",
        parents=[_global_options(suppress=False)],
    )
    parser.add_argument("--version", action="version", version=f"mcp-memory {__version__}")
    common = [_global_options(suppress=True)]  # after the command name too, without resetting what came before
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the MCP server", parents=common)
    serve.add_argument("--transport", choices=["stdio"], default="stdio")
    sub.add_parser("doctor", help="check the setup; exit non-zero when it is broken", parents=common)
    export = sub.add_parser("export", help="write every memory of the principal as JSON lines", parents=common)
    export.add_argument("file", nargs="?", type=Path, help="output file (default: stdout)")
    imp = sub.add_parser("import", help="read JSON lines written by export; texts are re-embedded", parents=common)
    imp.add_argument("file", type=Path, help="the export file, or - for standard input")
    sub.add_parser("reindex", help="re-embed every memory with the configured embedding model", parents=common)
    sub.add_parser("maintain", help="run one lifecycle pass (decay) now and print what it did", parents=common)
    return parser


def _settings(args: argparse.Namespace) -> Settings:
    overrides: dict[str, Any] = {}
    for name in ("data_dir", "principal", "namespace"):
        value = getattr(args, name)
        if value is not None:
            overrides[name] = value
    return load_settings(args.config, **overrides)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = _settings(args)
        from mcp_memory import server

        server.configure_logging(settings)
        if args.command == "serve":
            anyio.run(server.serve_stdio, settings)
            return 0
        if args.command == "doctor":
            return anyio.run(_doctor, settings, args.config)
        if args.command == "export":
            return _write_export(anyio.run(_export, settings), args.file)
        if args.command == "import":
            return anyio.run(_import, settings, _read_import(args.file))
        if args.command == "reindex":
            return anyio.run(_reindex, settings)
        if args.command == "maintain":
            return anyio.run(_maintain, settings)
    except MemoryServerError as exc:
        _err(f"mcp-memory: {exc}")
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


def _out(text: str) -> None:
    sys.stdout.write(text + "\n")


def _err(text: str) -> None:
    sys.stderr.write(text + "\n")


async def _doctor(settings: Settings, explicit: Path | None) -> int:
    from mcp_memory.models import Scope
    from mcp_memory.server import open_runtime

    ok = True
    path = config_path(explicit)
    _out(f"mcp-memory {__version__}")
    _out(f"config file: {path if path else '(none; defaults and environment)'}")
    env = environment_snapshot()
    _out(f"environment: {env if env else '(no MCP_MEMORY_* variables)'}")
    _out("settings in effect:")
    _out(orjson.dumps(settings.model_dump(mode="json"), option=orjson.OPT_INDENT_2).decode())
    scope = Scope(settings.principal, settings.namespace)
    try:
        async with open_runtime(settings, warm=False) as runtime:
            _out(f"data file: {runtime.store.path_for(scope)}")
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
            if (
                model is not None
                and stored_model is not None
                and (stored_model, stored_dim) != (model.model_id, model.dim)
            ):
                ok = False
                _out("store/model mismatch: run `mcp-memory reindex`")
            _out(f"store stats: {await runtime.store.count(scope)}")
    except MemoryServerError as exc:
        ok = False
        _out(f"store: FAILED: {exc}")
    _out("status: OK" if ok else "status: BROKEN")
    return 0 if ok else 1


async def _export(settings: Settings) -> list[bytes]:
    from mcp_memory.models import Scope
    from mcp_memory.server import open_runtime
    from mcp_memory.services.portability import export_lines

    async with open_runtime(settings, warm=False) as runtime:
        return [line async for line in export_lines(runtime.store, Scope(settings.principal, settings.namespace))]


def _write_export(lines: list[bytes], file: Path | None) -> int:
    if file is None:
        sys.stdout.buffer.writelines(lines)
        sys.stdout.buffer.flush()
    else:
        with file.open("wb") as sink:
            sink.writelines(lines)
    _err(f"exported {len(lines)} memories")
    return 0


def _read_import(file: Path) -> list[bytes]:
    from mcp_memory.errors import InvalidInputError

    if str(file) == "-":
        return sys.stdin.buffer.read().splitlines()
    if not file.is_file():
        raise InvalidInputError("file", f"{str(file)!r} does not exist")
    return file.read_bytes().splitlines()


async def _import(settings: Settings, lines: list[bytes]) -> int:
    from mcp_memory.models import Scope
    from mcp_memory.server import open_runtime
    from mcp_memory.services.portability import import_lines

    async with open_runtime(settings, warm=False) as runtime:
        imported, skipped = await import_lines(
            runtime.store, runtime.embedder, Scope(settings.principal, settings.namespace), lines
        )
    _err(f"imported {imported} memories, skipped {skipped} already present")
    return 0


async def _reindex(settings: Settings) -> int:
    from mcp_memory.models import Scope
    from mcp_memory.server import open_runtime
    from mcp_memory.services.portability import reindex

    async with open_runtime(settings, warm=False) as runtime:
        count = await reindex(runtime.store, runtime.embedder, Scope(settings.principal, settings.namespace))
    _err(f"re-embedded {count} memories")
    return 0


async def _maintain(settings: Settings) -> int:
    from mcp_memory.server import open_runtime

    async with open_runtime(settings, warm=False) as runtime:
        report = await runtime.scheduler.run_once()
    _out(orjson.dumps(report).decode())
    return 0

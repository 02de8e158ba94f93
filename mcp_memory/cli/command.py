"""The ``mcp-memory`` command: serve, doctor, export, import, reindex, install."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeAlias

import anyio
import orjson

from mcp_memory import __version__
from mcp_memory.cli import install
from mcp_memory.cli.tokens import moment, when
from mcp_memory.config import Settings, load_settings
from mcp_memory.core.errors import MemoryServerError


def _global_options(suppress: bool, identity: bool = True) -> argparse.ArgumentParser:
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
    if identity:
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
    files = [_global_options(suppress=True, identity=False)]  # for the commands that take no principal
    _serving_commands(sub, common, files)
    _data_commands(sub, common, files)
    _upkeep_commands(sub, common)
    install.add_parsers(sub)
    _describe(parser)
    return parser


def _describe(parser: argparse.ArgumentParser) -> None:
    """Each command's own --help opens with the line the command list shows for it: argparse takes
    a subcommand's ``help`` for the list only, and `mcp-memory switch --help` said nothing of what
    the command does."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for listed in action._choices_actions:
                command = action.choices[listed.dest]
                command.description = command.description or listed.help
                _describe(command)


Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
Parents: TypeAlias = list[argparse.ArgumentParser]


def _serving_commands(sub: Commands, common: Parents, files: Parents) -> None:
    serve = sub.add_parser("serve", help="run the MCP server", parents=common)
    serve.add_argument(
        "--transport",
        choices=["stdio", "sse", "http"],
        default="stdio",
        help="stdio (default), sse, or http (streamable HTTP); network transports need a token (see `token`)",
    )
    serve.add_argument("--host", help="interface for sse/http (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port for sse/http (default 8765; 0 picks a free one)")
    serve.add_argument("--stateless", action="store_true", default=None, help="streamable HTTP without sessions")
    serve.add_argument(
        "--no-auth",
        action="store_true",
        help="serve sse/http without tokens, every client acting as the one local principal",
    )
    token = sub.add_parser("token", help="create, list or revoke bearer tokens for sse/http", parents=files)
    token_sub = token.add_subparsers(dest="token_command", required=True)
    create = token_sub.add_parser("create", help="print a new token (shown once; only its hash is kept)", parents=files)
    create.add_argument("--principal", dest="for_principal", required=True, help="whose data the token opens")
    create.add_argument("--namespace", dest="for_namespace", help="the namespace its writes go to")
    create.add_argument("--expires", help="a duration (90d, 12h, 30m) or a date (2027-01-31); default: never")
    create.add_argument("--label", help="a note to tell tokens apart in `token list`")
    token_sub.add_parser("list", help="every token: id, principal, namespace, state (never the token)", parents=files)
    revoke = token_sub.add_parser("revoke", help="refuse a token from its next request on", parents=files)
    revoke.add_argument("id", help="the token id shown by `token create` and `token list` (tok_...)")
    connect = sub.add_parser(
        "connect", help="a stdio server that forwards to a remote mcp-memory over HTTP", parents=common
    )
    connect.add_argument("url", help="the remote endpoint, e.g. https://memory.example.com/mcp")
    connect.add_argument(
        "--token-env", default="MCP_MEMORY_TOKEN", help="environment variable holding the bearer token"
    )


def _data_commands(sub: Commands, common: Parents, files: Parents) -> None:
    doctor = sub.add_parser("doctor", help="check the setup; exit non-zero when it is broken", parents=common)
    doctor.add_argument("--settings", action="store_true", help="also print every setting in effect (JSON)")
    database = sub.add_parser("database", help="the PostgreSQL backend's schema (ADR 19)", parents=common)
    database.add_argument("action", choices=("migrate", "status"), help="migrate: as the owner; status: as doctor")
    database.add_argument(
        "--vectors",
        choices=("pgvector", "in-process"),
        help="migrate: where the vectors are kept and searched (default: pgvector when the extension is installed)",
    )
    migrate = sub.add_parser(
        "migrate", help="copy every principal between data_dir's SQLite files and PostgreSQL (ADR 19)", parents=files
    )
    migrate.add_argument("--to", choices=("postgres", "sqlite"), required=True, help="where the copy goes")
    migrate.add_argument("--only", action="append", default=[], metavar="PRINCIPAL", help="this principal (repeat)")
    export = sub.add_parser("export", help="write every memory of the principal as JSON lines", parents=common)
    export.add_argument("file", nargs="?", type=Path, help="output file (default: stdout)")
    imp = sub.add_parser(
        "import",
        help="read JSON lines written by export (texts are re-embedded), or memories kept elsewhere (--from)",
        parents=common,
    )
    imp.add_argument("file", type=Path, help="the export file (- for standard input); for --from markdown, a folder")
    imp.add_argument(
        "--from",
        dest="source",
        choices=("mcp-memory", "server-memory", "mem0", "markdown"),
        default="mcp-memory",
        help="the file's format: this server's export (default), the reference server-memory's memory.jsonl, "
        "a mem0 export (JSON), or a folder of Markdown notes",
    )
    imp.add_argument(
        "--apply", action="store_true", help="write (--from imports are a dry run that only counts without it)"
    )


def _upkeep_commands(sub: Commands, common: Parents) -> None:
    hook = sub.add_parser(
        "hook",
        help="answer a Claude Code hook (JSON on stdin): context at SessionStart and UserPromptSubmit, "
        "notable statements and a checkpoint at PreCompact and Stop",
        parents=common,
    )
    hook.add_argument(
        "event", choices=("SessionStart", "UserPromptSubmit", "PreCompact", "Stop"), help="the hook's event name"
    )
    switch = sub.add_parser(
        "switch",
        help="the kill switch: off drops every agent to no memory at once (the whole data directory, or "
        "--principal / --namespace), on brings it back with nothing lost; status lists the switches",
        parents=common,
    )
    switch.add_argument(
        "state", choices=("off", "on", "status"), help="off: no memory; on: memory back; status: list the switches"
    )
    reindex = sub.add_parser(
        "reindex", help="re-embed every memory with the configured embedding model", parents=common
    )
    reindex.add_argument(
        "--check", action="store_true", help="re-embed nothing: write the vector engine's missing points, drop orphans"
    )
    sub.add_parser("stats", help="print what the stats tool returns for the principal, as JSON", parents=common)
    maintain = sub.add_parser(
        "maintain",
        help="run one lifecycle pass (decay, compression) now over every principal of the data directory "
        "and print what it did",
        parents=common,
    )
    maintain.add_argument(
        "--as-of",
        metavar="WHEN",
        help="run the pass as if it were then: a duration ahead (+30d, 12h, 90m) or a date (2027-01-31); "
        "it really archives and summarizes, as the scheduler would by then",
    )
    ui = sub.add_parser(
        "ui", help="open the web inspector for the local principal (a one-time link on loopback)", parents=common
    )
    ui.add_argument("--ui-port", type=int, help="loopback port (default ui.port, 0: a free one)")
    ui.add_argument("--no-browser", action="store_true", help="print the link only; do not open a browser")


def _settings(args: argparse.Namespace) -> Settings:
    overrides: dict[str, Any] = {}
    for name in ("data_dir", "principal", "namespace"):
        value = getattr(args, name, None)
        if value is not None:
            overrides[name] = value
    http = {name: getattr(args, name, None) for name in ("host", "port", "stateless")}
    http = {name: value for name, value in http.items() if value is not None}
    if getattr(args, "no_auth", False):
        http["auth"] = "none"
    if http:
        overrides["http"] = http
    if getattr(args, "ui_port", None) is not None:
        overrides["ui"] = {"port": args.ui_port}
    return load_settings(args.config, **overrides)


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if "hook" in words:  # Claude Code reads exit code 2 as "block": a hook exits 0 whatever is wrong
        try:
            return _main(words)
        except SystemExit as exc:
            if exc.code not in (0, None):
                _err("mcp-memory hook: answered nothing: the command line above is wrong (see the message)")
            return 0
    return _main(words)


def _main(argv: Sequence[str]) -> int:
    args = _parser().parse_args(argv)
    if args.command in ("install", "uninstall"):  # the client's files, not this server's settings
        return _install(args)
    return _run(args)


def _run(args: argparse.Namespace) -> int:
    hooked = args.command == "hook"
    try:
        settings = _settings(args)
        light = _light(settings, args)
        if light is not None:
            return light
        from mcp_memory import logs

        logs.configure_logging(settings, getattr(args, "transport", "stdio"))
        if args.command == "serve" and args.transport == "stdio":
            from mcp_memory.mcp.server import serve_stdio

            anyio.run(serve_stdio, settings)
            return 0
        if args.command in ("serve", "ui"):
            from mcp_memory.http import gateway  # the HTTP stack, the inspector and JWT: never for stdio

            if args.command == "serve":
                anyio.run(gateway.serve_network, settings, args.transport)
            else:  # the inspector reads a store: it makes none under a mistyped --data-dir
                _stored(settings, "ui")
                anyio.run(gateway.serve_ui, settings, not args.no_browser)
            return 0
        if args.command == "token":
            from mcp_memory.cli.tokens import run as token_command

            return anyio.run(token_command, settings, args)
        if args.command == "connect":
            from mcp_memory.http.bridge import run_bridge

            return anyio.run(run_bridge, args.url, args.token_env)
        if args.command == "doctor":
            from mcp_memory.cli import doctor

            return anyio.run(doctor.run, settings, args.config, args.settings)
        if args.command == "export":
            return _write_export(anyio.run(_export, settings), args.file)
        if args.command == "import":
            return anyio.run(_import, settings, _read_import(args.file))
        if args.command == "reindex":
            return anyio.run(_reindex, settings, args.check)
        if args.command == "stats":
            return anyio.run(_stats, settings)
        if args.command == "maintain":
            as_of = parse_as_of(args.as_of, time.time()) if args.as_of is not None else None
            return anyio.run(_maintain, settings, as_of)
    except MemoryServerError as exc:
        _err(f"mcp-memory: {exc}")
        return 0 if hooked else 2
    except KeyboardInterrupt:
        return 130
    return 0


def _install(args: argparse.Namespace) -> int:
    try:
        return install.run(args)
    except MemoryServerError as exc:
        _err(f"mcp-memory {args.command}: {exc}")
        return 2


def _light(settings: Settings, args: argparse.Namespace) -> int | None:
    """The commands that start without the server's imports (a hook answers from a cold start)."""
    if args.command == "switch":  # the flags given here, never the environment's principal
        from mcp_memory.cli import switch

        principal, namespace = getattr(args, "principal", None), getattr(args, "namespace", None)
        return anyio.run(switch.run, settings, args.state, principal, namespace)
    if args.command == "hook":
        return _hook(settings, args.event)
    if args.command == "database":
        from mcp_memory.cli import database

        return anyio.run(database.run, settings, args.action, args.vectors)
    if args.command == "migrate":
        from mcp_memory.cli import migrate

        return anyio.run(migrate.run, settings, args.to, args.only)
    if args.command == "import" and args.source != "mcp-memory":
        from mcp_memory import logs
        from mcp_memory.cli import importing

        logs.configure_logging(settings)  # before the runtime's MCP server would set up its own

        return anyio.run(importing.run, settings, args.source, args.file, args.apply)
    return None


def _hook(settings: Settings, event: str) -> int:
    from mcp_memory.cli import hooks
    from mcp_memory.logs import guard

    handler = guard(logging.StreamHandler(sys.stderr))  # Claude Code shows a hook's stderr in its verbose mode
    handler.setFormatter(logging.Formatter("mcp-memory hook: %(levelname)s %(message)s"))
    logging.basicConfig(level=max(logging.WARNING, logging.getLevelName(settings.log_level)), handlers=[handler])
    return hooks.run(settings, event, sys.stdin.buffer.read())


def _out(text: str) -> None:
    sys.stdout.write(text + "\n")


def _err(text: str) -> None:
    sys.stderr.write(text + "\n")


def _stored(settings: Settings, command: str) -> None:
    """Refuse a command that reads a store (stats, export, maintain, ui) on a data directory or
    principal that holds nothing (SQLite): it would otherwise create an empty store under a mistyped
    name and report on that."""
    from mcp_memory.core.errors import InvalidInputError
    from mcp_memory.storage.permissions import CONTROL_FILE, PRINCIPALS
    from mcp_memory.storage.pool import principal_file

    if settings.storage.backend != "sqlite":
        return
    if not settings.data_dir.is_dir():
        raise InvalidInputError(
            "data dir",
            f"{str(settings.data_dir)!r} does not exist: `{command}` has no store to work on; check --data-dir "
            "(`mcp-memory serve` makes a store on its first run)",
        )
    if command == "ui":  # any principal's store, or the tokens of a network server: the inspector signs them in
        if not any((settings.data_dir / name).exists() for name in (PRINCIPALS, CONTROL_FILE)):
            raise InvalidInputError(
                "data dir",
                f"{str(settings.data_dir)!r} holds no store for `ui` to show; check --data-dir "
                "(`mcp-memory serve` makes a store on its first run)",
            )
        return
    if command != "maintain" and not principal_file(settings.data_dir, settings.principal).exists():
        raise InvalidInputError(
            "principal",
            f"{settings.principal!r} has no store in {str(settings.data_dir)!r} for `{command}` to work on; "
            "check --principal (or MCP_MEMORY_PRINCIPAL) and --data-dir (`mcp-memory serve` makes a store on its "
            "first run)",
        )


async def _stats(settings: Settings) -> int:
    from mcp_memory.compose import open_runtime
    from mcp_memory.core.models import Scope
    from mcp_memory.mcp.wire_recall import hit_tokens
    from mcp_memory.mcp.wire_upkeep import stats_result

    _stored(settings, "stats")
    async with open_runtime(settings, hit_cost=hit_tokens) as runtime:
        result = stats_result(await runtime.stats.stats(Scope(settings.principal, settings.namespace)))
    _out(orjson.dumps(result.model_dump(mode="json"), option=orjson.OPT_INDENT_2).decode())
    return 0


async def _export(settings: Settings) -> list[bytes]:
    from mcp_memory.compose import open_runtime
    from mcp_memory.core.models import Scope
    from mcp_memory.mcp.wire_recall import hit_tokens
    from mcp_memory.services.portability import export_lines

    _stored(settings, "export")
    async with open_runtime(settings, hit_cost=hit_tokens) as runtime:
        return [line async for line in export_lines(runtime.store, Scope(settings.principal, settings.namespace))]


def _write_export(lines: list[bytes], file: Path | None) -> int:
    if file is None:
        sys.stdout.buffer.writelines(lines)
        sys.stdout.buffer.flush()
    else:
        try:
            with file.open("wb") as sink:
                sink.writelines(lines)
        except OSError as exc:
            fix = "create the folder first" if isinstance(exc, FileNotFoundError) else "choose a file you can write"
            _err(f"mcp-memory: cannot write {str(file)!r}: {exc.strerror or exc}; {fix}")
            return 2
    _err(f"exported {len(lines)} memories")
    return 0


def _read_import(file: Path) -> list[bytes]:
    from mcp_memory.core.errors import InvalidInputError

    if str(file) == "-":
        return sys.stdin.buffer.read().splitlines()
    if file.is_dir():
        raise InvalidInputError("file", f"{str(file)!r} is a folder; give a file (or --from markdown for a folder)")
    if not file.is_file():
        raise InvalidInputError("file", f"{str(file)!r} does not exist")
    return file.read_bytes().splitlines()


async def _import(settings: Settings, lines: list[bytes]) -> int:
    from mcp_memory.compose import open_runtime
    from mcp_memory.core.models import Scope
    from mcp_memory.mcp.wire_recall import hit_tokens
    from mcp_memory.services.portability import import_lines

    async with open_runtime(settings, hit_cost=hit_tokens) as runtime:
        imported, skipped = await import_lines(
            runtime.store,
            runtime.embedder,
            Scope(settings.principal, settings.namespace),
            lines,
            max_bytes=settings.limits.max_content_bytes,
        )
    _err(f"imported {imported} memories, skipped {skipped} already present")
    return 0


async def _reindex(settings: Settings, check: bool) -> int:
    from mcp_memory.compose import open_runtime
    from mcp_memory.core.models import Scope
    from mcp_memory.mcp.wire_recall import hit_tokens
    from mcp_memory.services.portability import reindex

    async with open_runtime(settings, hit_cost=hit_tokens) as runtime:
        if check:
            found = await runtime.store.vectors.repair(Scope(settings.principal))
            _err(f"vector engine: wrote {found['missing']} missing point(s), removed {found['orphans']} orphan(s)")
            return 0
        count = await reindex(runtime.store, runtime.embedder, Scope(settings.principal, settings.namespace))
    _err(f"re-embedded {count} memories")
    return 0


def parse_as_of(text: str, now: float) -> float:
    """`+30d`, `12h`, `90m` from now, or an ISO date/time (UTC when no zone is given); never the past."""
    from mcp_memory.core.errors import InvalidInputError

    at = moment(text.removeprefix("+"), now, "--as-of", "a duration ahead (+30d, 12h, 90m) nor a date", text)
    if at < now:
        raise InvalidInputError("--as-of", f"{text!r} is in the past; give a later date or a duration ahead (+30d)")
    return at


async def _maintain(settings: Settings, as_of: float | None) -> int:
    from mcp_memory.compose import open_runtime
    from mcp_memory.mcp.wire_recall import hit_tokens

    _stored(settings, "maintain")
    async with open_runtime(settings, hit_cost=hit_tokens) as runtime:
        report = await runtime.scheduler.run_once(as_of=as_of)
    if as_of is not None:
        report["as_of"] = when(as_of)
    _out(orjson.dumps(report).decode())
    return 0

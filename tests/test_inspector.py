"""The MCP Inspector CLI, a client we did not write, drives the server as a user's client would.

Each Inspector call is its own process (node, and for stdio a fresh `mcp-memory serve`), one and a
half to two seconds here, so a test is a scenario: state carries through the data directory, calls
that depend on an earlier one wait for it and the rest run two at a time. Every test runs in both
protocol generations (the Inspector's --protocol-era legacy and modern) and on every transport in
TRANSPORTS.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, ExitStack, contextmanager
from pathlib import Path
from typing import Literal

import orjson
import pytest

from mcp_memory.storage.pool import principal_file
from tests.inspector_cli import (
    ERA_OF_MODE,
    ConfigTarget,
    InspectorCli,
    InspectorError,
    StdioTarget,
    Target,
    UrlTarget,
)
from tests.netserver import NetServer, create_token, running
from tests.readme_configs import REPO, ClientConfig, readme_client_configs

pytestmark = [pytest.mark.slow]

SERVER = Path(sys.executable).parent / "mcp-memory"
PRINCIPAL = "inspector-user"
OUR_TOOLS = {"remember", "recall", "forget", "forget_user", "checkpoint", "resume", "pin", "list_tasks", "stats"}


def server_env(tmp_path: Path) -> dict[str, str]:
    """The server's environment: its own data directory, and an empty config file so that a
    config.toml in the developer's home cannot change the test."""
    config = tmp_path / "empty-config.toml"
    config.touch()
    return {
        "MCP_MEMORY_DATA_DIR": str(tmp_path / "data"),
        "MCP_MEMORY_PRINCIPAL": PRINCIPAL,
        "MCP_MEMORY_CONFIG": str(config),
        "OMP_NUM_THREADS": "1",
    }


@contextmanager
def stdio(tmp_path: Path) -> Iterator[Target]:
    yield StdioTarget([str(SERVER), "serve"], server_env(tmp_path))


@contextmanager
def network_server(tmp_path: Path, transport: str) -> Iterator[tuple[NetServer, str]]:
    """`mcp-memory serve --transport sse|http` on the test's store, and a token for PRINCIPAL."""
    data = tmp_path / "data"
    token = create_token(data, PRINCIPAL)
    with running(data, transport, env={"MCP_MEMORY_CONFIG": server_env(tmp_path)["MCP_MEMORY_CONFIG"]}) as server:
        yield server, token


def _url_target(transport: Literal["sse", "http"]) -> Callable[[Path], AbstractContextManager[Target]]:
    @contextmanager
    def serve(tmp_path: Path) -> Iterator[Target]:
        with network_server(tmp_path, transport) as (server, token):
            yield UrlTarget(server.url, transport, {"Authorization": f"Bearer {token}"})

    return serve


# How each transport is served to the Inspector: stdio it starts itself; SSE and streamable HTTP
# are a server subprocess it reaches with a bearer token.
TRANSPORTS: dict[str, Callable[[Path], AbstractContextManager[Target]]] = {
    "stdio": stdio,
    "sse": _url_target("sse"),
    "http": _url_target("http"),
}


@pytest.fixture(params=sorted(TRANSPORTS))
def inspector(request: pytest.FixtureRequest, tmp_path: Path, mode: str) -> Iterator[InspectorCli]:
    with TRANSPORTS[request.param](tmp_path) as target:
        yield InspectorCli(target, home=tmp_path / "inspector-home", era=ERA_OF_MODE[mode])


def two_at_a_time() -> ThreadPoolExecutor:
    """Calls that do not depend on each other run in parallel: each is a node and a Python process
    starting up, and a 2-core machine runs two of those at once."""
    return ThreadPoolExecutor(max_workers=2)


def test_the_inspector_lists_our_tools_resources_and_prompts(inspector: InspectorCli, mode: str) -> None:
    with two_at_a_time() as pool:
        hello = pool.submit(inspector.initialize)
        tools = pool.submit(inspector.list_tools)
        resources = pool.submit(inspector.list_resources)
        templates = pool.submit(inspector.list_resource_templates)
        prompts = pool.submit(inspector.list_prompts)

    assert hello.result()["serverInfo"]["name"] == "mcp-memory"
    assert hello.result()["protocolVersion"] == ("2025-11-25" if mode == "legacy" else mode)

    by_name = {tool["name"]: tool for tool in tools.result()}
    assert set(by_name) >= OUR_TOOLS
    assert by_name["recall"]["annotations"]["readOnlyHint"] is True
    assert by_name["forget"]["annotations"]["destructiveHint"] is True

    uris = {resource["uri"] for resource in resources.result()}
    assert {"memory://stats", "memory://pinned", "memory://pinned.json", "memory://tasks"} <= uris
    assert "memory://tasks/{task_id}" in {template["uriTemplate"] for template in templates.result()}

    arguments = {prompt["name"]: [arg["name"] for arg in prompt["arguments"]] for prompt in prompts.result()}
    assert arguments == {"resume_task": ["task_id"], "recall_context": ["query"]}


def test_what_the_inspector_remembers_it_recalls_reads_and_gets_back(inspector: InspectorCli) -> None:
    rule = "Always run the Inspector tests before tagging a release"
    fact = "The staging database is restored from backup every Sunday night"
    goal = "Move the staging database to the new cluster"
    memories = [{"content": rule, "pinned": True, "kind": "instruction"}, {"content": fact, "tags": ["ops", "db"]}]
    with two_at_a_time() as pool:
        stored = pool.submit(inspector.call_tool, "remember", {"memories": memories})
        task = pool.submit(inspector.call_tool, "checkpoint", {"goal": goal})
    assert (stored.result()["stored"], stored.result()["rejected"]) == (2, 0)
    task_id = task.result()["checkpoint"]["task_id"]

    with two_at_a_time() as pool:
        recalled = pool.submit(
            inspector.call_tool, "recall", {"query": "when is staging restored?", "k": 1, "detail": "full"}
        )
        pinned = pool.submit(inspector.read_resource, "memory://pinned")
        stats = pool.submit(inspector.read_resource, "memory://stats")
        resume = pool.submit(inspector.get_prompt, "resume_task", {"task_id": task_id})
        context = pool.submit(inspector.get_prompt, "recall_context", {"query": "staging database backups"})

    (hit,) = recalled.result()["hits"]
    assert (hit["text"], set(hit["tags"])) == (fact, {"db", "ops"})
    assert rule in pinned.result()
    assert orjson.loads(stats.result())["memories"]["current"] == 2
    (resume_text,) = resume.result()
    assert goal in resume_text
    assert rule in resume_text
    (context_text,) = context.result()
    assert fact in context_text


def test_a_tool_error_reaches_the_inspector_as_is_error_and_a_bad_prompt_as_an_error(inspector: InspectorCli) -> None:
    missing = "01M8KXZZZZZZZZZZZZZZZZZZZZ"
    with two_at_a_time() as pool:
        forget = pool.submit(inspector.call_tool, "forget", {"ids": [missing], "dry_run": False})
        resume = pool.submit(inspector.get_prompt, "resume_task", {"task_id": "no-such-task"})

    refused = forget.exception()
    assert isinstance(refused, InspectorError)
    assert (refused.returncode, refused.code) == (5, "tool_is_error")
    assert refused.result is not None
    assert refused.result["isError"] is True
    assert missing in refused.result["content"][0]["text"]

    unknown = resume.exception()
    assert isinstance(unknown, InspectorError)
    assert "no-such-task" in unknown.message


RUNNABLE = [config for config in readme_client_configs() if not config.windows]


def _distinct(configs: list[ClientConfig]) -> list[tuple[int, str]]:
    """One run per distinct configuration the inspector is given: several clients' blocks in docs/clients.md
    come to the same command, arguments and environment (each block is still parsed, and its
    client named, by the test). (index of the first, the clients it stands for)."""
    runs: dict[bytes, list[ClientConfig]] = {}
    for config in configs:
        given = orjson.dumps(config.in_clone(REPO).inspector_config(), option=orjson.OPT_SORT_KEYS)
        runs.setdefault(given, []).append(config)
    return [(same[0].index, " = ".join(c.name for c in same)) for same in runs.values()]


DISTINCT = _distinct(RUNNABLE)


@pytest.mark.parametrize("index", [index for index, _ in DISTINCT], ids=[names for _, names in DISTINCT])
def test_every_readme_client_configuration_runs_through_the_inspectors_config(tmp_path: Path, index: int) -> None:
    every = {config.name for config in readme_client_configs()}
    assert {
        f"{client} ({where})" for client in ("Claude Desktop", "Cursor", "Continue") for where in ("stdio", "network")
    } <= every
    clients = ("Claude Code", "VS Code", "Windsurf", "Codex CLI", "Gemini CLI")
    assert {f"{client} (stdio)" for client in clients} <= every
    (config,) = [config.in_clone(REPO) for config in readme_client_configs() if config.index == index]
    name = config.name
    path = tmp_path / "client-config.json"
    with ExitStack() as stack:
        env = server_env(tmp_path)
        if config.remote:  # a real token-protected HTTP server; the page says to put in its URL and a token
            server, token = stack.enter_context(network_server(tmp_path, "http"))
            config = config.for_server(server.url, token)
            env = {"MCP_MEMORY_CONFIG": env["MCP_MEMORY_CONFIG"]}  # the bridge's own store settings: none
        path.write_bytes(orjson.dumps(config.inspector_config()))
        for server_name in config.servers():
            cli = InspectorCli(ConfigTarget(path, server_name, env), home=tmp_path / "inspector-home")
            assert {tool["name"] for tool in cli.list_tools()} >= OUR_TOOLS
            stored = cli.call_tool("remember", {"content": f"Configured through the README for {name}"})
            assert stored["stored"] == 1
    # The configuration reached the test's store: directly (-e) or through the network server's token.
    assert principal_file(tmp_path / "data", PRINCIPAL).exists()

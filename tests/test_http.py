"""The network transports for real: a server subprocess on SSE and on streamable HTTP (stateful and
stateless), the SDK client in both protocol generations, bearer tokens, and the gateway's routes."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import anyio
import orjson
import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError

from examples.deepseek_agent import run_agent
from mcp_memory.storage.tokens import TokenStore
from tests.conftest import Heard, call, hit_texts, row_counts, subscribed
from tests.fake_openai import fake_openai_server
from tests.netserver import SERVER_BIN, NetServer, cli, connect, create_token, get, post, running, server_env

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

TARGETS = {
    "sse": ("sse",),
    "http": ("http",),
    "http-stateless": ("http", "--stateless"),
}


@pytest.fixture(scope="module")
def shared_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("net") / "data"


@pytest.fixture(scope="module")
def alice_token(shared_dir: Path) -> str:
    return create_token(shared_dir, "alice", "--label", "tests")


@pytest.fixture(scope="module", params=list(TARGETS))
def server(request: pytest.FixtureRequest, shared_dir: Path, alice_token: str) -> Iterator[NetServer]:
    transport, *flags = TARGETS[request.param]
    with running(shared_dir, transport, *flags) as srv:
        yield srv


async def test_tools_resources_and_prompts_work_on_every_transport(
    server: NetServer, alice_token: str, mode: str
) -> None:
    text = f"The staging database moved to db-7.internal over {server.url} ({mode})"
    rule = f"Always answer alice in British English when she writes over {server.url} ({mode})"
    async with connect(server, alice_token, mode) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"remember", "recall", "forget", "checkpoint", "resume", "stats"} <= names
        stored = await call(client, "remember", {"memories": [{"content": text}, {"content": rule, "pinned": True}]})
        assert stored["stored"] == 2
        recalled = await call(client, "recall", {"query": "where is the staging database now"})
        assert text in hit_texts(recalled)
        assert rule in [p["text"] for p in recalled["pinned"]]
        pinned = await client.read_resource("memory://pinned")
        assert rule in pinned.contents[0].text  # type: ignore[union-attr]
        prompt = await client.get_prompt("recall_context", {"query": "staging database"})
        assert "db-7.internal" in prompt.messages[0].content.text  # type: ignore[union-attr]
        stats = await call(client, "stats", {})
        assert stats["models_loaded_in_process"] == 1
        assert stats["schedulers_running_in_process"] == 1
        assert "/" not in stats["principal_file"]  # a remote client is not told the server's paths


async def test_a_request_without_a_token_gets_401_with_the_metadata_to_find_out_why(server: NetServer) -> None:
    initialize = orjson.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}
    )
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    answer = post(server, initialize, headers)
    assert answer.status_code == 401
    challenge = answer.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert "error=" not in challenge
    metadata_url = challenge.split('resource_metadata="', 1)[1].split('"', 1)[0]
    assert metadata_url.endswith("/.well-known/oauth-protected-resource" + server.url[len(server.base) :])
    metadata = get(server, metadata_url[len(server.base) :]).json()
    assert metadata["resource"] == server.url
    assert metadata["bearer_methods_supported"] == ["header"]
    assert "authorization_servers" not in metadata  # tokens come from `token create` (ADR 8)

    wrong = post(server, initialize, {**headers, "authorization": "Bearer mcpm_not-a-real-token-at-all"})
    assert wrong.status_code == 401
    assert 'error="invalid_token"' in wrong.headers["www-authenticate"]
    assert "token create" in wrong.json()["error_description"]
    assert "JWT" not in wrong.json()["error_description"]  # this server takes none: no use asking for one


async def test_health_needs_no_token_and_metrics_count_tool_calls(
    server: NetServer, alice_token: str, mode: str
) -> None:
    health = get(server, "/health")
    assert health.status_code == 200
    assert set(health.json()) == {"status", "version", "model_ready"}
    assert health.headers["x-request-id"]

    async with connect(server, alice_token, mode) as client:
        await call(client, "remember", {"content": f"Metrics check for {server.url} in {mode}: backups at 02:00"})
        await call(client, "recall", {"query": "anything at all"})
    text = get(server, "/metrics").text
    line = next(x for x in text.splitlines() if x.startswith('mcp_memory_tool_calls_total{outcome="ok",tool="recall"}'))
    assert float(line.split()[-1]) >= 1
    assert 'mcp_memory_tool_duration_seconds_bucket{tool="recall",le="+Inf"}' in text
    assert "mcp_memory_schedulers_running 1" in text
    indexed = next(x for x in text.splitlines() if x.startswith("mcp_memory_memories_indexed "))
    assert float(indexed.split()[-1]) >= 1
    assert "alice" not in text  # no principal names in metrics


async def test_a_revoked_token_is_refused_on_its_next_request_even_inside_an_open_session(
    tmp_path: Path, mode: str
) -> None:
    data = tmp_path / "data"
    token = create_token(data, "carol")
    token_id = next(line.split("\t")[0] for line in cli(data, "token", "list").stdout.splitlines()[1:])
    with running(data, "http") as srv:
        async with connect(srv, token, mode) as client:
            await call(client, "remember", {"content": "Carol's build runs on runner-42"})
            revoked = cli(data, "token", "revoke", token_id)
            assert revoked.returncode == 0, revoked.stderr
            with pytest.raises(MCPError, match="error response"):  # the 401 as the SDK client reports it
                await client.call_tool("recall", {"query": "which runner"})
        body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        assert post(srv, body, {**headers, "authorization": f"Bearer {token}"}).status_code == 401
        listing = cli(data, "token", "list").stdout
        assert "\trevoked\t" in listing
        assert token not in listing


def test_an_expired_token_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    live = create_token(data, "dave")
    expired_at = "2020-01-01"
    done = cli(data, "token", "create", "--principal", "dave", "--expires", expired_at)
    assert done.returncode == 2
    assert "in the past" in done.stderr
    # A token whose expiry has passed since it was made: written the way `token create` writes one.
    now = time.time()
    expired, _ = anyio.run(TokenStore(data).create, "dave", None, "short-lived", now - 7200, now - 3600)
    with running(data, "http") as srv:
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello})
        assert post(srv, body, {**headers, "authorization": f"Bearer {live}"}).status_code == 200  # control
        refused = post(srv, body, {**headers, "authorization": f"Bearer {expired}"})
        assert refused.status_code == 401
        assert 'error="invalid_token"' in refused.headers["www-authenticate"]
        assert post(srv, body, {**headers, "authorization": f"Bearer {live}x"}).status_code == 401


def test_a_network_transport_without_tokens_refuses_to_start(tmp_path: Path) -> None:
    data = tmp_path / "data"
    done = cli(data, "serve", "--transport", "http", "--port", "0")
    assert done.returncode == 2
    assert "token create" in done.stderr
    assert "--no-auth" in done.stderr


async def test_no_auth_serves_the_one_local_principal(tmp_path: Path, mode: str) -> None:
    data = tmp_path / "data"
    with running(data, "http", "--no-auth") as srv:
        async with connect(srv, None, mode) as client:
            await call(client, "remember", {"content": "The local owner prefers tabs over spaces"})
    assert row_counts(data, "local-owner")["memories"] == 1


def test_tokens_are_stored_as_hashes_only(tmp_path: Path) -> None:
    data = tmp_path / "data"
    token = create_token(data, "erin", "--namespace", "proj-x", "--label", "laptop")
    assert data.stat().st_mode & 0o777 == 0o700  # the data directory is the owner's alone
    raw = b"".join(p.read_bytes() for p in data.glob("control.db*"))
    assert token.encode() not in raw
    assert token[len("mcpm_") :].encode() not in raw
    listing = cli(data, "token", "list").stdout
    assert "erin\tproj-x\tlive" in listing
    assert token not in listing


def _heard(
    server: NetServer, token: str, mode: str, uris: list[str]
) -> AbstractAsyncContextManager[tuple[Client, Heard]]:
    """A network client subscribed to ``uris``; yields the updates it hears of."""
    return subscribed(lambda handler: connect(server, token, mode, message_handler=handler), mode, uris)


async def test_subscriptions_over_the_network_stay_inside_their_principal(tmp_path: Path, mode: str) -> None:
    data = tmp_path / "data"
    tokens = {name: create_token(data, name) for name in ("alice", "bob")}
    uris = ["memory://pinned", "memory://tasks/shared-name"]
    for transport in ("sse", "http"):
        with running(data, transport) as srv:
            async with (
                _heard(srv, tokens["alice"], mode, uris) as (alice, alice_heard),
                _heard(srv, tokens["bob"], mode, uris) as (bob, bob_heard),
            ):
                await call(bob, "checkpoint", {"task_id": "shared-name", "goal": f"bob's task over {transport}"})
                await call(bob, "remember", {"content": f"Bob pins this over {transport}", "pinned": True})
                for uri in uris:
                    await bob_heard.wait_for(uri)
                await call(alice, "remember", {"content": f"Alice pins this over {transport}", "pinned": True})
                await alice_heard.wait_for("memory://pinned")
                await anyio.sleep(0.3)  # time for a stray event to arrive, if one were sent
                assert set(alice_heard.uris) == {"memory://pinned"}  # nothing of bob's task or bob's pin


async def test_the_readme_deepseek_agent_remembers_and_recalls_through_http(tmp_path: Path) -> None:
    """examples/deepseek_agent.py, with a local fake of DeepSeek's API scripted to call two tools."""
    data = tmp_path / "data"
    token = create_token(data, "frank")
    with running(data, "http") as srv, fake_openai_server() as llm:
        llm.chat_script = [
            ("tool_call", ("remember", {"content": "Frank's editor theme is solarized dark", "kind": "preference"})),
            ("text", "Noted."),
            ("tool_call", ("recall", {"query": "which editor theme does Frank use"})),
            ("text", "You use solarized dark."),
        ]

        async def ask(question: str) -> str:
            key = "sk-test-key-123456789012345"
            return await run_agent(question, mcp_url=srv.url, token=token, llm_api_key=key, llm_base_url=llm.base_url)

        first = await ask("Remember that my editor theme is solarized dark")
        second = await ask("Which editor theme do I use?")
    assert (first, second) == ("Noted.", "You use solarized dark.")
    offered = {f["function"]["name"] for f in llm.chat_requests[0]["tools"]}
    assert {"remember", "recall", "checkpoint", "resume"} <= offered
    recall_result = orjson.loads(llm.chat_requests[3]["messages"][-1]["content"])
    assert recall_result["is_error"] is False
    assert "Frank's editor theme is solarized dark" in hit_texts(recall_result["result"])
    assert all(token not in orjson.dumps(request).decode() for request in llm.chat_requests)


async def test_logs_are_json_lines_with_the_request_id_and_never_the_token(
    server: NetServer, alice_token: str, mode: str
) -> None:
    request_id = f"req-{server.transport}-{mode}-{server.url.rsplit(':', 1)[1].split('/')[0]}"
    async with connect(server, alice_token, mode, headers={"X-Request-Id": request_id}) as client:
        await call(client, "remember", {"content": f"Log check {request_id}: the cache lives in /var/cache/app"})
    lines = [orjson.loads(line) for line in server.stderr().splitlines() if line.strip()]  # every line is JSON
    assert any(entry["message"] == f"serving {server.transport} on {server.url}" for entry in lines)
    mine = [entry for entry in lines if entry["request_id"] == request_id]
    assert {"mcp_memory.http", "mcp_memory.services.memory"} <= {entry["logger"] for entry in mine}
    route = "mcp" if server.transport == "http" else "messages"  # the SSE transport POSTs to its message path
    assert any(entry.get("status") in (200, 202) and entry.get("route") == route for entry in mine)
    assert alice_token not in server.stderr()
    assert alice_token[len("mcpm_") :] not in server.stderr()


def test_a_configured_hostname_is_accepted_and_any_other_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    token = create_token(data, "grace")
    initialize = orjson.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
    )
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "authorization": f"Bearer {token}",
    }
    env = {"MCP_MEMORY_HTTP__ALLOWED_HOSTS": '["memory.example.com"]'}
    with running(data, "http", env=env) as srv:
        assert post(srv, initialize, {**headers, "host": "memory.example.com"}).status_code == 200
        assert post(srv, initialize, {**headers, "host": "memory.example.com:8443"}).status_code == 200  # any port
        refused = post(srv, initialize, {**headers, "host": "evil.example.net"})
        assert refused.status_code == 421
        assert "http.allowed_hosts" in refused.json()["error_description"]
        anonymous = {k: v for k, v in headers.items() if k != "authorization"}
        assert post(srv, initialize, {**anonymous, "host": "evil.example.net"}).status_code == 421  # before auth
        origin = {**headers, "host": "memory.example.com", "origin": "https://evil.example.net"}
        foreign = post(srv, initialize, origin)
        assert foreign.status_code == 403
        assert "http.allowed_origins" in foreign.json()["error_description"]


def test_the_bridge_exits_when_its_client_closes_stdin_and_on_ctrl_c(tmp_path: Path) -> None:
    """Desktop clients end a server by closing its stdin: a bridge that lingered would be orphaned."""
    data = tmp_path / "data"
    token = create_token(data, "kim")
    env = {**server_env(data), "MCP_MEMORY_TOKEN": token}
    with running(data, "http") as srv:
        closed = subprocess.run(
            [str(SERVER_BIN), "connect", srv.url], stdin=subprocess.DEVNULL, env=env, capture_output=True, timeout=30
        )
        assert closed.returncode == 0, closed.stderr
        interrupted = subprocess.Popen(
            [str(SERVER_BIN), "connect", srv.url],
            stdin=subprocess.PIPE,  # open: only the signal can end it
            stderr=subprocess.DEVNULL,
            env=env,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        try:
            time.sleep(1.5)
            interrupted.send_signal(signal.SIGINT)
            assert interrupted.wait(10) == 130
        finally:
            assert interrupted.stdin is not None
            interrupted.stdin.close()


def test_revoking_with_the_token_itself_works_and_never_prints_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    token = create_token(data, "lee")
    done = cli(data, "token", "revoke", token)
    assert done.returncode == 0, done.stderr
    assert token not in done.stderr + done.stdout
    assert "\trevoked\t" in cli(data, "token", "list").stdout
    unknown = cli(data, "token", "revoke", "mcpm_" + "x" * 43)
    assert unknown.returncode == 2
    assert "x" * 43 not in unknown.stderr


def test_a_port_in_use_is_one_clear_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    create_token(data, "max")
    with running(data, "http") as srv:
        port = srv.url.rsplit(":", 1)[1].split("/")[0]
        done = cli(data, "serve", "--transport", "http", "--port", port)
    assert done.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_bridge_says_when_the_server_cannot_be_reached(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**server_env(data), "MCP_MEMORY_TOKEN": "mcpm_" + "y" * 43}
    hello = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
    hello += b'"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}\n'
    done = subprocess.run(
        [str(SERVER_BIN), "connect", f"http://127.0.0.1:{port}/mcp"],
        input=hello,
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert b"cannot reach http://127.0.0.1" in done.stderr
    assert b"Traceback" not in done.stderr


def test_the_bridge_answers_what_it_was_sent_before_stdin_closed_and_names_a_wrong_path(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = {**server_env(data), "MCP_MEMORY_TOKEN": create_token(data, "nia")}
    hello = orjson.dumps(
        {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
    )
    with running(data, "http") as srv:
        for url, expect in ((srv.url, "result"), (srv.base + "/wrong", "error")):
            done = subprocess.run(
                [str(SERVER_BIN), "connect", url], input=hello + b"\n", env=env, capture_output=True, timeout=60
            )
            answer = orjson.loads(done.stdout.splitlines()[0])
            assert answer["id"] == 7
            assert expect in answer
    assert "/mcp" in answer["error"]["message"]  # the wrong path's error says where the endpoint is

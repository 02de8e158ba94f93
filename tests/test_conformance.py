"""The official MCP conformance suite (pinned in tests/node) against the streamable HTTP server.

Every server scenario of the pinned suite is either run here and must pass, or listed as not
applicable with the reason; a new suite version with a scenario nobody decided on fails the test
that compares the lists.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import orjson

from tests.netserver import running
from tests.node_tools import MODULES, node

SUITE = MODULES / "@modelcontextprotocol/conformance/dist/index.js"

APPLICABLE = (
    "server-initialize",
    "ping",
    "logging-set-level",
    "completion-complete",
    "tools-list",
    "resources-list",
    "resources-subscribe",
    "resources-unsubscribe",
    "prompts-list",
    "dns-rebinding-protection",
    "server-sse-multiple-streams",
)
_FIXTURE_TOOL = "calls a test tool of the suite's reference server (test_*), which a memory server does not have"
_FIXTURE_RESOURCE = "reads a test:// resource of the suite's reference server"
_FIXTURE_PROMPT = "gets a test prompt of the suite's reference server"
NOT_APPLICABLE = {
    "tools-call-simple-text": _FIXTURE_TOOL,
    "tools-call-image": _FIXTURE_TOOL,
    "tools-call-audio": _FIXTURE_TOOL,
    "tools-call-embedded-resource": _FIXTURE_TOOL,
    "tools-call-mixed-content": _FIXTURE_TOOL,
    "tools-call-with-logging": _FIXTURE_TOOL,
    "tools-call-error": _FIXTURE_TOOL,
    "tools-call-with-progress": _FIXTURE_TOOL,
    "tools-call-sampling": _FIXTURE_TOOL,
    "tools-call-elicitation": _FIXTURE_TOOL,
    "json-schema-2020-12": _FIXTURE_TOOL,
    "elicitation-sep1034-defaults": _FIXTURE_TOOL,
    "elicitation-sep1330-enums": _FIXTURE_TOOL,
    "server-sse-polling": "needs the suite's reconnection test tool, which closes the stream mid-call",
    "resources-read-text": _FIXTURE_RESOURCE,
    "resources-read-binary": _FIXTURE_RESOURCE,
    "resources-templates-read": _FIXTURE_RESOURCE,
    "prompts-get-simple": _FIXTURE_PROMPT,
    "prompts-get-with-args": _FIXTURE_PROMPT,
    "prompts-get-embedded-resource": _FIXTURE_PROMPT,
    "prompts-get-with-image": _FIXTURE_PROMPT,
}


def _suite(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([node(SUITE), str(SUITE), *args], capture_output=True, text=True, timeout=180, check=False)


def test_every_server_scenario_of_the_suite_is_run_or_said_not_to_apply() -> None:
    listed = _suite("list", "--server")
    assert listed.returncode == 0, listed.stderr
    scenarios = set(re.findall(r"^\s+- ([a-z0-9-]+)", listed.stdout, re.MULTILINE))
    assert scenarios == set(APPLICABLE) | set(NOT_APPLICABLE)


def test_the_server_passes_the_conformance_scenarios_that_apply(tmp_path: Path) -> None:
    # The suite cannot send a token: the loopback server without tokens, as a local user runs it.
    with running(tmp_path / "data", "http", env={"MCP_MEMORY_HTTP__AUTH": "none"}) as srv:
        failures: dict[str, list[str]] = {}
        for scenario in APPLICABLE:
            out = tmp_path / scenario
            done = _suite("server", "--url", srv.url, "--scenario", scenario, "--output-dir", str(out))
            (checks_file,) = out.glob("*/checks.json")
            checks = orjson.loads(checks_file.read_bytes())
            assert checks, f"{scenario}: no checks ran\n{done.stdout}\n{done.stderr}"
            failed = [
                f"{c['id']}: {c['status']} {c.get('errorMessage', '')}" for c in checks if c["status"] != "SUCCESS"
            ]
            if failed or done.returncode != 0:
                failures[scenario] = failed or [done.stdout[-2000:]]
    assert failures == {}

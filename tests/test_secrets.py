"""Secrets never reach the disk or the logs: canaries sent through every field and failing calls.

The server runs as a real stdio subprocess at DEBUG, its stderr captured to a file; afterwards
the random part of every canary is searched for in the bytes of every file of the data
directory (.db, -wal, -shm) while the server runs and after it exits, and in its stderr.
"""

from __future__ import annotations

import random
import secrets
import string
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client

from mcp_memory.core.ids import new_id
from mcp_memory.redact import redact
from tests.conftest import call, call_error
from tests.test_stdio import spawn_server

pytestmark = pytest.mark.anyio

_ALNUM = string.ascii_letters + string.digits


def random_part(length: int) -> str:
    return "".join(secrets.choice(_ALNUM) for _ in range(length))


def files_holding(data_dir: Path, needles: dict[str, str]) -> dict[str, list[str]]:
    """For each named needle, the data files whose bytes contain it."""
    found: dict[str, list[str]] = {}
    for path in sorted(p for p in data_dir.rglob("*") if p.is_file()):
        data = path.read_bytes()
        for name, needle in needles.items():
            if needle.encode() in data:
                found.setdefault(name, []).append(path.name)
    return found


def data_files(data_dir: Path) -> set[str]:
    return {p.name.rsplit(".db", 1)[-1] or ".db" for p in data_dir.rglob("*.db*") if p.is_file()}


@pytest.mark.slow
async def test_secrets_never_reach_the_data_files_or_the_logs(tmp_path: Path, mode: str) -> None:
    key, bearer, password = random_part(40), random_part(32), random_part(24)
    aws_secret = _fake(_B64, 38) + "Aa"
    canaries = {"openai-key": key, "bearer-token": bearer, "password": password, "aws-secret-key": aws_secret}
    plain = f"zqplain{secrets.token_hex(6)}"  # not a secret: it must be stored (and never logged)
    openai_key = f"sk-proj-{key}"
    header = f"Authorization: Bearer {bearer}"
    pw = f"password={password}"
    content = (
        f"Deploy notes {plain}: the OpenAI key is {openai_key}; call the API with {header} and log in with {pw}; "
        f"AWS_SECRET_ACCESS_KEY={aws_secret}"
    )

    async with spawn_server(tmp_path, mode, env={"MCP_MEMORY_LOG_LEVEL": "DEBUG"}) as (client, server):
        stored = await call(
            client,
            "remember",
            {
                "content": content,
                "tags": [openai_key, pw, f"bearer {bearer}"],
                "metadata": {
                    "header": header,
                    "login": pw,
                    openai_key: "the key as a metadata key",
                    header: "a header as a metadata key",
                    "nested": {"list": [openai_key, {"deep": pw}]},
                },
                "key": "deploy.notes",
            },
        )
        assert stored["stored"] == 1
        # An identifier the caller reuses is stored as given: a credential in one is refused.
        for field, value in (("key", f"deploy.{openai_key}"), ("task_id", f"task {pw}"), ("session_id", openai_key)):
            refused = await call_error(client, "remember", {"content": f"zqnever {field}", field: value})
            assert field in refused
            assert "credential" in refused
            assert value not in refused
        refused = await call_error(client, "checkpoint", {"task_id": f"task-{openai_key}", "goal": "deploy"})
        assert "task_id" in refused
        assert "credential" in refused
        refused = await call_error(
            client, "checkpoint", {"goal": "deploy", "tree": {"id": f"step {pw}", "title": "step"}}
        )
        assert "tree" in refused
        assert "credential" in refused
        task = await call(
            client,
            "checkpoint",
            {
                "goal": f"Deploy with {openai_key}",
                "variables": {"login": pw, openai_key: header},
                "snapshot": f"next: call the API with {header}, aws secret {aws_secret}",
                "last_tool_calls": [{"name": "deploy", "arguments": {"password": password}}],
            },
        )
        assert task["created_task"]
        merged = await call(client, "remember", {"content": content, "metadata": {"again": header}})
        assert merged["merged"] == 1  # a second occurrence, with its own metadata row
        batch = await call(
            client, "remember", {"memories": [{"content": f"Staging also uses {openai_key} behind {header}"}]}
        )
        assert batch["stored"] == 1

        # Failing calls that carry the canaries: nothing of them may be written or logged.
        too_big = f"{content} " + "padding " * 2100
        assert "limits.max_content_bytes" in await call_error(client, "remember", {"content": too_big})
        assert "limits.max_batch" in await call_error(
            client, "remember", {"memories": [{"content": f"{content} {i}"} for i in range(101)]}
        )
        await call_error(client, "remember", {"content": content, "importance": openai_key})
        await call_error(client, "remember", {"content": content, "kind": pw})
        assert "limits.max_query_chars" in await call_error(
            client, "recall", {"detail": "full", "query": f"{content} " * 20}
        )
        await call_error(client, "forget", {"ids": [openai_key, header], "dry_run": False})
        await call_error(client, "recall", {"detail": "full", "query": content, "filters": {"namespace": pw}})
        # A successful recall whose question holds every canary (and reinforces, so it writes).
        recalled = await call(client, "recall", {"detail": "full", "query": content})
        assert recalled["hits"]
        assert all(secret not in str(recalled["hits"]) for secret in canaries.values())

        while_running = files_holding(server.data_dir, {**canaries, "plain": plain})
        assert {".db", "-wal", "-shm"} <= data_files(server.data_dir)  # the WAL is live and was searched

    after_exit = files_holding(server.data_dir, {**canaries, "plain": plain})
    stderr = server.stderr()

    # Positive controls: the search finds what is really there, in the files; the log was written.
    assert "plain" in while_running
    assert "plain" in after_exit
    assert "remember: 1 stored" in stderr
    assert plain not in stderr  # no log line carries what was stored or asked (logs.LIBRARY_FLOORS)

    assert {name: files for name, files in while_running.items() if name != "plain"} == {}
    assert {name: files for name, files in after_exit.items() if name != "plain"} == {}
    assert [name for name, secret in canaries.items() if secret in stderr] == []


@pytest.mark.parametrize(
    "metadata_key",
    ["password", "api_key", "client_secret", "access_token", "Authorization"],
)
async def test_a_secret_named_by_its_metadata_key_is_redacted(
    client: Client, data_dir: Path, metadata_key: str
) -> None:
    """`{"password": "..."}` is the usual shape of a secret in client JSON; the value alone looks harmless."""
    secret = random_part(28)
    ticket = f"zqticket{secrets.token_hex(6)}"
    await call(
        client,
        "remember",
        {
            "content": "The staging database credentials are in the metadata",
            "metadata": {metadata_key: secret, "ticket": ticket},
        },
    )
    result = await call(client, "recall", {"detail": "full", "query": "staging database credentials"})
    stored: dict[str, Any] = result["hits"][0]["metadata"]
    assert stored["ticket"] == ticket
    assert files_holding(data_dir, {"ticket": ticket}) != {}  # positive control
    assert stored[metadata_key] != secret
    assert files_holding(data_dir, {"secret": secret}) == {}


def test_a_task_id_is_not_mistaken_for_a_key() -> None:
    task_id = f"task-{new_id()}"
    assert redact(f"No task by the id of {task_id!r} was found") == f"No task by the id of {task_id!r} was found"
    assert redact(f"the key is sk-{'a1' * 12} and OPENAI_API_KEY=sk-proj-{'b2' * 12}").count("[REDACTED:") == 2


def _fake(alphabet: str, n: int) -> str:
    """A random string of real shape: a fixed fake could be learnt by the patterns, a random one cannot."""
    return "".join(secrets.choice(alphabet) for _ in range(n))


_B64 = _ALNUM + "+/"
_HEX = "0123456789abcdef"

# (kind, the text around it with {s} for the secret): every kind the redactor must catch, real-shaped.
SECRETS: list[tuple[str, str]] = [
    (
        "aws-secret-key",
        "aws_secret_access_key = {s}",
    ),
    ("aws-secret-key", "AKIA" + _fake(string.ascii_uppercase + string.digits, 16) + " / {s}"),
    ("aws-secret-key", "the AWS secret access key is {s}"),
    ("azure-key", "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={s}==;EndpointSuffix=core.windows.net"),
    ("azure-sas", "https://acme.blob.core.windows.net/c/f.txt?sv=2022-11-02&sr=b&sig={s}"),
    ("azure-client-secret", "client secret: {s}"),
    ("google-api-key", "GOOGLE_MAPS={s}"),
    ("google-oauth", "oauth client secret {s}"),
    ("slack-token", "bot token {s}"),
    ("slack-webhook", "alerts post to https://{s}"),
    ("stripe-key", "billing uses {s}"),
    ("private-key", "{s}"),
    ("url-credentials", "DATABASE_URL=postgresql://app:{s}@db.internal:5432/app"),
    ("url-credentials", "cache at redis://:{s}@cache:6379/0"),
    ("secret", "Server=db;Database=app;User Id=app;Password={s};"),
    ("openai-key", "export OPENAI_API_KEY={s}"),
    ("github-token", "GH_TOKEN {s}"),
    ("jwt", "session {s}"),
]


def _secret_for(kind: str) -> str:
    shapes = {
        "aws-secret-key": lambda: _fake(_B64, 38) + "Aa",
        "azure-key": lambda: _fake(_B64, 86),
        "azure-sas": lambda: _fake(_ALNUM, 43) + "%3D",
        "azure-client-secret": lambda: _fake(_ALNUM, 3) + "8Q~" + _fake(_ALNUM + "_~.-", 34),
        "google-api-key": lambda: "AIza" + _fake(_ALNUM + "_-", 35),
        "google-oauth": lambda: "GOCSPX-" + _fake(_ALNUM + "_-", 28),
        "slack-token": lambda: "xoxb-" + _fake("0123456789", 12) + "-" + _fake(_ALNUM, 24),
        "slack-webhook": lambda: (
            "hooks.slack.com/services/T"
            + _fake(string.ascii_uppercase, 8)
            + "/B"
            + _fake(string.ascii_uppercase, 8)
            + "/"
            + _fake(_ALNUM, 24)
        ),
        "stripe-key": lambda: "sk_live_" + _fake(_ALNUM, 24),
        "private-key": lambda: (
            "-----BEGIN OPENSSH PRIVATE KEY-----\n" + _fake(_B64, 64) + "\n-----END OPENSSH PRIVATE KEY-----"
        ),
        "url-credentials": lambda: _fake(_ALNUM, 16),
        "secret": lambda: _fake(_ALNUM, 16),
        "openai-key": lambda: "sk-proj-" + _fake(_ALNUM, 40),
        "github-token": lambda: "ghp_" + _fake(_ALNUM, 36),
        "jwt": lambda: "eyJ" + _fake(_ALNUM, 20) + ".eyJ" + _fake(_ALNUM, 30) + "." + _fake(_ALNUM, 43),
    }
    return shapes[kind]()


@pytest.mark.parametrize(("kind", "context"), SECRETS)
def test_each_kind_of_secret_is_redacted(kind: str, context: str) -> None:
    secret = _secret_for(kind)
    text = context.format(s=secret)
    cleaned = redact(text)
    assert secret not in cleaned
    assert f"[REDACTED:{kind}]" in cleaned
    assert redact(cleaned) == cleaned  # a second pass leaves the markers alone


# What must survive untouched: things agents store that look random but are no secret.
SURVIVORS = [
    "fixed in commit " + _fake(_HEX, 40),
    "the AWS deploy is at commit " + _fake(_HEX, 40),  # an AWS context does not make a SHA-1 a key
    "artifact sha256:" + _fake(_HEX, 64),
    "memory " + new_id(),
    "task-" + new_id(),
    "request 3f2b8c1e-9a4d-4e0b-8f6a-2c1d7e9b5a40",
    "config at /home/dev/.aws/credentials and C:\\Users\\dev\\secrets\\notes.md",
    "logo ![logo](data:image/png;base64," + _fake(_B64, 120) + "=)",
    "the password policy needs 12 characters",
    "https://example.com/docs?page=2&sort=asc",
]


@pytest.mark.parametrize("text", SURVIVORS)
def test_what_is_no_secret_survives(text: str) -> None:
    assert redact(text) == text


# A secret of no known shape, told only by the credential word near it (redact.py: "its company").
UNSHAPED = "9fK2mQ7xLp0RzT4wVb8NcY1sHd6JgE3uAo5iPq2Z"
IN_COMPANY = [
    "the vault passphrase {s}",
    "Use {s} as the password for the vault",
    "The vault token for staging: {s}",
    "API key for the billing sandbox — {s} (rotate monthly)",
    "credentials for the NAS: admin / {s}",
    "数据库密码 {s}",
    "生产环境的令牌{s}请勿外传",
    "新的密钥，{s}，下周轮换",
]


@pytest.mark.parametrize("context", IN_COMPANY)
def test_a_random_token_near_a_credential_word_is_redacted_in_english_and_chinese(context: str) -> None:
    cleaned = redact(context.format(s=UNSHAPED))
    assert UNSHAPED not in cleaned
    assert cleaned == context.format(s="[REDACTED:secret]")


def test_random_tokens_of_forty_characters_near_a_credential_word_are_redacted_with_few_exceptions() -> None:
    rng = random.Random(20260728)  # seeded: the same 500 tokens every run
    tokens = ["".join(rng.choice(_ALNUM) for _ in range(40)) for _ in range(500)]
    slipped = [t for t in tokens if t in redact(f"the vault passphrase {t}")]
    assert len(slipped) <= 2, slipped  # redact.py: about one in a thousand meets not all four tests


HEX40 = "3f9a2c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39"
# Near a credential word, and no secret: each must be stored as it is.
NOT_SECRETS_NEAR_CREDENTIAL_WORDS = [
    f"key commit {HEX40}",  # a hex hash is a secret only when assigned to a password or secret
    f"reviewed commit {HEX40}; the API key rotation is next",
    "the token bucket of request 3f2b8c1e-9a4d-4e0b-8f6a-2c1d7e9b5a40 refilled",
    "password reset bug: JIRA-1234 and #4521",
    "the vault config lives in /etc/vault.d/ProductionVaultConfig2024.hcl",
    "API key docs: https://docs.example.com/keys/Xq7RtY2mKp9LwZ4vN8bC?tab=Overview",
    "secret rotation shipped in v2.14.3-rc1+build.20240511",
    f"keyboard layout id {UNSHAPED}",  # "keyboard" and "monkey" are no "key"
    f"the monkey patch {UNSHAPED}",
    "the token refresh lives in getUserById2FactorAuth and AWS_S3_Bucket_Name_2024",
    "the key decision is memory " + new_id(),
    "密码策略要求 12 位字符，见 JIRA-1234",
    "密钥轮换在 release-2024-05-11-hotfix-B 中完成",
    f"The API key rotation is on Friday. Build {UNSHAPED} is unrelated",  # another sentence
]


@pytest.mark.parametrize("text", NOT_SECRETS_NEAR_CREDENTIAL_WORDS)
def test_identifiers_near_a_credential_word_survive(text: str) -> None:
    assert redact(text) == text


async def test_a_secret_told_by_its_company_never_reaches_the_data_files(client: Client, data_dir: Path) -> None:
    english, chinese = UNSHAPED, UNSHAPED[::-1]  # fixed: a random one is missed about once in a thousand
    await call(client, "remember", {"content": f"the vault passphrase {english}"})
    await call(client, "remember", {"content": f"生产环境的令牌{chinese}请勿外传"})
    await call(client, "remember", {"content": f"Reviewed the key commit {HEX40} for the release"})
    assert files_holding(data_dir, {"hash": HEX40}) != {}  # positive control: it was stored, raw
    assert files_holding(data_dir, {"english": english, "chinese": chinese}) == {}
    result = await call(client, "recall", {"query": "vault passphrase", "reinforce": False})
    assert "the vault passphrase [REDACTED:secret]" in [h["text"] for h in result["hits"]]


async def test_remember_tells_the_caller_a_credential_was_not_kept(client: Client) -> None:
    key = f"sk-proj-{random_part(40)}"
    told = await call(client, "remember", {"content": f"The staging deploy key is {key}"})
    again = await call(client, "remember", {"content": f"The staging deploy key is {key}"})
    plain = await call(client, "remember", {"content": "The staging deploy runs every Friday"})
    assert "[REDACTED:...]" in told["items"][0]["reason"]
    assert again["items"][0]["outcome"] == "merged"
    assert "[REDACTED:...]" in again["items"][0]["reason"]
    assert plain["items"][0].get("reason") is None


def test_the_qdrant_api_key_is_redacted_once_configured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A key of no known shape, sent to Qdrant: an error that quotes it back reaches no log or
    tool error as it is (ADR 24)."""
    from mcp_memory.compose import qdrant_engine
    from mcp_memory.config import load_settings

    key = "qk" + "".join(random.choices(string.ascii_lowercase, k=30))
    assert redact(f"qdrant said: bad key {key}").endswith(key)  # positive control: no shape finds it
    monkeypatch.setenv("QDRANT_API_KEY", key)
    settings = load_settings(data_dir=tmp_path, vectors={"engine": "qdrant", "qdrant": {"url": "https://127.0.0.1:9"}})
    qdrant_engine(settings)
    assert key not in redact(f"qdrant said: bad key {key}")

"""Bearer JWTs from an external issuer: a local JWKS server, real RSA keys, a real server subprocess."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2
import jwt
import orjson
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from mcp_memory.config import load_settings
from mcp_memory.core.errors import InvalidInputError
from tests.conftest import call, hit_texts
from tests.netserver import connect, create_token, get, post, running

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ISSUER = "https://idp.test"
AUDIENCE = "mcp-memory-tests"


@contextmanager
def jwks_server(public_jwks: dict[str, Any]) -> Iterator[str]:
    body = orjson.dumps(public_jwks)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/jwks.json"
    finally:
        server.shutdown()
        server.server_close()


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _mint(key: rsa.RSAPrivateKey, kid: str, **claims: Any) -> str:
    now = int(time.time())
    payload = {"iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 600, **claims}
    return jwt.encode(payload, key, algorithm="RS256", headers={"kid": kid})


async def test_jwts_from_the_configured_issuer_name_the_principal_and_nothing_else_gets_in(
    tmp_path: Path, mode: str
) -> None:
    signing, stranger = _key(), _key()
    public = orjson.loads(RSAAlgorithm.to_jwk(signing.public_key()))
    data = tmp_path / "data"
    local_token = create_token(data, "ivy")  # the same principal reached by a server-issued token
    with jwks_server({"keys": [{**public, "kid": "k1", "use": "sig", "alg": "RS256"}]}) as jwks_url:
        env = {
            "MCP_MEMORY_HTTP__JWT__JWKS_URL": jwks_url,
            "MCP_MEMORY_HTTP__JWT__ISSUER": ISSUER,
            "MCP_MEMORY_HTTP__JWT__AUDIENCE": AUDIENCE,
            "MCP_MEMORY_HTTP__JWT__NAMESPACE_CLAIM": "project",
        }
        with running(data, "http", env=env) as srv:
            ivy = _mint(signing, "k1", sub="ivy")
            async with connect(srv, ivy, mode) as client:
                await call(client, "remember", {"content": f"Ivy's pager rotation starts on Mondays ({mode})"})
            async with connect(srv, local_token, mode) as client:  # one principal, two kinds of token
                hits = hit_texts(await call(client, "recall", {"query": "when does the pager rotation start"}))
                assert f"Ivy's pager rotation starts on Mondays ({mode})" in hits
            async with connect(srv, _mint(signing, "k1", sub="jack", project="ops"), mode) as client:
                hits = hit_texts(await call(client, "recall", {"query": "when does the pager rotation start"}))
                assert not any("Ivy" in text for text in hits)

            refused = {
                "another audience": _mint(signing, "k1", sub="ivy", aud="someone-else"),
                "another issuer": _mint(signing, "k1", sub="ivy", iss="https://evil.test"),
                "expired": _mint(signing, "k1", sub="ivy", exp=int(time.time()) - 3600),
                "signed by another key": _mint(stranger, "k1", sub="ivy"),
                "unknown key id": _mint(stranger, "k9", sub="ivy"),
                "no principal claim": _mint(signing, "k1"),
                "not a string principal": _mint(signing, "k1", sub="ivy", project=42),
            }
            body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
            headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
            for why, token in refused.items():
                answer = post(srv, body, {**headers, "authorization": f"Bearer {token}"})
                assert answer.status_code == 401, why
                assert f"a JWT from {ISSUER}" in answer.json()["error_description"], why

            metadata = get(srv, "/.well-known/oauth-protected-resource/mcp").json()
            assert metadata["authorization_servers"] == [ISSUER]

            # The web inspector takes the same JWTs at its sign-in, and the same refusals.
            with httpx2.Client(base_url=srv.base) as browser:
                assert browser.post("/ui/login", data={"token": refused["expired"]}).status_code == 401
                signed = browser.post("/ui/login", data={"token": ivy})
                assert signed.status_code == 303
                page = browser.get("/ui/memories")
                assert page.status_code == 200
                assert f"Ivy&#39;s pager rotation starts on Mondays ({mode})" in page.text


def test_jwks_without_an_issuer_and_an_audience_is_refused() -> None:
    """Left out, any token the identity provider signs for another application would open memories here."""
    with pytest.raises(InvalidInputError, match=r"http\.jwt.*issuer and audience are not"):
        load_settings(http={"jwt": {"jwks_url": "https://idp.test/jwks.json"}})
    with pytest.raises(InvalidInputError, match=r"audience is not"):
        load_settings(http={"jwt": {"jwks_url": "https://idp.test/jwks.json", "issuer": ISSUER}})
    assert load_settings(http={"jwt": {"jwks_url": "https://idp.test/jwks.json", "issuer": ISSUER, "audience": "x"}})

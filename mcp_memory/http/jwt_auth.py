"""Bearer JWTs from an external issuer: signature by the issuer's JWKS, `iss`, `aud`, `exp`, `nbf`.

A JWT names its principal in a configured claim (`sub` by default) and, optionally, its
namespace in another. The keys are fetched from `jwks_url` when first needed and cached by
PyJWT's client (a key id it has not seen makes it fetch again, so key rotation works). A JWT
cannot be revoked here: keep its lifetime short at the issuer.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import anyio
import jwt

from mcp_memory.config import JwtSettings
from mcp_memory.core.models import Scope

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JwtIdentity:
    scope: Scope
    subject_id: str  # what binds a session: the issuer and the token's subject
    expires_at: float | None


def looks_like_jwt(token: str) -> bool:
    return token.count(".") == 2 and token.startswith("eyJ")


class JwtVerifier:
    def __init__(self, settings: JwtSettings) -> None:
        if settings.jwks_url is None:
            raise ValueError("JwtVerifier needs http.jwt.jwks_url")
        self.settings = settings
        self._keys = jwt.PyJWKClient(settings.jwks_url, cache_keys=True, lifespan=3_600, timeout=10)

    def _verify(self, token: str) -> JwtIdentity | None:
        cfg = self.settings
        try:
            key = self._keys.get_signing_key_from_jwt(token)
            claims = jwt.decode(
                token,
                key.key,
                algorithms=cfg.algorithms,
                audience=cfg.audience,
                issuer=cfg.issuer,
                leeway=cfg.leeway_seconds,
                options={"require": ["exp"], "verify_aud": cfg.audience is not None},
            )
        except jwt.PyJWKClientError as exc:  # the issuer's keys could not be fetched or matched
            log.warning("JWT refused: signing key unavailable (%s)", exc)
            return None
        except jwt.InvalidTokenError as exc:
            log.info("JWT refused: %s", exc)
            return None
        principal = claims.get(cfg.principal_claim)
        if not isinstance(principal, str) or not principal.strip() or len(principal) > 200:
            log.info("JWT refused: claim %r is not a principal name", cfg.principal_claim)
            return None
        namespace = claims.get(cfg.namespace_claim) if cfg.namespace_claim else None
        if namespace is not None and (not isinstance(namespace, str) or not namespace.strip() or len(namespace) > 200):
            log.info("JWT refused: claim %r is not a namespace name", cfg.namespace_claim)
            return None
        expires = claims.get("exp")
        return JwtIdentity(
            scope=Scope(principal, namespace),
            subject_id=f"jwt:{claims.get('iss', '-')}:{claims.get('sub', principal)}",
            expires_at=float(expires) if isinstance(expires, int | float) else None,
        )

    async def verify(self, token: str) -> JwtIdentity | None:
        """The identity a valid JWT carries, or None; fetching keys runs on a worker thread."""
        return await anyio.to_thread.run_sync(self._verify, token)

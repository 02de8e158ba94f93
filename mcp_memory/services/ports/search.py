"""The search role: the dense and keyword searches of recall, and the vectors they are made of."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from mcp_memory.core.models import Centring, Criteria, DenseHits, Scope

if TYPE_CHECKING:
    from mcp_memory.core.models import Vector


class VectorSearch(Protocol):
    """The dense search over each principal's memory vectors (exact today; ADR 13)."""

    name: str  # where it runs: "in-process", "pgvector" (in PostgreSQL, ADR 25) or "qdrant"

    async def sync(self, scope: Scope, dim: int) -> object:
        """Load the principal's index if needed and catch it up with other processes."""
        ...

    async def ranking(
        self,
        scope: Scope,
        query: Vector,
        criteria: Criteria,
        limit: int,
        now: float,
        centring: Centring | None = None,
    ) -> DenseHits:
        """The closest memories to ``query`` the scope and criteria allow, best first."""
        ...

    async def neighbours(
        self, scope: Scope, queries: Vector, criteria: Criteria, limit: int, now: float
    ) -> list[list[tuple[str, float]]]:
        """Per row of ``queries``, the closest live memories (id, similarity) of the scope (its own namespace only when
        ``criteria.namespace_only``): one search for a whole batch of new memories."""
        ...

    async def scripts(self, scope: Scope, dim: int) -> tuple[bool, bool]:
        """Whether the principal's memories include Latin-script ones, and CJK ones."""
        ...

    def size(self, scope: Scope) -> int | None:
        """Rows in this process's index of the principal; None until it is loaded."""
        ...

    def total(self) -> int:
        """Rows in every index this process holds, all principals (the /metrics gauge); 0 for an
        engine that holds none."""
        ...


class MemorySearch(Protocol):
    """Recall's searches over one principal's memories and the vectors behind them: the vector
    engine, the keyword index, the second model's vectors (ADR 14) and the embedding model the
    vectors were made with."""

    @property
    def vectors(self) -> VectorSearch: ...

    async def keyword_searches(
        self, scope: Scope, asked: Sequence[Sequence[str]], criteria: Criteria, limit: int, now: float
    ) -> list[list[tuple[str, float]]]:
        """For each list of terms (recall's words as written and their stems), the top ``limit``
        (memory id, BM25) the scope and criteria allow, a larger score better; in one round trip
        where the store has round trips (PostgreSQL)."""
        ...

    async def second_vectors(self, scope: Scope, ids: Sequence[str], model_id: str) -> dict[str, Vector]:
        """The second model's vectors of memories ``ids`` (ADR 14); those without one are absent."""
        ...

    async def check_model(self, scope: Scope, model_id: str, dim: int) -> None:
        """Record the embedding model on first use; refuse vectors from another model."""
        ...

    async def stored_model(self, scope: Scope) -> tuple[str | None, int | None]:
        """The embedding model and dimension the principal's vectors were made with (None, None
        before the first memory)."""
        ...

    async def set_model(self, scope: Scope, model_id: str, dim: int) -> None:
        """Record a new embedding model (reindex, once every vector is replaced); the vector engine
        reads the principal's vectors again."""
        ...

    async def replace_vectors(self, scope: Scope, vectors: Sequence[tuple[str, Vector]]) -> None:
        """New vectors of stored memories, by id (reindex); ids not stored are skipped."""
        ...

    async def put_second_vectors(
        self, scope: Scope, model_id: str, vectors: Sequence[tuple[str, Vector]], *, first: bool = False
    ) -> int:
        """Second vectors of stored memories, by id (reindex, the pass); a ``first`` chunk drops every
        earlier one. Returns how many were stored: none when the file's are another model's, and
        ids not stored (forgotten meanwhile) are skipped."""
        ...

    async def all_ids(self, scope: Scope) -> list[tuple[str, str]]:
        """(id, text) of every memory of the principal (all namespaces), as stored, for reindex."""
        ...

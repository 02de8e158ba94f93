"""The vector search: the dense side of recall and of remember's neighbour check, as a component.

Exact today: each principal's vectors sit in one in-memory matrix (storage/vectors.py) that the
principal pool loads on first use (one bulk read) and catches up with other processes' writes
through the change log before every search; a scan over it runs off the event loop when large.
An approximate engine (the scale-out issue's Qdrant) is another class with these methods.
The searches are here (``InProcessSearch``); each backend's engine sits beside its store, which it
reads: ``sqlite.ExactVectorSearch``, ``pg.store.PgIndexSearch``.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import anyio

from mcp_memory.core.models import Centring, Criteria, DenseHits, Scope

if TYPE_CHECKING:
    from mcp_memory.core.models import Vector
    from mcp_memory.storage.records import RecordStore
    from mcp_memory.storage.vectors import VectorIndex


class InProcessSearch:
    """Each principal's vectors in one matrix in this process, searched exactly. A backend says how
    the matrix is loaded and kept up (``_synced``); the searches are the same. Like every engine the
    stores keep, it also hears of their transactions (``began``, ``writing``), of forget_user
    (``erase``) and of a reindex under another model (``model_changed``)."""

    name = "in-process"  # what `stats` and `doctor` report as the vector engine

    def __init__(self, records: RecordStore) -> None:
        self.records = records

    async def began(self, conn: object) -> int:
        return 0  # the index follows the change log after the commit

    async def writing(self, scope: Scope, conn: object, began: int) -> None:
        return None

    def abandoned(self, scope: Scope) -> None:
        """A transaction rolled back: the index never saw it (it follows commits)."""
        return None

    async def erase(self, scope: Scope) -> int:
        """The index loses the rows through the change log, as after any delete."""
        return 0

    async def repair(self, scope: Scope) -> dict[str, int]:
        """Nothing to repair: the index is read from the record store whenever a process opens it."""
        return {"missing": 0, "orphans": 0}

    async def close(self) -> None:
        return None

    async def sync(self, scope: Scope, dim: int) -> VectorIndex:
        return (await self._synced(scope, dim))[1]

    async def _synced(self, scope: Scope, dim: int) -> tuple[anyio.Lock, VectorIndex]:
        """The principal's index, caught up, and the lock it changes under (a scan holds it)."""
        raise NotImplementedError

    async def ranking(
        self,
        scope: Scope,
        query: Vector,
        criteria: Criteria,
        limit: int,
        now: float,
        centring: Centring | None = None,
    ) -> DenseHits:
        import numpy as np

        lock, index = await self._synced(scope, query.shape[0])
        allow = None
        if criteria.narrows:
            allow = np.asarray(await self.records.eligible(scope, criteria, now), dtype=np.int64)
        run = functools.partial(
            index.rank,
            query,
            namespace=scope.namespace,
            limit=limit,
            now=now,
            include_dead=criteria.include_superseded or criteria.include_archived,
            include_expired=criteria.include_expired,
            exact_namespace=criteria.namespace_only,
            allow=allow,
            centring=centring,
        )
        from mcp_memory.storage.vectors import scan  # with numpy, at the first search

        return await scan(run, len(index), lock)

    async def neighbours(
        self, scope: Scope, queries: Vector, criteria: Criteria, limit: int, now: float
    ) -> list[list[tuple[str, float]]]:
        if criteria.narrows or criteria.include_superseded or criteria.include_archived or criteria.include_expired:
            raise ValueError("neighbours searches live rows by namespace only")
        lock, index = await self._synced(scope, queries.shape[1])
        run = functools.partial(
            index.neighbours,
            queries,
            namespace=scope.namespace,
            limit=limit,
            now=now,
            exact_namespace=criteria.namespace_only,
        )
        from mcp_memory.storage.vectors import scan  # with numpy, at the first search

        return await scan(run, len(index) * len(queries), lock)

    async def scripts(self, scope: Scope, dim: int) -> tuple[bool, bool]:
        return (await self.sync(scope, dim)).scripts

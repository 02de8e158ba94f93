"""Recall's dense search in Qdrant, kept up to date by the SQLite record store (ADR 18).

The record store stays the truth. A write transaction that changed memories brings the principal's
points up to its change log before it commits; writers hold the file's write lock, so the points
follow the commits in order, and a point write that fails fails the transaction (nothing is stored).
A reader that finds the points' mark behind the log (a write made while the engine was "exact",
Qdrant restored from an older snapshot, a fresh in-memory Qdrant) replays the log under the same
lock, or copies every row when the log was pruned past the mark. ``reindex --check`` compares
every point with every row and repairs both ways.

The exact engine knows the spread of similarity over every visible memory and each script's mean
(ADR 10); an approximate engine cannot scan everything, so this one estimates both from a random
sample of the points (taken again when the store changes), and ranks a mixed-script store on the
best candidates of each script re-scored exactly (ADR 18 says how close this comes).
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import aiosqlite
import httpx
import numpy as np
import numpy.typing as npt
from qdrant_client import models as qm
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from mcp_memory.errors import StorageError
from mcp_memory.models import Centring, Criteria, DenseHits, Scope, Vector
from mcp_memory.storage.principal import index_columns, index_rows
from mcp_memory.storage.qdrant import Found, QdrantPoints, Where, collection_name, principal_key
from mcp_memory.storage.vectors import IndexRow

if TYPE_CHECKING:
    from mcp_memory.storage.sqlite import SqliteStore

log = logging.getLogger(__name__)

SAMPLE = 256  # points drawn to estimate the spread of similarity and each script's mean
SAMPLE_SECONDS = 30.0  # a sample is drawn again after this long even if nothing changed (expiry moves)
OVERFETCH = 4  # a mixed store's candidates per script, as a multiple of the hits asked for
# Principals whose samples this process keeps (about 200 kB a sample, in half precision), least
# recently used dropped first: a server of many users holds no more than this of them.
SEEN_PRINCIPALS = 128
Sample = npt.NDArray[np.float16]
_FAILURES = (ResponseHandlingException, UnexpectedResponse, httpx.HTTPError, OSError, RuntimeError, ValueError)


@asynccontextmanager
async def _engine(action: str) -> AsyncIterator[None]:
    """Qdrant's failures as the store's, naming what failed and what to check."""
    try:
        yield
    except _FAILURES as exc:
        raise StorageError(
            f"the vector engine (Qdrant) failed to {action}: {type(exc).__name__}: {exc}; "
            "check vectors.qdrant.url and that Qdrant is running (`mcp-memory doctor`)"
        ) from exc


async def _head(conn: aiosqlite.Connection) -> int:
    rows = await conn.execute_fetchall("SELECT COALESCE(MAX(seq), 0) FROM changes")
    return int(next(iter(rows))[0])


async def _empty(conn: aiosqlite.Connection) -> bool:
    """Whether the principal has no vector at all (then it has no points and no mark)."""
    rows = await conn.execute_fetchall("SELECT NOT EXISTS (SELECT 1 FROM vectors)")
    return bool(next(iter(rows))[0])


async def _model(conn: aiosqlite.Connection) -> tuple[str, int] | None:
    rows = await conn.execute_fetchall("SELECT key, value FROM meta WHERE key IN ('embed_model', 'embed_dim')")
    meta = {str(k): str(v) for k, v in rows}
    if "embed_model" not in meta or "embed_dim" not in meta:
        return None
    return meta["embed_model"], int(meta["embed_dim"])


@dataclass(slots=True)
class _Spread:
    """A random sample of the points a search may return, and how many there are."""

    visible: int
    vectors: Sample  # (sample, dim)
    cjk: npt.NDArray[np.bool_]
    taken: float


@dataclass(slots=True)
class _Scripts:
    """How many points each script has, and each script's mean as a sample estimates it."""

    counts: tuple[int, int]  # Latin, CJK
    means: tuple[Vector, Vector]

    def centred_means(self, centring: Centring) -> Vector:
        """Each script's mean shrunk towards the prior, as the exact index takes it (ADR 10)."""
        w = centring.prior_weight
        return np.stack(
            [(self.counts[s] * self.means[s] + w * centring.prior[s]) / (self.counts[s] + w) for s in (0, 1)]
        ).astype(np.float32)


@dataclass(slots=True)
class _Seen:
    """What this process knows of a principal's points as of one ``data_version`` of its file."""

    version: int
    collection: str | None
    spreads: dict[tuple[str | None, bool, bool, bool], _Spread] = field(default_factory=dict)
    scripts: _Scripts | None = None


class QdrantVectorSearch:
    """The VectorSearch protocol over Qdrant, for the SQLite store; ``store.transaction`` calls
    ``began`` and ``writing`` so that every commit carries its points."""

    def __init__(self, store: SqliteStore, points: QdrantPoints) -> None:
        self.store = store
        self.points = points
        self._seen: OrderedDict[str, _Seen] = OrderedDict()

    # ----- following the record store ------------------------------------------------------------

    async def began(self, conn: aiosqlite.Connection) -> int:
        return await _head(conn)

    async def writing(self, scope: Scope, conn: aiosqlite.Connection, began: int) -> None:
        """Inside a write transaction, before its commit: the points of what it changed."""
        if await _head(conn) != began:
            async with _engine("store the changed memories' vectors; nothing was stored"):
                await self._follow(scope, conn)

    async def _follow(self, scope: Scope, conn: aiosqlite.Connection) -> str | None:
        """Bring the principal's points up to the change log as ``conn`` sees it (holding the write lock)."""
        model = await _model(conn)
        if model is None:
            return None
        collection = await self.points.collection(*model)
        key = principal_key(scope.principal)
        head, mark = await _head(conn), await self.points.mark(collection, key)
        if mark == head or (mark == 0 and await _empty(conn)):
            return collection
        rows = await conn.execute_fetchall("SELECT seq, memory_n FROM changes WHERE seq > ? ORDER BY seq", (mark,))
        first = int(next(iter(rows))[0]) if rows else head + 1
        if mark > head or first > mark + 1:  # another file, or a log pruned past the mark: copy every row
            await self._copy_all(conn, collection, key, model[1])
        else:
            touched = sorted({int(r[1]) for r in rows})
            found = await index_rows(conn, touched)
            await self.points.put(collection, key, found)
            await self.points.drop(collection, key, touched, [row.id for row in found])
        if await _empty(conn):  # forgotten to the last memory (forget_user): no mark stays either
            await self.points.clear_mark(collection, key)
        else:
            await self.points.set_mark(collection, key, head)
        self._seen.pop(scope.principal, None)
        return collection

    async def _copy_all(self, conn: aiosqlite.Connection, collection: str, key: str, dim: int) -> tuple[int, int]:
        """Every row's point written, every point without a row removed: (written, removed)."""
        columns = await index_columns(conn, dim)
        rows = [
            IndexRow(int(n), ident, columns.vectors[i], columns.namespaces[i], bool(columns.live[i]), None, False)
            for i, (n, ident) in enumerate(zip(columns.ns.tolist(), columns.ids, strict=True))
        ]
        rows = [
            dataclasses.replace(row, expires_at=None if np.isinf(e) else float(e), cjk=bool(c))
            for row, e, c in zip(rows, columns.expires, columns.cjk, strict=True)
        ]
        await self.points.put(collection, key, rows)
        _, orphans = await self.points.orphans(collection, key, set(columns.ids))
        await self.points.remove(collection, orphans)
        log.info("vector engine: %d points written and %d removed for one principal", len(rows), len(orphans))
        return len(rows), len(orphans)

    async def repair(self, scope: Scope) -> dict[str, int]:
        """``reindex --check``: bring the points up to the log, then write every missing point and
        remove every orphan (the record store decides)."""
        async with self.store.transaction(scope) as conn, _engine("compare the points with the memories"):
            model = await _model(conn)
            if model is None:
                return {"missing": 0, "orphans": 0}
            collection = await self._follow(scope, conn)
            assert collection is not None
            key = principal_key(scope.principal)
            rows = await conn.execute_fetchall("SELECT m.n, m.id FROM memories m JOIN vectors v ON v.memory_n = m.n")
            ids = {str(r[1]): int(r[0]) for r in rows}
            held, orphans = await self.points.orphans(collection, key, set(ids))
            missing = sorted(set(ids) - held)
            await self.points.put(collection, key, await index_rows(conn, [ids[m] for m in missing]))
            await self.points.remove(collection, orphans)
            self._seen.pop(scope.principal, None)
            return {"missing": len(missing), "orphans": len(orphans)}

    async def health(self, scope: Scope) -> tuple[bool, str]:
        """For ``doctor``: Qdrant reachable, the model's collection present with the model's dimension,
        and the principal's points in step with its memories."""
        db = await self.store.principal_db(scope)
        model = await _model(db.reader)
        try:
            async with _engine("answer"):
                names = {c.name for c in (await self.points.client.get_collections()).collections}
                if model is None:
                    return True, f"Qdrant answers ({len(names)} collections); no vectors stored yet"
                name = collection_name(self.points.prefix, *model)
                if name not in names:
                    return False, f"collection {name} is missing: run `mcp-memory reindex --check` to fill it"
                size = (await self.points.client.get_collection(name)).config.params.vectors
                if not isinstance(size, qm.VectorParams) or size.size != model[1]:
                    return False, f"collection {name} does not hold {model[1]}-dimension vectors: remove it"
                key = principal_key(scope.principal)
                every = Where(key, None, any_namespace=True, include_dead=True, include_expired=True)
                points, mark = await self.points.count(name, every), await self.points.mark(name, key)
        except StorageError as exc:
            return False, str(exc)
        rows = await db.reader.execute_fetchall("SELECT COUNT(*) FROM vectors")
        memories, head = int(next(iter(rows))[0]), await _head(db.reader)
        said = f"collection {name}: {points} points for {memories} memories"
        if mark != head:
            return True, f"{said}, {head - mark} changes behind (caught up at the next call)"
        if points != memories:
            return False, f"{said}: run `mcp-memory reindex --check` to repair them"
        return True, f"{said}, in step"

    async def erase(self, scope: Scope) -> int:
        """forget_user: every point and mark of the principal, in every model's collection."""
        async with _engine("erase the principal's vectors"):
            gone = await self.points.erase(principal_key(scope.principal))
        self._seen.pop(scope.principal, None)
        return gone

    async def model_changed(self, scope: Scope) -> None:
        """A reindex under another model: the other models' points go; the new collection fills from the store."""
        model = await _model((await self.store.principal_db(scope)).reader)
        async with _engine("remove the earlier model's vectors"):
            keep = await self.points.collection(*model) if model else None
            await self.points.erase(principal_key(scope.principal), but=keep)
        self._seen.pop(scope.principal, None)

    # ----- the VectorSearch protocol -------------------------------------------------------------

    async def sync(self, scope: Scope, dim: int) -> str | None:
        """The principal's collection, its points brought up to the log if they lag (rare: ADR 18)."""
        db = await self.store.principal_db(scope)
        version = int(next(iter(await db.reader.execute_fetchall("PRAGMA data_version")))[0])
        seen = self._seen.get(scope.principal)
        if seen is not None and seen.version == version:
            self._seen.move_to_end(scope.principal)
            return seen.collection
        model = await _model(db.reader)
        collection = None
        if model is not None:
            async with _engine("read the principal's vectors"):
                collection = await self.points.collection(*model)
                mark = await self.points.mark(collection, principal_key(scope.principal))
                behind = mark != await _head(db.reader) and not (mark == 0 and await _empty(db.reader))
            if behind:
                async with self.store.transaction(scope) as conn, _engine("catch the vectors up with the store"):
                    collection = await self._follow(scope, conn)
        self._seen[scope.principal] = _Seen(version, collection)
        self._seen.move_to_end(scope.principal)
        while len(self._seen) > SEEN_PRINCIPALS:
            self._seen.popitem(last=False)
        return collection

    async def ranking(
        self,
        scope: Scope,
        query: Vector,
        criteria: Criteria,
        limit: int,
        now: float,
        centring: Centring | None = None,
    ) -> DenseHits:
        """The closest memories to ``query`` the scope and criteria allow, best first; the spread of
        similarity and the script means estimated from a sample."""
        collection = await self.sync(scope, query.shape[0])
        if collection is None or limit <= 0:
            return DenseHits([], 0.0, 0.0, 0)
        allow = None
        if criteria.narrows:
            allow = tuple(await self.store.eligible(scope, criteria, now))
        where = Where(
            principal_key(scope.principal),
            scope.namespace,
            exact_namespace=criteria.namespace_only,
            include_dead=criteria.include_superseded or criteria.include_archived,
            include_expired=criteria.include_expired,
            now=now,
            allow=allow,
        )
        async with _engine("search the vectors"):
            spread = await self._spread(scope, collection, where)
            if spread.visible == 0:
                return DenseHits([], 0.0, 0.0, 0)
            scripts = await self._scripts(scope, collection)
            mixed = centring is not None and min(scripts.counts) > 0
            if centring is not None and mixed:
                hits, seen = await self._centred(collection, where, centring, scripts, spread, limit)
            else:
                [found] = await self.points.search(collection, [(query, where)], limit)
                hits, seen = [(f.id, f.score) for f in found], spread.vectors @ query
        mean, std = (float(seen.mean()), float(seen.std())) if len(seen) else (0.0, 0.0)
        return DenseHits(hits, mean, std, spread.visible, population=sum(scripts.counts), centred=mixed)

    async def _centred(
        self, collection: str, where: Where, centring: Centring, scripts: _Scripts, spread: _Spread, limit: int
    ) -> tuple[list[tuple[str, float]], npt.NDArray[np.float32]]:
        """A mixed store: each script's best candidates by the centred question, re-scored exactly as
        cos(p - mu_script, q'), and the sample scored the same way."""
        means = scripts.centred_means(centring)
        offsets = means @ centring.query
        norm2 = np.einsum("ij,ij->i", means, means)

        def score(vectors: npt.NDArray[np.floating[Any]], cjk: npt.NDArray[np.bool_]) -> npt.NDArray[np.float32]:
            s = cjk.astype(np.int64)
            norms = np.sqrt(np.maximum(1.0 - 2.0 * np.einsum("ij,ij->i", vectors, means[s]) + norm2[s], 1e-6))
            out: npt.NDArray[np.float32] = ((vectors @ centring.query - offsets[s]) / norms).astype(np.float32)
            return out

        over = max(limit * OVERFETCH, 64)
        per_script = [(centring.query, dataclasses.replace(where, cjk=c)) for c in (False, True)]
        answers = await self.points.search(collection, per_script, over, vectors=True)
        found = [f for f in itertools.chain(*answers) if f.vector is not None]
        if not found:
            return [], np.zeros(0, dtype=np.float32)
        scores = score(np.stack([f.vector for f in found if f.vector is not None]), np.array([f.cjk for f in found]))
        order = np.argsort(-scores)[:limit]
        return [(found[i].id, float(scores[i])) for i in order], score(spread.vectors, spread.cjk)

    def _fresh(self, scope: Scope) -> _Seen:
        """What ``sync`` kept of the principal (or a throwaway, if many others pushed it out since)."""
        return self._seen.get(scope.principal) or _Seen(-1, None)

    async def _spread(self, scope: Scope, collection: str, where: Where) -> _Spread:
        """How many points ``where`` allows and a random sample of them (kept while nothing changes)."""
        seen = self._fresh(scope)
        key = (where.namespace, where.exact_namespace, where.include_dead, where.include_expired)
        kept = seen.spreads.get(key) if where.allow is None else None
        if kept is not None and time.monotonic() - kept.taken < SAMPLE_SECONDS:
            return kept
        visible = await self.points.count(collection, where)
        drawn = await self.points.sample(collection, where, SAMPLE) if visible else []
        spread = _Spread(visible, *_stack(drawn), time.monotonic())
        if where.allow is None:
            seen.spreads[key] = spread
        return spread

    async def _scripts(self, scope: Scope, collection: str) -> _Scripts:
        seen = self._fresh(scope)
        if seen.scripts is None:
            key = principal_key(scope.principal)
            counts: list[int] = []
            means: list[Vector] = []
            for cjk in (False, True):
                # Every point of the script, whatever its namespace or state: the means are the
                # principal's, as in the exact index.
                every = Where(key, None, any_namespace=True, include_dead=True, include_expired=True, cjk=cjk)
                counts.append(await self.points.count(collection, every))
                vectors, _ = _stack(await self.points.sample(collection, every, SAMPLE))
                means.append(vectors.astype(np.float32).mean(axis=0) if len(vectors) else np.zeros(0, dtype=np.float32))
            seen.scripts = _Scripts((counts[0], counts[1]), (means[0], means[1]))
        return seen.scripts

    async def neighbours(
        self, scope: Scope, queries: Vector, criteria: Criteria, limit: int, now: float
    ) -> list[list[tuple[str, float]]]:
        """Per row of ``queries``, the closest live memories of the scope (its own namespace only
        when ``criteria.namespace_only``)."""
        if criteria.narrows or criteria.include_superseded or criteria.include_archived or criteria.include_expired:
            raise ValueError("neighbours searches live rows by namespace only")
        collection = await self.sync(scope, queries.shape[1])
        if collection is None or limit <= 0 or len(queries) == 0:
            return [[] for _ in range(len(queries))]
        where = Where(principal_key(scope.principal), scope.namespace, exact_namespace=criteria.namespace_only, now=now)
        async with _engine("search the vectors"):
            found = await self.points.search(collection, [(q, where) for q in queries], limit)
        return [[(f.id, f.score) for f in row] for row in found]

    async def scripts(self, scope: Scope, dim: int) -> tuple[bool, bool]:
        """Whether the principal's memories include Latin-script ones, and CJK ones."""
        collection = await self.sync(scope, dim)
        if collection is None:
            return False, False
        async with _engine("count the vectors"):
            counts = (await self._scripts(scope, collection)).counts
        return counts[0] > 0, counts[1] > 0

    async def close(self) -> None:
        await self.points.close()

    def size(self, scope: Scope) -> int | None:
        """No index lives in this process."""
        return None

    def total(self) -> int:
        return 0


def _stack(found: Sequence[Found]) -> tuple[Sample, npt.NDArray[np.bool_]]:
    """A sample's vectors in half precision (enough for a mean and a spread) and their scripts."""
    with_vectors = [f for f in found if f.vector is not None]
    if not with_vectors:
        return np.zeros((0, 0), dtype=np.float16), np.zeros(0, dtype=bool)
    vectors = np.stack([f.vector for f in with_vectors if f.vector is not None]).astype(np.float16)
    return vectors, np.array([f.cjk for f in with_vectors])

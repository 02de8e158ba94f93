"""Recall's dense search in Qdrant, kept up to date by the record store, SQLite or PostgreSQL (ADR 18).

The record store stays the truth. A write transaction that changed memories brings the principal's
points up to its change log before it commits; writers hold the principal's write lock (the file's
on SQLite, an advisory lock on PostgreSQL), so the points follow the commits in order, and a
point write that fails fails the transaction (nothing is stored).
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
import weakref
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

from mcp_memory.core.errors import StorageError
from mcp_memory.core.models import Centring, Criteria, DenseHits, Scope
from mcp_memory.storage import qdrant_follow as follow
from mcp_memory.storage.principal import index_columns, index_rows
from mcp_memory.storage.qdrant import Found, Mark, QdrantPoints, Where, collection_name
from mcp_memory.storage.vectors import IndexRow

if TYPE_CHECKING:
    from mcp_memory.core.models import Vector
    from mcp_memory.storage.records import RecordStore

log = logging.getLogger(__name__)

SAMPLE = 256  # points drawn to estimate the spread of similarity and each script's mean
SAMPLE_SECONDS = 30.0  # what a process knows of a principal's points is read again after this long
IN_FLIGHT_SECONDS = 10.0  # a write seen on its way this long without committing is taken as abandoned
PENDING_MAX = 2_000  # rows a mark names one by one; a bigger write is read again whole if abandoned
OVERFETCH = 4  # a mixed store's candidates per script, as a multiple of the hits asked for
# Principals whose samples this process keeps (about 200 kB a sample, in half precision), least
# recently used dropped first: a server of many users holds no more than this of them.
SEEN_PRINCIPALS = 128
Sample = npt.NDArray[np.float16]
_FAILURES = (ResponseHandlingException, UnexpectedResponse, httpx.HTTPError, OSError, RuntimeError, ValueError)


@dataclass(slots=True)
class _Spread:
    """A random sample of the points a search may return, and how many there are."""

    visible: int
    vectors: Sample  # (sample, dim)
    cjk: npt.NDArray[np.bool_]


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
    """What this process knows of a principal's points, as of one change mark of the store (one
    ``data_version`` of one open file on SQLite), until a deadline (samples age, and a write seen
    on its way must be looked at again)."""

    anchor: weakref.ref[object]
    version: tuple[Any, ...]
    collection: str | None
    key: str
    until: float
    spreads: dict[tuple[str | None, bool, bool, bool], _Spread] = field(default_factory=dict)
    scripts: _Scripts | None = None

    def current(self, anchor: object, version: tuple[Any, ...]) -> bool:
        # A reopened file's connection counts data_version from 1 again: the open file is part of the key.
        return self.anchor() is anchor and self.version == version and time.monotonic() < self.until


class QdrantVectorSearch:
    """The VectorSearch protocol over Qdrant, for either record store; ``store.transaction`` calls
    ``began`` and ``writing`` so that every commit carries its points. The connections it is given
    are aiosqlite's or PostgreSQL's ``PgConn``, which answers the same calls (ADR 20)."""

    name = "qdrant"

    def __init__(self, store: RecordStore, points: QdrantPoints) -> None:
        self.store = store
        self.points = points
        self._seen: OrderedDict[str, _Seen] = OrderedDict()
        self._in_flight: dict[str, tuple[str, float]] = {}  # principal -> (a write's token, first seen)
        self._abandoned: set[str] = set()  # principals whose write rolled back here after its points went

    # ----- following the record store ------------------------------------------------------------

    async def began(self, conn: aiosqlite.Connection) -> int:
        return await follow.head(conn)

    async def writing(self, scope: Scope, conn: aiosqlite.Connection, began: int) -> None:
        """Inside a write transaction, before its commit: the points of what it changed."""
        if await follow.head(conn) != began:
            async with self._engine("store the changed memories' vectors; nothing was stored"):
                await self._follow(scope, conn)

    def abandoned(self, scope: Scope) -> None:
        """The transaction rolled back after ``writing``: its points may stand; the next call reads
        the rows it touched again (its mark names them)."""
        self._seen.pop(scope.principal, None)
        self._abandoned.add(scope.principal)

    async def _follow(self, scope: Scope, conn: aiosqlite.Connection) -> str | None:
        """Bring the principal's points up to the file as ``conn`` sees it, holding its write lock.

        Two marks bracket the points' writes: the first names the rows about to change, the second
        what they reflect once this transaction commits. A file that never committed (a rollback, a
        crash) still says the token before both, so whoever comes next reads those rows again."""
        model = await follow.model(conn)
        if model is None:
            return None
        key = await follow.made_key(conn, scope.principal)
        collection = await self.points.collection(*model)
        mark, token, head = (
            await self.points.mark(collection, key),
            await follow.meta(conn, "vector_token"),
            await follow.head(conn),
        )
        base, dirty = follow.unsettled(mark, token)
        empty = await follow.empty(conn)
        self._in_flight.pop(scope.principal, None)  # under the lock no other write is on its way
        self._abandoned.discard(scope.principal)
        if (base == head and dirty == ()) or (mark is None and empty):
            return collection
        touched = await follow.since(conn, base, head, gapless=self.store.GAPLESS_LOG)
        pending = None if touched is None or dirty is None else tuple(sorted({*touched, *dirty}))
        if pending is not None and len(pending) > PENDING_MAX:
            pending = None
        after = follow.new_token()
        await conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('vector_token', ?)", (after,))
        prev_seq = base if base is not None else 0
        await self.points.set_mark(collection, key, Mark(-1, after, prev_seq, token, pending))
        if pending is None:
            await self._copy_all(conn, collection, key, model[1])
        else:
            rows = await index_rows(conn, pending)
            # A reindex writes another model's vectors before it names the model: they wait for it.
            await self.points.put(collection, key, [row for row in rows if len(row.vector) == model[1]])
            await self.points.drop(collection, key, pending, [row.id for row in rows])
        if empty:  # forgotten to the last memory (forget_user): no mark stays either
            await self.points.clear_mark(collection, key)
        else:
            await self.points.set_mark(collection, key, Mark(head, after, prev_seq, token, pending))
        self._seen.pop(scope.principal, None)
        return collection

    async def _copy_all(self, conn: aiosqlite.Connection, collection: str, key: str, dim: int) -> None:
        """Every row's point written, every point without a row removed."""
        columns = await index_columns(conn, dim)
        rows = [
            IndexRow(
                int(n),
                ident,
                columns.vectors[i],
                columns.namespaces[i],
                bool(columns.live[i]),
                None if np.isinf(columns.expires[i]) else float(columns.expires[i]),
                bool(columns.cjk[i]),
            )
            for i, (n, ident) in enumerate(zip(columns.ns.tolist(), columns.ids, strict=True))
        ]
        await self.points.put(collection, key, rows)
        _, orphans = await self.points.orphans(collection, key, set(columns.ids))
        await self.points.remove(collection, orphans)
        log.info("vector engine: %d points written and %d removed for one principal", len(rows), len(orphans))

    async def repair(self, scope: Scope) -> dict[str, int]:
        """``reindex --check``: every row's point written again (its payload too), every point that
        stands for no memory removed; the counts of what was missing and what was orphaned."""
        async with self.store.transaction(scope) as conn, self._engine("compare the points with the memories"):
            model = await follow.model(conn)
            if model is None:
                return {"missing": 0, "orphans": 0}
            key = await follow.made_key(conn, scope.principal)
            collection = await self.points.collection(*model)
            rows = await conn.execute_fetchall("SELECT m.id FROM memories m JOIN vectors v ON v.memory_n = m.n")
            ids = {str(r[0]) for r in rows}
            held, orphans = await self.points.orphans(collection, key, ids)
            await self._copy_all(conn, collection, key, model[1])  # the whole file: no log to replay first
            if ids:
                token = follow.new_token()
                await conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('vector_token', ?)", (token,))
                await self.points.set_mark(collection, key, Mark(await follow.head(conn), token, 0, None, None))
            else:
                await self.points.clear_mark(collection, key)
            self._seen.pop(scope.principal, None)
            self._in_flight.pop(scope.principal, None)
            self._abandoned.discard(scope.principal)
            return {"missing": len(ids - held), "orphans": len(orphans)}

    async def health(self, scope: Scope) -> tuple[bool, str]:
        """For ``doctor``: Qdrant reachable, the model's collection present with the model's dimension,
        and the principal's points in step with its memories."""
        reader = await self.store.reader(scope)
        model, key = await follow.model(reader), await follow.key(reader, scope.principal)
        rows = await reader.execute_fetchall("SELECT COUNT(*) FROM vectors")
        memories = int(next(iter(rows))[0])
        try:
            async with self._engine("answer"):
                names = {c.name for c in (await self.points.client.get_collections()).collections}
                if model is None:
                    return True, f"Qdrant answers ({len(names)} collections); no vectors stored yet"
                name = collection_name(self.points.prefix, *model)
                if name not in names or key is None:
                    said = f"collection {name} has no points of the principal's {memories} memories"
                    return (
                        memories == 0,
                        f"{said}: they are written at the next call, or by `mcp-memory reindex --check`",
                    )
                size = (await self.points.client.get_collection(name)).config.params.vectors
                if not isinstance(size, qm.VectorParams) or size.size != model[1]:
                    return False, f"collection {name} does not hold {model[1]}-dimension vectors: remove it"
                every = Where(key, None, any_namespace=True, include_dead=True, include_expired=True)
                points, behind = (
                    await self.points.count(name, every),
                    await self._behind(reader, name, key, scope.principal),
                )
        except StorageError as exc:
            return False, str(exc)
        said = f"collection {name}: {points} points for {memories} memories"
        if behind:
            return True, f"{said}, behind the data file (caught up at the next call)"
        if points != memories:
            return False, f"{said}: run `mcp-memory reindex --check` to repair them"
        return True, f"{said}, in step"

    async def erase(self, scope: Scope) -> int:
        """forget_user: every point and mark of the principal, in every model's collection."""
        key = await follow.key(await self.store.reader(scope), scope.principal)
        self._seen.pop(scope.principal, None)
        if key is None:
            return 0
        async with self._engine("erase the principal's vectors"):
            return await self.points.erase(key)

    async def model_changed(self, scope: Scope) -> None:
        """A reindex under another model: the other models' points go; the new collection fills from the store."""
        reader = await self.store.reader(scope)
        model, key = await follow.model(reader), await follow.key(reader, scope.principal)
        self._seen.pop(scope.principal, None)
        if key is None:
            return
        async with self._engine("remove the earlier model's vectors"):
            keep = await self.points.collection(*model) if model else None
            await self.points.erase(key, but=keep)

    @asynccontextmanager
    async def _engine(self, action: str) -> AsyncIterator[None]:
        """Qdrant's failures as the store's, naming what failed and what to check."""
        try:
            yield
        except _FAILURES as exc:
            self.points.forget_collections()  # Qdrant may have come back empty: make them again
            raise StorageError(
                f"the vector engine (Qdrant) failed to {action}: {type(exc).__name__}: {exc}; "
                "check vectors.qdrant.url and that Qdrant is running (`mcp-memory doctor`)"
            ) from exc

    async def _behind(self, reader: Any, collection: str, key: str, principal: str) -> bool:
        """Whether the points lag behind the committed file so that this reader must bring them up
        (under the write lock). A write on its way that changes only its own rows is not waited for
        (unless it was abandoned); one that copies every point, or began behind the file, is."""
        mark, token = await self.points.mark(collection, key), await follow.meta(reader, "vector_token")
        if mark is None:
            return not await follow.empty(reader)
        if token is not None and token == mark.token and mark.seq >= 0:
            self._in_flight.pop(principal, None)
            return mark.seq != await follow.head(reader)
        if token is not None and token == mark.prev_token:  # a write has not committed
            if mark.pending is None or mark.prev_seq != await follow.head(reader):
                # it is copying every point, or the points lagged behind the committed file before it
                # began: what this reader may see is missing there, so wait for the write lock
                return True
            # it changes only its own rows: the rest stand as committed, so do not wait (a while)
            first = self._in_flight.setdefault(principal, (mark.token, time.monotonic()))
            if first[0] != mark.token:
                self._in_flight[principal] = first = (mark.token, time.monotonic())
            return principal in self._abandoned or time.monotonic() - first[1] > IN_FLIGHT_SECONDS
        return True  # points of another state of the file (a restored backup): read it all again

    # ----- the VectorSearch protocol -------------------------------------------------------------

    async def sync(self, scope: Scope, dim: int) -> str | None:
        """The principal's collection, its points brought up to the file if they lag (ADR 18)."""
        return (await self._synced(scope)).collection

    async def _synced(self, scope: Scope) -> _Seen:
        anchor, version = await self.store.commit_mark(scope)
        reader = await self.store.reader(scope)
        seen = self._seen.get(scope.principal)
        if seen is not None and seen.current(anchor, version):
            self._seen.move_to_end(scope.principal)
            return seen
        model = await follow.model(reader)
        collection = key = None
        settled = True
        if model is not None:
            key = await follow.key(reader, scope.principal)
            async with self._engine("read the principal's vectors"):
                collection = await self.points.collection(*model)
                behind = key is None and not await follow.empty(reader)
                if key is not None:
                    behind = await self._behind(reader, collection, key, scope.principal)
                    settled = scope.principal not in self._in_flight
            if behind:
                async with self.store.transaction(scope) as conn, self._engine("catch the vectors up with the store"):
                    collection = await self._follow(scope, conn)
                    key = await follow.key(conn, scope.principal)
                settled = True
        until = time.monotonic() + (SAMPLE_SECONDS if settled else 1.0)
        seen = self._seen[scope.principal] = _Seen(weakref.ref(anchor), version, collection, key or "", until)
        self._seen.move_to_end(scope.principal)
        while len(self._seen) > SEEN_PRINCIPALS:
            self._seen.popitem(last=False)
        return seen

    async def ranking(
        self,
        scope: Scope,
        query: Vector,
        criteria: Criteria,
        limit: int,
        now: float,
        centring: Centring | None = None,
    ) -> DenseHits:
        """The spread of similarity and the script means are estimated from a sample."""
        seen = await self._synced(scope)
        collection = seen.collection
        if collection is None or limit <= 0:
            return DenseHits([], 0.0, 0.0, 0)
        allow = None
        if criteria.narrows:
            allow = tuple(await self.store.eligible(scope, criteria, now))
        where = Where(
            seen.key,
            scope.namespace,
            exact_namespace=criteria.namespace_only,
            include_dead=criteria.include_superseded or criteria.include_archived,
            include_expired=criteria.include_expired,
            now=now,
            allow=allow,
        )
        async with self._engine("search the vectors"):
            spread = await self._spread(seen, where)
            if spread.visible == 0:
                return DenseHits([], 0.0, 0.0, 0)
            scripts = await self._scripts(seen)
            mixed = centring is not None and min(scripts.counts) > 0
            if centring is not None and mixed:
                hits, sampled = await self._centred(collection, where, centring, scripts, spread, limit)
            else:
                [found] = await self.points.search(collection, [(query, where)], limit)
                hits, sampled = [(f.id, f.score) for f in found], spread.vectors @ query
        mean, std = (float(sampled.mean()), float(sampled.std())) if len(sampled) else (0.0, 0.0)
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

        # A script of no more than SAMPLE points gives them all (then the hits are the exact index's);
        # a bigger one its best by the raw product, which the centring reorders only near the top.
        over = [n if n <= SAMPLE else max(limit * OVERFETCH, 64) for n in scripts.counts]
        answers = [
            (
                await self.points.search(
                    collection, [(centring.query, dataclasses.replace(where, cjk=c))], n, vectors=True
                )
            )[0]
            for c, n in zip((False, True), over, strict=True)
        ]
        found = [f for f in itertools.chain(*answers) if f.vector is not None]
        if not found:
            return [], np.zeros(0, dtype=np.float32)
        scores = score(np.stack([f.vector for f in found if f.vector is not None]), np.array([f.cjk for f in found]))
        order = np.argsort(-scores)[:limit]
        return [(found[i].id, float(scores[i])) for i in order], score(spread.vectors, spread.cjk)

    async def _spread(self, seen: _Seen, where: Where) -> _Spread:
        """How many points ``where`` allows and a random sample of them (kept while nothing changes)."""
        collection = seen.collection
        assert collection is not None
        key = (where.namespace, where.exact_namespace, where.include_dead, where.include_expired)
        kept = seen.spreads.get(key) if where.allow is None else None
        if kept is not None:
            return kept
        visible = await self.points.count(collection, where)
        drawn = await self.points.sample(collection, where, SAMPLE) if visible else []
        spread = _Spread(visible, *_stack(drawn))
        if where.allow is None:
            seen.spreads[key] = spread
        return spread

    async def _scripts(self, seen: _Seen) -> _Scripts:
        collection = seen.collection
        assert collection is not None
        if seen.scripts is None:
            key = seen.key
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
        if criteria.narrows or criteria.include_superseded or criteria.include_archived or criteria.include_expired:
            raise ValueError("neighbours searches live rows by namespace only")
        seen = await self._synced(scope)
        collection = seen.collection
        if collection is None or limit <= 0 or len(queries) == 0:
            return [[] for _ in range(len(queries))]
        where = Where(seen.key, scope.namespace, exact_namespace=criteria.namespace_only, now=now)
        async with self._engine("search the vectors"):
            found = await self.points.search(collection, [(q, where) for q in queries], limit)
        return [[(f.id, f.score) for f in row] for row in found]

    async def scripts(self, scope: Scope, dim: int) -> tuple[bool, bool]:
        seen = await self._synced(scope)
        if seen.collection is None:
            return False, False
        async with self._engine("count the vectors"):
            counts = (await self._scripts(seen)).counts
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

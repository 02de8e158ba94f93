"""Memory vectors as Qdrant points: the collections, the payload and the searches (ADR 18).

One collection per embedding model (never two models in one), a point per memory keyed by a UUID
made from the memory's id. The payload holds what a search filters on and nothing else: a principal
key (a digest, not the principal's name), the namespace ("" for principal-wide memories), the live
flag, the expiry, the script and the memory's row in its store; never the text.

The change-log position a principal's points reflect (its mark) lives in Qdrant too, in a
collection without vectors: it is lost or kept with the points themselves, so a process can tell
when the points lag behind the record store (storage/qdrant_search.py brings them up to date).
This module knows nothing of the record store, so any backend can keep its vectors here.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import TypeAdapter
from qdrant_client import AsyncQdrantClient
from qdrant_client import models as qm
from qdrant_client.http.exceptions import UnexpectedResponse

from mcp_memory.core.errors import StorageError
from mcp_memory.storage.vectors import IndexRow

if TYPE_CHECKING:
    from mcp_memory.core.models import Vector

NEVER = 1e18  # the expiry of a memory that never expires: a payload holds no infinity
PUT_BATCH = 256  # points in one upsert
_ID_SPACE = uuid.UUID("6f0d4c1e-3b7a-5e52-9a41-6d2f8c0e7b13")
_INDEXES: dict[str, Any] = {
    "ns": qm.PayloadSchemaType.KEYWORD,
    "live": qm.PayloadSchemaType.BOOL,
    "exp": qm.PayloadSchemaType.FLOAT,
    "n": qm.PayloadSchemaType.INTEGER,
    "cjk": qm.PayloadSchemaType.BOOL,
}
_QUANTIZATION: TypeAdapter[qm.QuantizationConfig] = TypeAdapter(qm.QuantizationConfig)


def principal_key(store_id: str, principal: str) -> str:
    """What a point says of its principal: a digest of the principal with its data file's random id,
    so the name cannot be guessed from it and two deployments sharing a Qdrant never share points."""
    return hashlib.sha256(f"mcp-memory principal\0{store_id}\0{principal}".encode()).hexdigest()[:32]


def point_id(key: str, memory_id: str) -> str:
    """A memory's point: its id within its principal (an import may give two principals one id)."""
    return str(uuid.uuid5(_ID_SPACE, f"{key}\0{memory_id}"))


def collection_name(prefix: str, model_id: str, dim: int) -> str:
    """A readable name that no other model shares (the digest tells apart ids the slug merges)."""
    slug = re.sub(r"[^A-Za-z0-9_-]+", "_", model_id).strip("_")[:60]
    return f"{prefix}{slug}_{hashlib.sha256(model_id.encode()).hexdigest()[:8]}_{dim}"


def ours(prefix: str, name: str) -> bool:
    """Whether a collection is one of this engine's (its marks, or a model's), not merely a name
    that starts with the prefix."""
    rest = name[len(prefix) :] if name.startswith(prefix) else None
    return rest is not None and (
        rest == "marks" or re.fullmatch(r"[A-Za-z0-9_-]*_[0-9a-f]{8}_[0-9]+", rest) is not None
    )


@dataclass(frozen=True, slots=True)
class Mark:
    """What a principal's points in one collection reflect of its data file.

    After a commit: the change log up to ``seq`` of the file whose vector token is ``token``. While a
    write is on its way (or if it never committed), ``token`` is the one it will commit, and the
    file still says ``prev_token``: then the points reflect ``prev_seq`` except for the rows
    ``pending`` (None: any row), which must be read again from the file."""

    seq: int
    token: str
    prev_seq: int
    prev_token: str | None
    pending: tuple[int, ...] | None

    def payload(self, key: str) -> dict[str, Any]:
        pending = None if self.pending is None else list(self.pending)
        return {
            "p": key,
            "seq": self.seq,
            "token": self.token,
            "prev_seq": self.prev_seq,
            "prev_token": self.prev_token,
            "pending": pending,
            "all": self.pending is None,
        }

    @classmethod
    def of(cls, payload: dict[str, Any]) -> Mark:
        pending = None if payload.get("all", True) else tuple(int(n) for n in payload.get("pending") or ())
        return cls(
            int(payload["seq"]), str(payload["token"]), int(payload["prev_seq"]), payload.get("prev_token"), pending
        )


@dataclass(frozen=True, slots=True)
class Where:
    """Which points a search may return: one principal's, visible from a namespace."""

    key: str
    namespace: str | None
    exact_namespace: bool = False
    any_namespace: bool = False
    include_dead: bool = False
    include_expired: bool = False
    now: float = 0.0
    allow: tuple[int, ...] | None = None  # rows of the record store, when a filter narrows the search
    cjk: bool | None = None

    def filter(self) -> qm.Filter:
        must: list[qm.Condition] = [_match("p", self.key)]
        own = "" if self.namespace is None else self.namespace
        if self.exact_namespace or (self.namespace is None and not self.any_namespace):
            must.append(_match("ns", own))
        elif not self.any_namespace:  # its own namespace and the principal-wide memories
            must.append(qm.FieldCondition(key="ns", match=qm.MatchAny(any=["", own])))
        if not self.include_dead:
            must.append(_match("live", True))
        if not self.include_expired:
            must.append(qm.FieldCondition(key="exp", range=qm.Range(gt=self.now)))
        if self.allow is not None:
            must.append(qm.FieldCondition(key="n", match=qm.MatchAny(any=list(self.allow))))
        if self.cjk is not None:
            must.append(_match("cjk", self.cjk))
        return qm.Filter(must=must)


def _match(key: str, value: str | bool) -> qm.FieldCondition:
    return qm.FieldCondition(key=key, match=qm.MatchValue(value=value))


@dataclass(frozen=True, slots=True)
class Found:
    id: str
    score: float
    vector: Vector | None
    cjk: bool


class QdrantPoints:
    """The points of every principal, in one collection per embedding model."""

    def __init__(
        self,
        client: AsyncQdrantClient,
        prefix: str,
        hnsw: dict[str, Any],
        quantization: dict[str, Any] | None,
        *,
        local: bool,
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.hnsw = hnsw
        self.quantization = quantization
        self.local = local  # qdrant-client's local mode: no payload indexes, no HNSW (a brute-force scan)
        self.marks = f"{prefix}marks"
        self._ready: set[str] = set()

    async def collection(self, model_id: str, dim: int) -> str:
        """The model's collection, created with its payload indexes on first use."""
        name = collection_name(self.prefix, model_id, dim)
        if name in self._ready:
            return name
        if not await self.client.collection_exists(self.marks):
            await self._create(self.marks, {})
        if not await self.client.collection_exists(name):
            params = qm.VectorParams(size=dim, distance=qm.Distance.DOT)
            await self._create(name, params)
            if not self.local:  # local mode ignores them (and warns)
                tenant = qm.KeywordIndexParams(type=qm.KeywordIndexType.KEYWORD, is_tenant=True)
                await self.client.create_payload_index(name, "p", field_schema=tenant)
                for field, schema in _INDEXES.items():
                    await self.client.create_payload_index(name, field, field_schema=schema)
        self._ready.add(name)
        return name

    async def _create(self, name: str, vectors: qm.VectorParams | dict[str, Any]) -> None:
        quantization = _QUANTIZATION.validate_python(self.quantization) if self.quantization else None
        try:
            await self.client.create_collection(
                name,
                vectors_config=vectors,
                hnsw_config=qm.HnswConfigDiff(**self.hnsw) if vectors else None,
                quantization_config=quantization if vectors else None,
            )
        except (UnexpectedResponse, ValueError) as exc:  # another replica created it first
            if not await self.client.collection_exists(name):
                raise exc from None

    async def close(self) -> None:
        await self.client.close()

    def _mark_id(self, collection: str, key: str) -> str:
        return point_id(key, f"mark\0{collection}")

    async def mark(self, collection: str, key: str) -> Mark | None:
        """What the principal's points in ``collection`` reflect (None: nothing; no points)."""
        found = await self.client.retrieve(self.marks, ids=[self._mark_id(collection, key)], with_payload=True)
        return Mark.of(found[0].payload) if found and found[0].payload else None

    async def set_mark(self, collection: str, key: str, mark: Mark) -> None:
        point = qm.PointStruct(id=self._mark_id(collection, key), vector={}, payload=mark.payload(key))
        await self.client.upsert(self.marks, [point], wait=True)

    def forget_collections(self) -> None:
        """After a failure: check that the collections exist again (Qdrant may have come back empty)."""
        self._ready.clear()

    async def clear_mark(self, collection: str, key: str) -> None:
        """A principal without memories keeps no mark: nothing in Qdrant says it was there."""
        selector = qm.PointIdsList(points=[self._mark_id(collection, key)])
        await self.client.delete(self.marks, points_selector=selector, wait=True)

    async def put(self, collection: str, key: str, rows: Sequence[IndexRow]) -> None:
        """Write the rows' points (idempotent: the same row writes the same point)."""
        for start in range(0, len(rows), PUT_BATCH):
            points = [
                qm.PointStruct(
                    id=point_id(key, row.id),
                    vector=row.vector.tolist(),
                    payload={
                        "p": key,
                        "id": row.id,
                        "n": row.n,
                        "ns": row.namespace or "",
                        "live": row.live,
                        "exp": NEVER if row.expires_at is None else float(row.expires_at),
                        "cjk": row.cjk,
                    },
                )
                for row in rows[start : start + PUT_BATCH]
            ]
            await self.client.upsert(collection, points, wait=True)

    async def drop(self, collection: str, key: str, ns: Sequence[int], keep: Sequence[str]) -> None:
        """Remove the points of rows ``ns`` but those of memories ``keep`` (a row number can be
        taken again by a newer memory)."""
        if not ns:
            return
        rows = qm.FieldCondition(key="n", match=qm.MatchAny(any=list(ns)))
        kept = [qm.HasIdCondition(has_id=[point_id(key, m) for m in keep])] if keep else None
        selector = qm.FilterSelector(filter=qm.Filter(must=[_match("p", key), rows], must_not=kept))
        await self.client.delete(collection, points_selector=selector, wait=True)

    async def held(self, collection: str, key: str) -> list[tuple[str, str]]:
        """(point id, memory id) of every point the principal has in ``collection``."""
        out: list[tuple[str, str]] = []
        offset: Any = None
        while True:
            points, offset = await self.client.scroll(
                collection,
                scroll_filter=qm.Filter(must=[_match("p", key)]),
                limit=1_000,
                offset=offset,
                with_payload=["id"],
                with_vectors=False,
            )
            out.extend((str(p.id), str((p.payload or {}).get("id", ""))) for p in points)
            if offset is None:
                return out

    async def orphans(self, collection: str, key: str, ids: set[str]) -> tuple[set[str], list[str]]:
        """Which of memories ``ids`` have their point, and the points that stand for no memory of
        ``ids`` (or under another point id than theirs)."""
        found: set[str] = set()
        stray: list[str] = []
        for pid, memory_id in await self.held(collection, key):
            if memory_id in ids and pid == point_id(key, memory_id):
                found.add(memory_id)
            else:
                stray.append(pid)
        return found, stray

    async def remove(self, collection: str, pids: Sequence[str]) -> None:
        """Remove points by their own ids."""
        for start in range(0, len(pids), 1_000):
            chunk: list[qm.ExtendedPointId] = list(pids[start : start + 1_000])
            await self.client.delete(collection, points_selector=qm.PointIdsList(points=chunk), wait=True)

    async def erase(self, key: str, *, but: str | None = None) -> int:
        """Remove every point and mark of the principal in every collection (but ``but``); how many points."""
        gone = 0
        for found in (await self.client.get_collections()).collections:
            name = found.name
            if not ours(self.prefix, name) or name == but:
                continue
            where = qm.Filter(must=[_match("p", key)])
            if name != self.marks:
                gone += (await self.client.count(name, count_filter=where, exact=True)).count
            await self.client.delete(name, points_selector=qm.FilterSelector(filter=where), wait=True)
        return gone

    async def count(self, collection: str, where: Where) -> int:
        return (await self.client.count(collection, count_filter=where.filter(), exact=True)).count

    async def search(
        self, collection: str, queries: Sequence[tuple[Vector, Where]], limit: int, *, vectors: bool = False
    ) -> list[list[Found]]:
        """Per (query, where), the ``limit`` points of highest dot product, best first."""
        requests = [
            qm.QueryRequest(
                query=query.tolist(),
                filter=where.filter(),
                limit=limit,
                with_payload=["id", "cjk"],
                with_vector=vectors,
            )
            for query, where in queries
        ]
        answers = await self.client.query_batch_points(collection, requests=requests)
        return [[_found(p) for p in answer.points] for answer in answers]

    async def sample(self, collection: str, where: Where, size: int) -> list[Found]:
        """Up to ``size`` points drawn at random among those ``where`` allows, with their vectors."""
        answer = await self.client.query_points(
            collection,
            query=qm.SampleQuery(sample=qm.Sample.RANDOM),
            query_filter=where.filter(),
            limit=size,
            with_payload=["id", "cjk"],
            with_vectors=True,
        )
        return [_found(p) for p in answer.points]


def _found(point: qm.ScoredPoint) -> Found:
    payload = point.payload or {}
    vector = np.asarray(point.vector, dtype=np.float32) if isinstance(point.vector, list) else None
    return Found(str(payload.get("id", "")), float(point.score), vector, bool(payload.get("cjk", False)))


def open_points(
    *,
    url: str | None,
    path: str | None,
    api_key: str | None,
    timeout: float,
    prefix: str,
    hnsw: dict[str, Any],
    quantization: dict[str, Any] | None,
) -> QdrantPoints:
    """A client on a Qdrant server (``url``) or in local mode (``path``: a folder, or ":memory:")."""
    if path is None:
        client = AsyncQdrantClient(url=url, api_key=api_key, timeout=max(1, round(timeout)), check_compatibility=False)
    elif path == ":memory:":
        client = AsyncQdrantClient(location=":memory:")
    else:
        try:
            client = AsyncQdrantClient(path=path)
        except RuntimeError as exc:  # the folder's lock: local mode serves one process
            raise StorageError(
                f"vectors.qdrant.path {path!r} is in use by another process ({exc}); local mode serves one "
                "process: stop the other one, or run a Qdrant server and set vectors.qdrant.url"
            ) from None
    return QdrantPoints(client, prefix, hnsw, quantization, local=path is not None)

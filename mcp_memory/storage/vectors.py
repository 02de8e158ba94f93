"""An exact in-process vector index for one principal, rebuilt from SQLite.

Rows carry what the default recall filter needs (namespace code, live flag, expiry), so the
common query is one matrix-vector product and a mask; rarer filters pass an allow-list.

Rows also carry their script (Latin or CJK), and the index keeps a running sum of each script's
vectors: in a store that mixes the two, recall centres every vector on its script's mean, because
a multilingual encoder places every text near the others of its language (ADR 10).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.to_thread
import numpy as np
import numpy.typing as npt

from mcp_memory.core.models import Centring, DenseHits

if TYPE_CHECKING:
    from mcp_memory.core.models import Vector

T = TypeVar("T")

# Rows a vector scan may cover on the event loop; a larger one runs on a worker thread so that it
# does not stall the other clients.
SCAN_ON_LOOP = 20_000
# The script means a centred search uses are taken again once more than this share of a script's
# rows (with the prior's weight) has changed since they were taken: a mean over N rows moves by
# about k/N when k of them change, so each mean stays within well under 1% of itself, and the two
# products over every row they cost are paid once per so many writes, not by every search (ADR 10).
MEANS_DRIFT = 1 / 256
ID_BYTES = 80  # a memory id held as a Python string, with its place in the list
# A product over this many rows or more is split in two, the second half on a helper thread: the
# product is bound by memory bandwidth, which one core does not use up (100k x 384: 10 ms on one
# thread, 5.4 ms on two, on the 2-core reference machine).
SPLIT_ROWS = 40_000
_HELPER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcp-memory-scan")


def product(matrix: Vector, vector: Vector) -> npt.NDArray[np.float32]:
    """``matrix @ vector``, in two halves at once when the matrix is large (numpy lets go of the GIL)."""
    rows = len(matrix)
    if rows < SPLIT_ROWS:
        out: npt.NDArray[np.float32] = matrix @ vector
        return out
    out = np.empty(rows, dtype=np.result_type(matrix, vector))
    half = rows // 2
    later = _HELPER.submit(np.matmul, matrix[half:], vector, out=out[half:])
    np.matmul(matrix[:half], vector, out=out[:half])
    later.result()
    return out


async def scan(run: Callable[[], T], rows: int, changes: anyio.Lock) -> T:
    """``run`` (a scan of ``rows`` rows) on the event loop when small, else on a worker thread
    holding ``changes``, the lock the index changes under, so that no change lands mid-scan."""
    if rows <= SCAN_ON_LOOP:
        return run()
    async with changes:
        return await anyio.to_thread.run_sync(run)


@dataclass(frozen=True, slots=True)
class IndexRow:
    n: int  # the row in the store, what the change log names
    id: str  # the memory's id, what a search returns
    vector: Vector
    namespace: str | None
    live: bool
    expires_at: float | None
    cjk: bool = False


@dataclass(frozen=True, slots=True)
class _Means:
    """The script means a centred search measures against, as taken from the running sums, and the
    prior they were shrunk towards."""

    prior: tuple[Vector, Vector]
    weight: float
    means: Vector  # (2, dim): Latin, CJK
    norm2: npt.NDArray[np.float32]  # |mean|^2 per script

    def serves(self, centring: Centring) -> bool:
        return self.weight == centring.prior_weight and all(
            np.array_equal(a, b) for a, b in zip(self.prior, centring.prior, strict=True)
        )


@dataclass(frozen=True, slots=True)
class IndexColumns:
    """Every row of an index as columns: what a bulk load reads in one pass."""

    ns: npt.NDArray[np.int64]
    ids: list[str]
    vectors: Vector  # (rows, dim)
    namespaces: list[str | None]
    live: npt.NDArray[np.bool_]
    expires: npt.NDArray[np.float64]  # inf: never
    cjk: npt.NDArray[np.bool_]


class VectorIndex:
    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._mat: Vector = np.zeros((0, dim), dtype=np.float32)
        self._n = np.zeros(0, dtype=np.int64)
        self._ids: list[str] = []  # by position, as every column
        self._ns = np.zeros(0, dtype=np.int32)
        self._live = np.zeros(0, dtype=bool)
        self._expires = np.zeros(0, dtype=np.float64)
        self._cjk = np.zeros(0, dtype=bool)
        self._row_mean = np.zeros(0, dtype=np.float32)  # each row . its script's mean in ``_means``
        self._means: _Means | None = None
        self._drift = np.zeros(2, dtype=np.int64)  # rows of each script changed since ``_means`` was taken
        self._sums = np.zeros((2, dim), dtype=np.float64)  # per script: Latin, CJK
        self._counts = np.zeros(2, dtype=np.int64)
        self._size = 0
        self._pos: dict[int, int] = {}
        self._ns_codes: dict[str | None, int] = {None: 0}

    @property
    def scripts(self) -> tuple[bool, bool]:
        """Whether the index holds rows in Latin script, and in CJK."""
        return bool(self._counts[0] > 0), bool(self._counts[1] > 0)

    def __len__(self) -> int:
        return self._size

    # The per-row columns beside the vectors, with their types.
    _COLUMNS = (
        ("_n", np.int64),
        ("_ns", np.int32),
        ("_live", bool),
        ("_expires", np.float64),
        ("_cjk", bool),
        ("_row_mean", np.float32),
    )

    def _grow(self, need: int) -> None:
        cap = len(self._n)
        if need <= cap:
            return
        new_cap = max(need, cap * 2, 16)  # a crowd of small principals: no 1.5 MB each for one memory
        mat = np.zeros((new_cap, self.dim), dtype=np.float32)
        mat[: self._size] = self._mat[: self._size]
        self._mat = mat
        for name, dtype in self._COLUMNS:
            old = getattr(self, name)
            arr = np.zeros(new_cap, dtype=dtype)
            arr[: self._size] = old[: self._size]
            setattr(self, name, arr)

    def _code(self, namespace: str | None) -> int:
        code = self._ns_codes.get(namespace)
        if code is None:
            code = len(self._ns_codes)
            self._ns_codes[namespace] = code
        return code

    def upsert(self, rows: list[IndexRow]) -> None:
        self._grow(self._size + len(rows))
        for row in rows:
            pos = self._pos.get(row.n)
            if pos is None:
                pos = self._size
                self._size += 1
                self._pos[row.n] = pos
                self._ids.append(row.id)
            else:
                self._count(pos, -1)
                self._ids[pos] = row.id
            self._mat[pos] = row.vector
            self._cjk[pos] = row.cjk
            self._n[pos] = row.n
            self._ns[pos] = self._code(row.namespace)
            self._live[pos] = row.live
            self._expires[pos] = np.inf if row.expires_at is None else row.expires_at
            self._count(pos, 1)
            if self._means is not None:
                self._row_mean[pos] = self._mat[pos] @ self._means.means[int(row.cjk)]

    def load(self, columns: IndexColumns) -> None:
        """Fill an empty index at once from column arrays (a store's first read, in one buffer)."""
        assert self._size == 0, "load fills an empty index; upsert changes a loaded one"
        size = len(columns.ns)
        vectors = columns.vectors
        if vectors.flags.writeable and vectors.flags.c_contiguous and vectors.dtype == np.float32:
            self._mat = vectors  # the buffer the rows were read into becomes the index: no second copy
            for name, dtype in self._COLUMNS:
                setattr(self, name, np.zeros(size, dtype=dtype))
        else:
            self._grow(size)
            self._mat[:size] = vectors
        self._n[:size] = columns.ns
        self._ids = list(columns.ids)
        self._ns[:size] = [self._code(namespace) for namespace in columns.namespaces]
        self._live[:size] = columns.live
        self._expires[:size] = columns.expires
        self._cjk[:size] = columns.cjk
        self._size = size
        self._pos = dict(zip(columns.ns.tolist(), range(size), strict=True))
        # Each script's sum as two products over the matrix (a mask would copy most of it).
        mat = self._mat[:size]
        everything = np.ones(size, dtype=np.float32) @ mat
        chinese = self._cjk[:size].astype(np.float32) @ mat
        self._sums[:] = (everything - chinese, chinese)
        cjk = int(self._cjk[:size].sum())
        self._counts[:] = (size - cjk, cjk)
        self._means = None
        self._drift[:] = 0

    @property
    def nbytes(self) -> int:
        """Memory the index holds: its arrays at their capacity, and about 80 bytes an id."""
        arrays = sum(int(getattr(self, name).nbytes) for name in ("_mat", *(name for name, _ in self._COLUMNS)))
        return arrays + ID_BYTES * len(self._ids)

    def _count(self, pos: int, sign: int) -> None:
        script = int(self._cjk[pos])
        self._sums[script] += sign * self._mat[pos].astype(np.float64)
        self._counts[script] += sign
        self._drift[script] += 1

    def remove(self, ns: list[int]) -> None:
        for n in ns:
            pos = self._pos.pop(n, None)
            if pos is None:
                continue
            self._count(pos, -1)
            last = self._size - 1
            if pos != last:
                self._mat[pos] = self._mat[last]
                for name, _ in self._COLUMNS:
                    arr = getattr(self, name)
                    arr[pos] = arr[last]
                self._ids[pos] = self._ids[last]
                self._pos[int(self._n[pos])] = pos
            self._ids.pop()
            self._size = last

    def search(self, query: Vector, **where: Any) -> list[tuple[str, float]]:
        """Top ``limit`` (id, cosine) visible from ``namespace``: its own rows plus principal-wide ones
        (only its own with ``exact_namespace``)."""
        return self.rank(query, **where).hits

    def rank(
        self,
        query: Vector,
        *,
        namespace: str | None,
        limit: int,
        now: float,
        include_dead: bool = False,
        include_expired: bool = False,
        exact_namespace: bool = False,
        allow: npt.NDArray[np.int64] | None = None,
        centring: Centring | None = None,
    ) -> DenseHits:
        """The search, with the spread of scores over every visible row; with ``centring`` and a store
        that holds both scripts, similarity is measured between vectors centred on their script's mean."""
        size = self._size
        if size == 0 or limit <= 0:
            return DenseHits([], 0.0, 0.0, 0)
        mask = self._mask(namespace, now, include_dead, include_expired, exact_namespace, allow)
        visible = int(mask.sum())
        if visible == 0:
            return DenseHits([], 0.0, 0.0, 0)
        mixed = centring is not None and bool(np.all(self._counts > 0))
        if mixed:
            assert centring is not None
            scores = self._centred_scores(centring)
        else:
            scores = product(self._mat[:size], query)
        seen = scores[mask]
        mean, std = float(seen.mean()), float(seen.std())
        scores = np.where(mask, scores, -np.inf)
        take = min(limit, visible)
        top = np.argpartition(-scores, take - 1)[:take]
        top = top[np.argsort(-scores[top])]
        hits = [(self._ids[i], float(scores[i])) for i in top]
        return DenseHits(hits, mean, std, visible, population=size, centred=mixed)

    def neighbours(
        self, queries: Vector, *, namespace: str | None, limit: int, now: float, exact_namespace: bool = False
    ) -> list[list[tuple[str, float]]]:
        """Per row of ``queries``, the top ``limit`` (id, cosine) among live, unexpired rows visible
        from ``namespace``: one matrix product for the whole batch."""
        size = self._size
        if size == 0 or limit <= 0:
            return [[] for _ in range(len(queries))]
        mask = self._mask(namespace, now, False, False, exact_namespace, None)
        take = min(limit, int(mask.sum()))
        if take == 0:
            return [[] for _ in range(len(queries))]
        scores = np.where(mask[:, None], self._mat[:size] @ queries.T, -np.inf)  # (rows, queries)
        out: list[list[tuple[str, float]]] = []
        for column in scores.T:
            top = np.argpartition(-column, take - 1)[:take]
            top = top[np.argsort(-column[top])]
            out.append([(self._ids[i], float(column[i])) for i in top])
        return out

    def _mask(
        self,
        namespace: str | None,
        now: float,
        include_dead: bool,
        include_expired: bool,
        exact_namespace: bool,
        allow: npt.NDArray[np.int64] | None,
    ) -> npt.NDArray[np.bool_]:
        """The rows a search may return: its namespace (plus principal-wide rows unless exact),
        live and unexpired unless asked otherwise, and in ``allow`` when given."""
        size = self._size
        ns = self._ns[:size]
        code = self._ns_codes.get(namespace, -1)
        if exact_namespace:
            mask = ns == code
        else:
            mask = ns == 0
            if namespace is not None:
                mask |= ns == code
        if not include_dead:
            mask &= self._live[:size]
        if not include_expired:
            mask &= self._expires[:size] > now
        if allow is not None:
            mask &= np.isin(self._n[:size], allow)
        out: npt.NDArray[np.bool_] = mask
        return out

    def _centred_scores(self, centring: Centring) -> npt.NDArray[np.float32]:
        """cos(p - mu_script(p), q') for every row: one product with q', beside each row's product
        with its script's mean, kept from when the means were taken."""
        size = self._size
        taken = self._taken_means(centring)
        cjk = self._cjk[:size]
        mean_dot_query = taken.means @ centring.query  # mu_s . q'
        norm2 = np.where(cjk, taken.norm2[1], taken.norm2[0])
        norms = np.sqrt(np.maximum(1.0 - 2.0 * self._row_mean[:size] + norm2, 1e-6))
        offset = np.where(cjk, mean_dot_query[1], mean_dot_query[0])
        out: npt.NDArray[np.float32] = ((product(self._mat[:size], centring.query) - offset) / norms).astype(np.float32)
        return out

    def _taken_means(self, centring: Centring) -> _Means:
        """Each script's mean (its running sum shrunk towards the prior), taken again with each row's
        product with it when the prior changed or more than ``MEANS_DRIFT`` of the rows did."""
        taken = self._means
        allowed = (self._counts + centring.prior_weight) * MEANS_DRIFT
        if taken is not None and taken.serves(centring) and bool(np.all(self._drift <= allowed)):
            return taken
        size, weight = self._size, centring.prior_weight
        means = np.stack(
            [(self._sums[s] + weight * centring.prior[s]) / (self._counts[s] + weight) for s in (0, 1)]
        ).astype(np.float32)
        products = self._mat[:size] @ means.T  # (rows, 2)
        self._row_mean[:size] = np.where(self._cjk[:size], products[:, 1], products[:, 0])
        norm2 = np.einsum("ij,ij->i", means, means).astype(np.float32)
        self._means = _Means(centring.prior, weight, means, norm2)
        self._drift[:] = 0
        return self._means

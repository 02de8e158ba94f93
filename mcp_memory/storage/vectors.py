"""An exact in-process vector index for one principal, rebuilt from SQLite.

Rows carry what the default recall filter needs (namespace code, live flag, expiry), so the
common query is one matrix-vector product and a mask; rarer filters pass an allow-list.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class IndexRow:
    n: int
    vector: Vector
    namespace: str | None
    live: bool
    expires_at: float | None


class VectorIndex:
    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._mat: Vector = np.zeros((0, dim), dtype=np.float32)
        self._n = np.zeros(0, dtype=np.int64)
        self._ns = np.zeros(0, dtype=np.int32)
        self._live = np.zeros(0, dtype=bool)
        self._expires = np.zeros(0, dtype=np.float64)
        self._size = 0
        self._pos: dict[int, int] = {}
        self._ns_codes: dict[str | None, int] = {None: 0}

    def __len__(self) -> int:
        return self._size

    def _grow(self, need: int) -> None:
        cap = len(self._n)
        if need <= cap:
            return
        new_cap = max(need, cap * 2, 1024)
        mat = np.zeros((new_cap, self.dim), dtype=np.float32)
        mat[: self._size] = self._mat[: self._size]
        self._mat = mat
        for name, dtype in (("_n", np.int64), ("_ns", np.int32), ("_live", bool), ("_expires", np.float64)):
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
            self._mat[pos] = row.vector
            self._n[pos] = row.n
            self._ns[pos] = self._code(row.namespace)
            self._live[pos] = row.live
            self._expires[pos] = np.inf if row.expires_at is None else row.expires_at

    def remove(self, ns: list[int]) -> None:
        for n in ns:
            pos = self._pos.pop(n, None)
            if pos is None:
                continue
            last = self._size - 1
            if pos != last:
                self._mat[pos] = self._mat[last]
                for name in ("_n", "_ns", "_live", "_expires"):
                    arr = getattr(self, name)
                    arr[pos] = arr[last]
                self._pos[int(self._n[pos])] = pos
            self._size = last

    def search(
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
    ) -> list[tuple[int, float]]:
        """Top ``limit`` (n, cosine) visible from ``namespace``: its own rows plus principal-wide ones
        (only its own with ``exact_namespace``)."""
        size = self._size
        if size == 0 or limit <= 0:
            return []
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
        visible = int(mask.sum())
        if visible == 0:
            return []
        scores = self._mat[:size] @ query
        scores = np.where(mask, scores, -np.inf)
        take = min(limit, visible)
        top = np.argpartition(-scores, take - 1)[:take]
        top = top[np.argsort(-scores[top])]
        return [(int(self._n[i]), float(scores[i])) for i in top]

"""Recall's dense search run by PostgreSQL with pgvector (ADR 25): nothing of a principal's vectors
is held by the replica.

A search is one statement in the call's transaction, on the principal's own partitions (so
row-level security and ``mcp.principal`` bind it as every other read). A partition of up to
``HNSW_ROWS`` vectors is scanned exactly: every visible row scored, the best ``limit`` returned with
the mean and spread of the scores over all of them, as the in-process index gives them. A larger one
is searched through its HNSW index, one graph per script (``vectors.cjk``; made in the background,
once, after the first search that finds it missing): each script's probe walks its own graph, the
candidates scored in float32, and the spread estimated from a sample of the partition's pages.

A store that mixes Latin and CJK texts measures similarity between vectors centred on their
script's mean (ADR 10): the means are summed in PostgreSQL, kept here for ``SCRIPTS_SECONDS``, and
the centred score is computed in the scan. Past ``HNSW_ROWS`` each script's candidates nearest the
centred question come through the index, and are scored centred.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt
from psycopg import sql

from mcp_memory.core.models import Centring, Criteria, DenseHits, Scope
from mcp_memory.storage.pg.messages import exchange
from mcp_memory.storage.pg.vector_layout import HNSW_ROWS, SCRIPTS, index_name, visible_filter

if TYPE_CHECKING:
    from mcp_memory.core.models import Vector
    from mcp_memory.storage.pg.connections import PgDatabase
    from mcp_memory.storage.pg.dialect import PgConn

log = logging.getLogger(__name__)

EF_SEARCH = 200  # HNSW candidates a search keeps (pgvector's default 40 finds too few of the true best)
SCRIPTS_SECONDS = 30.0  # a mixed store's script means are summed again at most this often, once its rows moved
NEAREST_TIMES = 2  # candidates per script taken through the index, per hit asked (ADR 25; 3 agreed no better)
SAMPLE_ROWS = 2_000  # about how many rows a large partition's spread is estimated from
SEEN_PRINCIPALS = 1_024  # principals whose few figures this process keeps (a few hundred bytes each)
_SCRIPT = {"latin": "NOT v.cjk", "cjk": "v.cjk"}  # a probe's filter: its script's partial index (schema 5)


class Indexed(Protocol):
    """What the search reads of its record store (``store.PostgresStore``, which imports this module):
    the database's transactions, the commit mark, the rows a scope may see, and its background."""

    database: PgDatabase

    async def commit_mark(self, scope: Scope) -> tuple[object, tuple[Any, ...]]: ...

    async def eligible(self, scope: Scope, criteria: Criteria, now: float) -> list[int]: ...

    def in_background(self, call: Callable[..., Coroutine[Any, Any, None]], *args: object) -> bool: ...


@dataclass(slots=True)
class _Seen:
    """What this process knows of a principal's partition: a few numbers, never its vectors."""

    population: int = 0  # vectors of the model's dimension
    cjk: int = 0
    mark: object = None  # the store's commit mark these counts were taken at
    indexed: bool = False
    building: bool = False  # its index is being made, in the background
    sums: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]] | None = None  # each script's, and when
    sums_at: float = 0.0
    sums_mark: object = None  # the commit mark the sums were taken at


_WRITTEN: OrderedDict[bytes, str] = OrderedDict()  # the last few vectors written out, by their bytes
_WRITTEN_KEPT = 8  # a search writes its question and means several times (its probes, its sample)


def _vector(v: Vector) -> str:
    """pgvector's text of a float32 vector: nine significant digits, which give each float32 back
    exactly (half the text, and half the time, of a float's shortest repr); written once and reused."""
    values = np.asarray(v, dtype=np.float32)
    key = values.tobytes()
    text = _WRITTEN.get(key)
    if text is None:
        text = _WRITTEN[key] = "[" + ",".join(map("{:.9g}".format, values.tolist())) + "]"
        if len(_WRITTEN) > _WRITTEN_KEPT:
            _WRITTEN.popitem(last=False)
    return text


class PgVectorSearch:
    """The VectorSearch protocol over pgvector. The record store's transactions are the index's:
    there is nothing to follow, repair or erase apart from them."""

    name = "pgvector"

    def __init__(self, store: Indexed) -> None:
        self.store = store
        self._seen: OrderedDict[str, _Seen] = OrderedDict()

    # ----- what the stores tell every engine -------------------------------------------------

    async def began(self, conn: object) -> int:
        return 0

    async def writing(self, scope: Scope, conn: object, began: int) -> None:
        return None

    def abandoned(self, scope: Scope) -> None:
        return None

    async def erase(self, scope: Scope) -> int:
        self._seen.pop(scope.principal, None)  # the partitions are truncated with the rest
        return 0

    async def model_changed(self, scope: Scope) -> None:
        self._seen.pop(scope.principal, None)

    async def repair(self, scope: Scope) -> dict[str, int]:
        return {"missing": 0, "orphans": 0}

    async def close(self) -> None:
        return None

    def _known(self, scope: Scope) -> _Seen:
        seen = self._seen.get(scope.principal)
        if seen is None:
            seen = self._seen[scope.principal] = _Seen()
            while len(self._seen) > SEEN_PRINCIPALS:
                self._seen.popitem(last=False)
        self._seen.move_to_end(scope.principal)
        return seen

    # ----- the VectorSearch protocol ---------------------------------------------------------

    async def sync(self, scope: Scope, dim: int) -> None:
        return None  # nothing to load

    def size(self, scope: Scope) -> int | None:
        """The principal's vectors as the last search counted them; None before one."""
        seen = self._seen.get(scope.principal)
        return seen.population if seen is not None else None

    def total(self) -> int:
        return 0  # no index lives in this process

    async def health(self, scope: Scope) -> tuple[bool, str]:
        async with self.store.database.transaction(scope, write=False) as conn:
            cur = await conn.conn.execute(
                sql.SQL("SELECT count(*), (SELECT count(*) FROM pg_indexes WHERE tablename = {}) FROM {}").format(
                    sql.Literal(f"vectors_{conn.key}"), sql.Identifier(f"vectors_{conn.key}")
                )
            )
            rows, indexes = (await cur.fetchone()) or (0, 0)
        how = "through its HNSW index" if int(indexes) > 1 else f"exactly (an HNSW index past {HNSW_ROWS:,} vectors)"
        return True, f"pgvector, in PostgreSQL: {rows} vectors, searched {how}"

    async def scripts(self, scope: Scope, dim: int) -> tuple[bool, bool]:
        """Counted again only when the principal's rows moved (the mark is read as a call opens)."""
        seen = self._known(scope)
        _, mark = await self.store.commit_mark(scope)
        if seen.mark != mark:
            async with self.store.database.transaction(scope, write=False) as conn:
                await self._count(conn, seen, dim)
            seen.mark = mark
        return seen.population - seen.cjk > 0, seen.cjk > 0

    async def _count(self, conn: PgConn, seen: _Seen, dim: int) -> None:
        cur = await conn.conn.execute(_counts(conn.key, dim))
        population, cjk = (await cur.fetchone()) or (0, 0)
        seen.population, seen.cjk = int(population), int(cjk)

    async def ranking(
        self,
        scope: Scope,
        query: Vector,
        criteria: Criteria,
        limit: int,
        now: float,
        centring: Centring | None = None,
    ) -> DenseHits:
        """In one statement (two the first time a mixed store's means are summed)."""
        if limit <= 0:
            return DenseHits([], 0.0, 0.0, 0)
        allow = None
        if criteria.narrows:
            allow = [int(n) for n in await self.store.eligible(scope, criteria, now)]
        seen = self._known(scope)
        _, mark = await self.store.commit_mark(scope)
        dim = int(query.shape[0])
        where = visible_filter(scope, criteria, now, allow)
        async with self.store.database.transaction(scope, write=False) as conn:
            mixed = centring is not None and seen.cjk and seen.population > seen.cjk
            if seen.indexed:
                if centring is not None and mixed:
                    means = await self._means(conn, seen, dim, centring, mark)
                    near = await self._approximate(conn, seen, centring.query, means, dim, where, limit, mark, query)
                else:
                    near = await self._approximate(conn, seen, query, None, dim, where, limit, mark)
                hits, mean, std, visible, cosines = near
                return DenseHits(
                    hits, mean, std, visible, population=seen.population, centred=bool(mixed), cosines=cosines
                )
            found = await self._exact(conn, seen, query, None, dim, where, limit) if not mixed else None
            mixed = centring is not None and seen.cjk and seen.population > seen.cjk  # or became so
            if centring is not None and mixed:
                means = await self._means(conn, seen, dim, centring, mark)
                found = await self._exact(conn, seen, centring.query, means, dim, where, limit, plain=query)
            seen.mark = mark
        if seen.population > HNSW_ROWS and not seen.indexed and not seen.building:
            seen.building = self.store.in_background(self._index, scope, seen, dim)
        assert found is not None
        hits, mean, std, visible, cosines = found
        return DenseHits(hits, mean, std, visible, population=seen.population, centred=bool(mixed), cosines=cosines)

    async def _index(self, scope: Scope, seen: _Seen, dim: int) -> None:
        """The partition's HNSW index made in a transaction of its own, off any call: searches go
        on exactly meanwhile (the build's SHARE lock lets them read; the principal's writes wait
        for it: about 3 s at 20,000 vectors). Another replica's build of it under way is not
        repeated: the call returns without the index, and a later search finds it made."""
        try:
            async with self.store.database.transaction(scope, write=False) as conn:
                await conn.conn.execute("SELECT mcp_vector_index(%s, %s)", (conn.key, dim))
                cur = await conn.conn.execute(
                    "SELECT to_regclass(%s) IS NOT NULL", (f"public.{index_name(conn.key, dim)}",)
                )
                made = await cur.fetchone()
            seen.indexed = bool(made and made[0])
        except Exception as exc:  # the next search past the threshold tries again
            log.warning("a principal's vector index was not made: %s", type(exc).__name__)
        finally:
            seen.building = False

    async def _exact(
        self,
        conn: PgConn,
        seen: _Seen,
        query: Vector,
        means: Vector | None,
        dim: int,
        where: sql.Composable,
        limit: int,
        plain: Vector | None = None,
    ) -> tuple[list[tuple[str, float]], float, float, int, dict[str, float]]:
        """Every visible row scored: the best ``limit``, the scores' mean and spread, and the
        partition's figures (its vectors, its CJK ones, whether it has its index) in the same scan;
        centred on ``means`` (a mixed store), the best rows' cosines with ``plain`` (the question
        not centred) too.

        The filter reads the copy of the memory's figures on each vector row (schema 7), so the
        partition's memories are read only for the best rows' ids (with the rows tied with the last
        of them, so that ties are broken by id as before)."""
        products, score = _score(query, means)
        cosine: sql.Composable = sql.SQL("NULL::float8")
        if plain is not None:
            cosine = sql.SQL("(SELECT -(x.vec <#> {q}::vector) FROM {v} x WHERE x.memory_n = t.memory_n)").format(
                q=sql.Literal(_vector(plain)), v=_parts(conn.key)["v"]
            )
        statement = sql.SQL(
            "WITH s AS MATERIALIZED (SELECT memory_n, {score} AS score, shown, cjk FROM (SELECT v.memory_n, v.cjk, "
            "{visible} AS shown, {products} FROM {v} v WHERE vector_dims(v.vec) = {dim} OFFSET 0) j) "
            "(SELECT m.id, t.score, {cosine}, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bool FROM "
            "(SELECT memory_n, score FROM s WHERE shown ORDER BY score DESC FETCH FIRST {limit} ROWS WITH TIES) t "
            "JOIN {m} m ON m.n = t.memory_n ORDER BY t.score DESC, m.id LIMIT {limit}) UNION ALL "
            "SELECT NULL, avg(score) FILTER (WHERE shown), stddev_pop(score) FILTER (WHERE shown), "
            "count(*) FILTER (WHERE shown), count(*) FILTER (WHERE cjk), count(*), to_regclass({index}) IS NOT NULL "
            "FROM s"
        ).format(
            products=products, score=score, cosine=cosine, visible=where, dim=sql.Literal(dim),
            limit=sql.Literal(limit), index=sql.Literal(f"public.{index_name(conn.key, dim)}"), **_parts(conn.key),
        )  # fmt: skip
        cur = await conn.conn.execute(statement)
        rows = await cur.fetchall()
        hits = [(str(r[0]), float(r[1])) for r in rows if r[0] is not None]
        cosines = {str(r[0]): float(r[2]) for r in rows if r[0] is not None and r[2] is not None}
        [(_, mean, std, visible, cjk, population, indexed)] = [r for r in rows if r[0] is None]
        seen.population, seen.cjk, seen.indexed = int(population), int(cjk), bool(indexed)
        return hits, float(mean or 0.0), float(std or 0.0), int(visible), cosines

    async def _approximate(
        self,
        conn: PgConn,
        seen: _Seen,
        query: Vector,
        means: Vector | None,
        dim: int,
        where: sql.Composable,
        limit: int,
        mark: object,
        plain: Vector | None = None,
    ) -> tuple[list[tuple[str, float]], float, float, int, dict[str, float]]:
        """Through the HNSW index (iterative: filtered rows are passed over until ``limit`` are
        found), the candidates scored exactly in float32 as the index hands them over; the spread
        from a sample of the partition's pages. Centred on ``means`` (a mixed store), each script's
        ``limit`` candidates closest to the centred question, scored centred, with their cosines
        with ``plain``. The partition's vectors are counted again only when its rows moved."""
        parts = _parts(conn.key)
        pct = min(100.0, 100.0 * SAMPLE_ROWS / max(seen.population, 1))
        settings = sql.SQL(
            "SELECT set_config('hnsw.ef_search', {}, true), set_config('hnsw.iterative_scan', 'relaxed_order', true)"
        ).format(sql.Literal(str(EF_SEARCH)))
        candidates = _candidates(conn.key, query, means, dim, where, limit, plain)
        products, score = _products(query, means, None)
        # the sampled rows scored and filtered by the figures they carry (schema 7): no memory read
        sample = sql.SQL(
            "SELECT avg({score}) FILTER (WHERE {where}), stddev_pop({score}) FILTER (WHERE {where}), "
            "count(*) FILTER (WHERE {where}), count(*) FROM (SELECT v.memory_n, v.cjk, v.namespace, v.live, "
            "v.expires_at, {products} FROM {v} v TABLESAMPLE SYSTEM ({pct}) REPEATABLE (35) "
            "WHERE vector_dims(v.vec) = {dim}) v"
        ).format(
            score=score, products=products, where=where, pct=sql.Literal(pct), dim=sql.Literal(dim), **parts,
        )  # fmt: skip
        statements: list[sql.Composable] = [settings, candidates, sample]
        if seen.mark != mark:  # a full scan of the partition (about 5 ms at 10,000): only when it moved
            statements.append(_counts(conn.key, dim))
        answers = await exchange(conn.conn, [s.as_string(conn.conn) for s in statements])
        [(mean, std, shown, sampled)] = answers[2]
        if len(answers) > 3:
            [(population, cjk)] = answers[3]
            seen.population, seen.cjk, seen.mark = int(population), int(cjk), mark
        visible = round(int(shown) * seen.population / max(int(sampled), 1))
        hits = [(str(i), float(s)) for i, s, _ in answers[1]]
        cosines = {str(i): float(c) for i, _, c in answers[1] if c is not None}
        return hits, float(mean or 0.0), float(std or 0.0), visible, cosines

    async def _means(self, conn: PgConn, seen: _Seen, dim: int, centring: Centring, mark: object) -> Vector:
        """Each script's mean, shrunk towards the prior (ADR 10), from sums kept until the principal's
        rows move (``mark``), and then ``SCRIPTS_SECONDS`` more: a store nobody writes to is summed
        once, not again every 30 s at one recall's cost (20-120 ms at 10,000 vectors)."""
        stale = seen.sums_mark != mark and time.monotonic() - seen.sums_at > SCRIPTS_SECONDS
        if seen.sums is None or stale:
            cur = await conn.conn.execute(
                sql.SQL("SELECT cjk, count(*), sum(vec) FROM {} WHERE vector_dims(vec) = {} GROUP BY 1").format(
                    _parts(conn.key)["v"], sql.Literal(dim)
                )  # the script each row carries (schema 5's triggers keep it the memory's), as _counts reads it
            )
            taken = [np.zeros(dim, dtype=np.float64), np.zeros(dim, dtype=np.float64)]
            number = [0, 0]
            for cjk, count, total in await cur.fetchall():
                taken[int(bool(cjk))] = np.frombuffer(total, dtype=np.float32).astype(np.float64)
                number[int(bool(cjk))] = int(count)
            seen.sums = (taken[0], taken[1])
            seen.population, seen.cjk, seen.sums_at = sum(number), number[1], time.monotonic()
            seen.sums_mark = mark
        sums, counts = seen.sums, (seen.population - seen.cjk, seen.cjk)
        w = centring.prior_weight
        assert sums is not None
        return np.stack([(sums[s] + w * centring.prior[s]) / (counts[s] + w) for s in (0, 1)]).astype(np.float32)

    async def neighbours(
        self, scope: Scope, queries: Vector, criteria: Criteria, limit: int, now: float
    ) -> list[list[tuple[str, float]]]:
        """One statement per row of ``queries``, sent together."""
        if criteria.narrows or criteria.include_superseded or criteria.include_archived or criteria.include_expired:
            raise ValueError("neighbours searches live rows by namespace only")
        if limit <= 0 or len(queries) == 0:
            return [[] for _ in range(len(queries))]
        seen = self._known(scope)
        dim = int(queries.shape[1])
        where = visible_filter(scope, criteria, now, None)
        async with self.store.database.transaction(scope, write=False) as conn:
            statements = [_nearest(conn.key, q, dim, where, limit, seen.indexed).as_string(conn.conn) for q in queries]
            if seen.indexed:
                statements.insert(0, f"SELECT set_config('hnsw.ef_search', '{EF_SEARCH}', true)")
            found = await exchange(conn.conn, statements)
        rows = found[1:] if seen.indexed else found
        return [sorted(((str(i), float(s)) for i, s in row), key=lambda h: -h[1]) for row in rows]


def _candidates(
    key: str, query: Vector, means: Vector | None, dim: int, where: sql.Composable, limit: int, plain: Vector | None
) -> sql.Composed:
    """The best ``limit`` of each script's ``NEAREST_TIMES`` x ``limit`` rows nearest ``query`` through
    its own graph (the partial index of its script, ``vectors.cjk``), each probe scoring and filtering
    its rows by what they carry as it reads them (schema 7); centred on ``means`` or not, the same two
    probes. Only the best rows (and those tied with the last) are joined with their memories, for
    their ids, which break the ties."""
    parts = _parts(key)
    cosine = sql.SQL("NULL::float8") if plain is None else sql.SQL("-(vec <#> {})").format(_literal(plain))
    nearest = sql.SQL(
        "(SELECT memory_n, {score} AS score, cosine FROM (SELECT v.memory_n, {cosine} AS cosine, {products} "
        "FROM {v} v WHERE vector_dims(v.vec) = {dim} AND {script} AND {where} "
        "ORDER BY v.vec::halfvec({dim}) <#> {q}::halfvec({dim}) LIMIT {limit}) p)"
    )
    probes = []
    for script in SCRIPTS:  # each probe's rows are of its script: scored with its mean alone
        products, score = _products(query, means, script)
        probes.append(
            nearest.format(q=_literal(query), dim=sql.Literal(dim), where=where, script=sql.SQL(_SCRIPT[script]),
                           cosine=cosine, products=products, score=score,
                           limit=sql.Literal(limit * NEAREST_TIMES), v=parts["v"])
        )  # fmt: skip
    return sql.SQL(
        "SELECT m.id, c.score, c.cosine FROM (SELECT * FROM ({nearest}) c ORDER BY score DESC "
        "FETCH FIRST {limit} ROWS WITH TIES) c JOIN {m} m ON m.n = c.memory_n ORDER BY c.score DESC, m.id LIMIT {limit}"
    ).format(
        nearest=sql.SQL(" UNION ALL ").join(probes),  # the scripts are disjoint: no row comes twice
        limit=sql.Literal(limit),
        m=parts["m"],
    )


def _nearest(key: str, query: Vector, dim: int, where: sql.Composable, limit: int, indexed: bool) -> sql.Composed:
    """The ``limit`` visible rows nearest ``query`` (not centred): exactly, or through each
    script's graph (two probes, merged by score); the rows filtered by what they carry (schema 7),
    then joined with their memories for their ids."""
    probe = sql.SQL(
        "SELECT v.memory_n, -(v.vec <#> {q}::vector) AS score FROM {v} v "
        "WHERE vector_dims(v.vec) = {dim} AND {script} AND {where} ORDER BY {order} LIMIT {limit}"
    )
    order = sql.SQL("v.vec::halfvec({dim}) <#> {q}::halfvec({dim})" if indexed else "v.vec <#> {q}::vector")
    fill = {"q": sql.Literal(_vector(query)), "dim": sql.Literal(dim), "where": where, "limit": sql.Literal(limit)}
    parts = _parts(key)
    if not indexed:
        found = probe.format(order=order.format(**fill), script=sql.SQL("true"), v=parts["v"], **fill)
    else:
        probes = [
            sql.SQL("(") + probe.format(order=order.format(**fill), script=sql.SQL(_SCRIPT[s]), v=parts["v"], **fill)
            + sql.SQL(")")
            for s in SCRIPTS
        ]  # fmt: skip
        found = sql.SQL("SELECT * FROM ({}) c ORDER BY score DESC LIMIT {}").format(
            sql.SQL(" UNION ALL ").join(probes), sql.Literal(limit)
        )
    return sql.SQL("SELECT m.id, c.score FROM ({}) c JOIN {} m ON m.n = c.memory_n").format(found, parts["m"])


def _counts(key: str, dim: int) -> sql.Composed:
    """The partition's vectors of the model's dimension, and how many of them are of CJK texts
    (``vectors.cjk``, which schema 5's triggers keep equal to the memory's language)."""
    return sql.SQL("SELECT count(*), count(*) FILTER (WHERE cjk) FROM {} WHERE vector_dims(vec) = {}").format(
        _parts(key)["v"], sql.Literal(dim)
    )


def _literal(v: Vector) -> sql.Composable:
    return sql.Literal(_vector(v)) + sql.SQL("::vector")


def _parts(key: str) -> dict[str, sql.Composable]:
    return {"v": sql.Identifier(f"vectors_{key}"), "m": sql.Identifier(f"memories_{key}")}


def _score(query: Vector, means: Vector | None) -> tuple[sql.Composable, sql.Composable]:
    """The products a vector row gives (columns of ``p``), and the similarity of its row to
    ``query`` from them (``cjk``: the row's script): the inner product (vectors are unit length), or
    with ``means`` the cosine between the row and the query each centred on their script's mean
    (ADR 10)."""
    q = sql.Literal(_vector(query))
    if means is None:
        return sql.SQL("-(vec <#> {q}::vector) AS ip").format(q=q), sql.SQL("ip")
    offsets = means @ query
    norm2 = np.einsum("ij,ij->i", means, means)
    pick = sql.SQL("CASE WHEN cjk THEN {}::float8 ELSE {}::float8 END")  # numeric would be cast on every row
    # each mean a literal cast as itself (a constant, parsed once); both products taken of every row
    products = sql.SQL("-(vec <#> {q}::vector) AS ip, vec <#> {cjk}::vector AS d1, vec <#> {latin}::vector AS d0")
    score = sql.SQL("((ip - {offset}) / sqrt(greatest(1 + 2 * CASE WHEN cjk THEN d1 ELSE d0 END + {norm2}, 1e-6)))")
    return products.format(q=q, cjk=sql.Literal(_vector(means[1])), latin=sql.Literal(_vector(means[0]))), score.format(
        offset=pick.format(sql.Literal(float(offsets[1])), sql.Literal(float(offsets[0]))),
        norm2=pick.format(sql.Literal(float(norm2[1])), sql.Literal(float(norm2[0]))),
    )


def _products(query: Vector, means: Vector | None, script: str | None) -> tuple[sql.Composable, sql.Composable]:
    """As :func:`_score`, with one product against a mean per row, not two: the mean of the row's
    own script (``vectors.cjk``), or of ``script`` when every row is of it."""
    q = sql.Literal(_vector(query))
    if means is None:
        return sql.SQL("-(vec <#> {q}::vector) AS ip").format(q=q), sql.SQL("ip")
    offsets = (means @ query).tolist()
    norm2 = np.einsum("ij,ij->i", means, means).tolist()
    written = [sql.Literal(_vector(mean)) + sql.SQL("::vector") for mean in means]

    def pick(values: Sequence[sql.Composable]) -> sql.Composable:
        if script is not None:
            return values[SCRIPTS.index(script)]
        return sql.SQL("CASE WHEN cjk THEN {} ELSE {} END").format(values[1], values[0])

    floats = [[sql.Literal(float(x)) + sql.SQL("::float8") for x in xs] for xs in (offsets, norm2)]
    products = sql.SQL("-(vec <#> {q}::vector) AS ip, vec <#> {mean} AS d").format(q=q, mean=pick(written))
    score = sql.SQL("((ip - {offset}) / sqrt(greatest(1 + 2 * d + {norm2}, 1e-6)))").format(
        offset=pick(floats[0]), norm2=pick(floats[1])
    )
    return products, score

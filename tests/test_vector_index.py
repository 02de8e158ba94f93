"""The in-process vector index: a bulk load is the same index as row-by-row upserts."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from mcp_memory.core.models import Centring
from mcp_memory.storage.vectors import SPLIT_ROWS, IndexColumns, IndexRow, VectorIndex, product

DIM = 16


def _rows(count: int, seed: int = 3) -> list[IndexRow]:
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(count, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    namespaces = [None, "work", "home"]
    return [
        IndexRow(
            n=10 + 3 * i,
            id=f"m{10 + 3 * i}",
            vector=vectors[i],
            namespace=namespaces[i % 3],
            live=i % 7 != 0,
            expires_at=None if i % 5 else 1_000.0 + i,
            cjk=i % 4 == 0,
        )
        for i in range(count)
    ]


def _columns(rows: list[IndexRow]) -> IndexColumns:
    return IndexColumns(
        ns=np.array([r.n for r in rows], dtype=np.int64),
        ids=[r.id for r in rows],
        vectors=np.stack([r.vector for r in rows]),
        namespaces=[r.namespace for r in rows],
        live=np.array([r.live for r in rows]),
        expires=np.array([np.inf if r.expires_at is None else r.expires_at for r in rows]),
        cjk=np.array([r.cjk for r in rows]),
    )


def test_a_bulk_load_ranks_exactly_as_upserts_do() -> None:
    rows = _rows(300)
    one_by_one, bulk = VectorIndex(DIM), VectorIndex(DIM)
    one_by_one.upsert(rows)
    bulk.load(_columns(rows))
    assert len(bulk) == len(one_by_one) == 300
    query = rows[42].vector
    prior = (np.zeros(DIM, np.float32), np.zeros(DIM, np.float32))
    for where in (
        {"namespace": None},
        {"namespace": "work"},
        {"namespace": "home", "exact_namespace": True},
        {"namespace": "work", "include_dead": True, "include_expired": True},
    ):
        for centring in (None, Centring(query=query, prior=prior, prior_weight=8.0)):
            a = one_by_one.rank(query, limit=20, now=1_100.0, centring=centring, **where)
            b = bulk.rank(query, limit=20, now=1_100.0, centring=centring, **where)
            assert [n for n, _ in a.hits] == [n for n, _ in b.hits]
            assert np.allclose([s for _, s in a.hits], [s for _, s in b.hits], atol=1e-5)
            assert (a.visible, round(a.mean, 5)) == (b.visible, round(b.mean, 5))
    assert a.hits  # positive control: the searches found something


def test_a_loaded_index_takes_changes_and_removals() -> None:
    rows = _rows(50)
    index = VectorIndex(DIM)
    index.load(_columns(rows[:40]))
    index.upsert(rows[40:])
    index.remove([rows[0].n, rows[45].n])
    assert len(index) == 48
    found = index.search(rows[45].vector, namespace=None, limit=50, now=0.0, include_dead=True)
    assert rows[45].id not in [m for m, _ in found]
    assert index.search(rows[46].vector, namespace="work", limit=1, now=0.0)[0][0] == rows[46].id
    assert index.nbytes > 50 * DIM * 4


def test_a_batch_of_neighbour_searches_is_each_search_alone() -> None:
    """remember asks for the neighbours of a whole batch in one product: the answer per row is what
    a search for that row alone returns (live, unexpired, the namespace's own rows or with the
    principal-wide ones)."""
    index = VectorIndex(DIM)
    index.upsert(_rows(120))
    queries = np.stack([r.vector for r in _rows(9, seed=11)])
    for namespace, exact in (("work", True), ("home", False), (None, False)):
        batched = index.neighbours(queries, namespace=namespace, limit=5, now=1_050.0, exact_namespace=exact)
        alone = [index.search(q, namespace=namespace, limit=5, now=1_050.0, exact_namespace=exact) for q in queries]
        assert [[n for n, _ in row] for row in batched] == [[n for n, _ in row] for row in alone]
        assert all(len(row) == 5 for row in batched)  # positive control: there was something to find
    assert VectorIndex(DIM).neighbours(queries, namespace=None, limit=5, now=0.0) == [[]] * len(queries)


def _centred_scores(index: VectorIndex, centring: Centring) -> dict[str, float]:
    found = index.rank(centring.query, namespace="home", limit=10_000, now=0.0, centring=centring, include_dead=True)
    return dict(found.hits)


def test_centred_search_keeps_the_script_means_until_enough_rows_change() -> None:
    """A centred search measures against script means taken from the rows; a few writes (a small
    share of a large index) reuse them, new rows included, and more writes take them again."""
    rows = _rows(1_024 + 40, seed=5)
    kept, fresh = VectorIndex(DIM), VectorIndex(DIM)
    kept.load(_columns(rows[:1_024]))
    rng = np.random.default_rng(9)
    prior = (rng.normal(size=DIM).astype(np.float32) * 0.1, rng.normal(size=DIM).astype(np.float32) * 0.1)
    centring = Centring(query=rows[7].vector, prior=prior, prior_weight=8.0)
    _centred_scores(kept, centring)  # takes the means
    kept.upsert(rows[1_024:1_028])  # 4 rows of 1,028: within the drift allowed (1/256)
    fresh.load(_columns(rows[:1_028]))
    near, exact = _centred_scores(kept, centring), _centred_scores(fresh, centring)
    assert near.keys() == exact.keys()
    assert rows[1_026].id in near  # the new rows are searched
    gaps = np.array([near[n] - exact[n] for n in exact])
    assert 0 < np.abs(gaps).max() < 0.01  # the kept means: close, and not retaken
    kept.upsert(rows[1_028:1_040])  # 16 changed rows: more than 1/256 of the index
    fresh = VectorIndex(DIM)
    fresh.load(_columns(rows[:1_040]))
    near, exact = _centred_scores(kept, centring), _centred_scores(fresh, centring)
    assert np.allclose([near[n] for n in exact], list(exact.values()), atol=1e-5)


def test_a_centred_search_takes_the_means_again_for_another_prior_and_after_removals() -> None:
    rows = _rows(600, seed=8)
    index = VectorIndex(DIM)
    index.load(_columns(rows))
    zero = (np.zeros(DIM, np.float32), np.zeros(DIM, np.float32))
    other = (np.full(DIM, 0.2, np.float32), np.full(DIM, -0.2, np.float32))
    for prior in (zero, other):
        centring = Centring(query=rows[3].vector, prior=prior, prior_weight=50.0)
        fresh = VectorIndex(DIM)
        fresh.load(_columns(rows))
        got, want = _centred_scores(index, centring), _centred_scores(fresh, centring)
        assert np.allclose([got[n] for n in want], list(want.values()), atol=1e-5)
    index.remove([rows[1].n])  # one Latin row of 450 (allowed: (450 + 50) / 256); the last row moves into its place
    fresh = VectorIndex(DIM)
    fresh.load(_columns([r for r in rows if r is not rows[1]]))
    got, want = _centred_scores(index, centring), _centred_scores(fresh, centring)
    assert got.keys() == want.keys()
    assert rows[1].id not in got
    assert rows[-1].id in got
    gaps = np.array([got[m] - want[m] for m in want])
    assert 0 < np.abs(gaps).max() < 0.01  # kept means, and each row's product moved with it
    index.remove([r.n for r in rows[2:8]])  # more Latin and CJK rows than allowed: taken again
    fresh = VectorIndex(DIM)
    fresh.load(_columns([r for i, r in enumerate(rows) if i != 1 and not 2 <= i < 8]))
    got, want = _centred_scores(index, centring), _centred_scores(fresh, centring)
    assert got.keys() == want.keys()
    assert np.allclose([got[m] for m in want], list(want.values()), atol=1e-5)


def test_a_script_with_few_rows_takes_its_mean_again_at_once() -> None:
    """The allowance is each script's: a large English store that starts taking Chinese memories
    does not keep a Chinese mean taken from one of them."""
    rows = [replace(r, cjk=False) for r in _rows(3_000, seed=11)]
    chinese = [replace(r, n=100_000 + i, id=f"zh{i}", cjk=True) for i, r in enumerate(_rows(12, seed=12))]
    index = VectorIndex(DIM)
    index.load(_columns([*rows, chinese[0]]))
    prior = (np.zeros(DIM, np.float32), np.zeros(DIM, np.float32))
    centring = Centring(query=rows[5].vector, prior=prior, prior_weight=8.0)
    _centred_scores(index, centring)  # takes the means: the Chinese one from a single row
    index.upsert(chinese[1:])  # 11 of 3,012 rows, but most of the Chinese ones
    fresh = VectorIndex(DIM)
    fresh.load(_columns([*rows, *chinese]))
    got, want = _centred_scores(index, centring), _centred_scores(fresh, centring)
    assert np.allclose([got[m] for m in want], list(want.values()), atol=1e-5)


def test_a_large_product_split_in_two_is_the_whole_product() -> None:
    rng = np.random.default_rng(5)
    for rows in (SPLIT_ROWS - 1, SPLIT_ROWS, SPLIT_ROWS + 7):  # below the split, at it, odd halves
        matrix = rng.normal(size=(rows, DIM)).astype(np.float32)
        vector = rng.normal(size=DIM).astype(np.float32)
        got = product(matrix, vector)
        assert got.shape == (rows,)
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, matrix @ vector, rtol=1e-5, atol=1e-5)

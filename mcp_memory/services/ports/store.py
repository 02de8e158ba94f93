"""The control role, and ``MemoryStore``: every role a record store plays, in one protocol."""

from __future__ import annotations

from collections.abc import Hashable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Protocol

from mcp_memory.core.models import Scope
from mcp_memory.services.ports.lifecycle import LifecycleRows
from mcp_memory.services.ports.memories import MemoryRows
from mcp_memory.services.ports.search import MemorySearch
from mcp_memory.services.ports.views import BrowseRows, CountRows, GoldenRows


class StoreControl(Protocol):
    """The store as a whole rather than its rows: where a principal's data is and whether it moved,
    keeping it open during a call, one transaction per call, what it holds, and erasing it."""

    erasure_leaves: str
    """What ``erase_principal`` leaves behind, in a clause for forget_user's receipt."""

    async def change_mark(self, scope: Scope) -> int:
        """A number that moves with every write of any process to the principal's memories."""
        ...

    def path_for(self, scope: Scope) -> Path:
        """Where the principal's data is (a file; PostgreSQL: its partitions' key), for doctor and stats."""
        ...

    def at_rest(self, scope: Scope, now: float) -> Hashable | None:
        """A description of everything stored for the principal, read without opening it, when it
        has not been written for a moment; None while it may be moving, or where a backend cannot
        tell (PostgreSQL). Equal descriptions mean nothing was written in between."""
        ...

    def lease(self, principal: str) -> AbstractAsyncContextManager[None]:
        """Keep ``principal``'s file open while a call runs (a session between calls holds nothing)."""
        ...

    def pool_figures(self) -> dict[str, int]:
        """What the store holds open now (files or connections, vector indexes), for the metrics."""
        ...

    def one_transaction(self, scope: Scope, *, write: bool = False) -> AbstractAsyncContextManager[None]:
        """The store calls made inside the block read (and write) in one transaction where the
        backend has them (PostgreSQL); ``write``: the call always writes."""
        ...

    async def count(self, scope: Scope) -> dict[str, int]:
        """Rows of the principal per table that grows with the memories (doctor)."""
        ...

    async def erase_principal(self, scope: Scope, now: float) -> dict[str, int]:
        """Delete everything the principal has and keep only a content-free record that it happened,
        leaving as little of the old bytes as the backend can reach (``erasure_leaves`` says what
        stays); the vector engine's points go last. Other processes see the deletions through the
        change log. Returns the counts per table."""
        ...


class MemoryStore(MemoryRows, MemorySearch, StoreControl, Protocol):
    """The system of record for memories, with its vector search, one principal at a time: the
    memories, search and control roles, and the rows of the passes and views as its parts."""

    @property
    def lifecycle(self) -> LifecycleRows: ...

    @property
    def counts(self) -> CountRows: ...

    @property
    def browse(self) -> BrowseRows: ...

    @property
    def golden(self) -> GoldenRows: ...

"""What the services need from a backend, as role protocols (ADR 26).

The composition root (``compose.open_runtime``) builds a backend's objects and hands them to the
services, which never name a backend class. A record store plays three roles and has four parts:

- ``MemoryRows`` (memories.py): the records, read by recall and written by remember, pin, forget;
- ``MemorySearch`` (search.py): the vector engine (``VectorSearch``), the keyword index, the second
  model's vectors and the embedding model they come from;
- ``StoreControl`` (store.py): the store as a whole: where, whether it moved, leases, one
  transaction per call, counts, erasure;
- its parts ``store.lifecycle`` (``LifecycleRows``, lifecycle.py), ``store.counts``,
  ``store.browse`` and ``store.golden`` (``CountRows``, ``BrowseRows``, ``GoldenRows``, views.py).

``MemoryStore`` (store.py) is all of them; a service that needs one role takes that role. The task
role is ``services.task_ports.TaskRows``; what the processes of a deployment share (pass leases,
tokens, sign-ins, confirmation codes) is ``services.control_ports``. The docstrings here are the
contract: a store's own docstring says only what is particular to it. ADR 13 lists what every
method must guarantee beyond its signature.
"""

from mcp_memory.services.ports.lifecycle import LifecycleRows
from mcp_memory.services.ports.memories import MemoryRows
from mcp_memory.services.ports.search import MemorySearch, VectorSearch
from mcp_memory.services.ports.store import MemoryStore, StoreControl
from mcp_memory.services.ports.views import BrowseRows, CountRows, GoldenRows

__all__ = [
    "BrowseRows",
    "CountRows",
    "GoldenRows",
    "LifecycleRows",
    "MemoryRows",
    "MemorySearch",
    "MemoryStore",
    "StoreControl",
    "VectorSearch",
]

"""The one exception tree of mcp-memory.

    MemoryServerError
     +-- InvalidInputError      the caller can fix the call: names the field, the limit and the fix
     |    +-- LimitExceededError    a configured limit (size, batch, budget) was exceeded
     +-- NotFoundError          no such id in the caller's scope (another principal's id looks the same)
     +-- ConflictError          the state moved under the caller (a stale expected head)
     +-- AccessDeniedError      the request carries no identity that may do this
     +-- MemoryOffError         the kill switch is off for this scope: memory is neither read nor written
     +-- UpstreamError          an external service (embedding endpoint, LLM) failed
     |    +-- LlmPausedError        the LLM was not called: its budget is spent or its breaker is open
     +-- StorageError           the data directory cannot be used as asked
          +-- OutOfFilesError       the process has no file descriptor left now: retry shortly
          +-- SchemaVersionError    the file was written by a newer mcp-memory
          +-- ModelMismatchError    the store's vectors come from another embedding model

Tool adapters turn every one of these into an ``is_error`` tool result carrying the message;
anything else is a bug and is reported as a crash. Driver errors (sqlite3, httpx) are
translated once, where the driver is called.
"""

from __future__ import annotations


class MemoryServerError(Exception):
    """Base of every error mcp-memory raises on purpose."""


class InvalidInputError(MemoryServerError):
    """An argument is wrong; ``field`` names it."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        super().__init__(f"{field}: {problem}")


class LimitExceededError(InvalidInputError):
    """A configured limit was exceeded; the message names the limit and its value."""

    def __init__(self, field: str, problem: str, *, limit_name: str, limit: int) -> None:
        self.limit_name = limit_name
        self.limit = limit
        super().__init__(field, f"{problem} (limit {limit_name} = {limit})")


class NotFoundError(MemoryServerError):
    """No object by that id exists in the caller's scope."""

    def __init__(self, what: str, ident: str, more: str | None = None) -> None:
        self.what = what
        self.ident = ident
        super().__init__(f"No {what} by the id of {ident!r} was found" + (f": {more}" if more else ""))


class ConflictError(MemoryServerError):
    """The stored state changed since the caller last saw it."""


class AccessDeniedError(MemoryServerError):
    """The request has no identity (no verified token) or may not act as asked."""


class UpstreamError(MemoryServerError):
    """An external service failed or answered with something unusable."""


class LlmPausedError(UpstreamError):
    """The LLM was not called (its budget for today is used up, or it is paused after failures):
    the work waits; it is not the work's fault."""


class StorageError(MemoryServerError):
    """The store cannot be opened, read or written as asked."""


class OutOfFilesError(StorageError):
    """The process (or the system) has no file descriptor left to open a principal's file. A state,
    not a fault of the call: the same call succeeds once other requests finish."""

    retry_after = 2


class SchemaVersionError(StorageError):
    """The data file was written by a newer mcp-memory than this one."""


class ModelMismatchError(StorageError):
    """The vectors in the store were made by a different embedding model."""


class MemoryOffError(MemoryServerError):
    """The kill switch is off for the caller's scope: nothing is read or written as memory."""


class StaleHeadError(ConflictError):
    """The head moved since the caller read it."""

    def __init__(self, task_id: str, current: int, expected: int | None, call: str = "checkpoint") -> None:
        self.current = current
        self.expected = expected
        super().__init__(
            f"task {task_id!r} moved to head {current} since you saw head {expected}; "
            f"call resume to see the current state, then call {call} again with expected_head set to it"
        )

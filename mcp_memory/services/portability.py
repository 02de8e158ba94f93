"""Export, import and re-embedding of a principal's memories.

Export writes one JSON object per line (every field, occurrence ids included, no vectors);
import re-embeds each text with the configured model and keeps ids, times and namespaces, so a
round trip loses nothing and an already-present id is skipped.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from dataclasses import asdict
from typing import Any

import numpy as np
import orjson

from mcp_memory.embed.loader import Embedder
from mcp_memory.errors import InvalidInputError
from mcp_memory.ids import new_id
from mcp_memory.models import MemoryRecord, NewMemory, NewOccurrence, Provenance, Scope
from mcp_memory.redact import redact, redact_value
from mcp_memory.storage.sqlite import SqliteStore
from mcp_memory.text import TextProblem, check_text, segment_for_index

_FIELDS = set(MemoryRecord.__dataclass_fields__) - {"rowid", "occurrence_ids", "provenance"}


async def export_lines(store: SqliteStore, scope: Scope) -> AsyncIterator[bytes]:
    for record in await store.export_rows(scope):
        row: dict[str, Any] = asdict(record)
        row.pop("rowid")
        yield orjson.dumps(row) + b"\n"


def _parse(number: int, line: bytes) -> MemoryRecord:
    try:
        row = orjson.loads(line)
        provenance = Provenance(**(row.pop("provenance", None) or {}))
        row.pop("occurrence_ids", None)
        unknown = set(row) - _FIELDS
        if unknown:
            raise ValueError(f"unknown fields {sorted(unknown)}")
        record = MemoryRecord(**row, provenance=provenance)
        check_text(record.content)
    except (orjson.JSONDecodeError, TypeError, ValueError, TextProblem) as exc:
        raise InvalidInputError(f"line {number}", f"is not an exported memory: {exc}") from None
    record.content = redact(record.content)
    record.metadata = redact_value(record.metadata)
    record.tags = [redact(t) for t in record.tags]
    return record


async def import_lines(
    store: SqliteStore, embedder: Embedder, scope: Scope, lines: Iterable[bytes], batch: int = 64
) -> tuple[int, int]:
    """Insert exported memories, re-embedded; returns (imported, skipped as already present)."""
    records = [_parse(i, line) for i, line in enumerate(lines, start=1) if line.strip()]
    model = await embedder.ready()
    await store.check_model(scope, model.model_id, model.dim)
    present = await store.existing_ids(scope, [r.id for r in records])
    fresh = [r for r in records if r.id not in present]
    for start in range(0, len(fresh), batch):
        chunk = fresh[start : start + batch]
        vectors = await embedder.passages([r.content for r in chunk])
        inserts = []
        for record, vector in zip(chunk, vectors, strict=True):
            occurrence = NewOccurrence(
                id=new_id(),
                session_key=record.session_key,
                occurred_at=record.occurred_at,
                metadata={"imported": True},
                provenance=record.provenance,
            )
            # The namespace travels with the record: an import restores the principal's whole store.
            inserts.append(
                NewMemory(
                    record=record,
                    vector=np.asarray(vector, np.float32).tobytes(),
                    segmented=segment_for_index(record.content),
                    occurrence=occurrence,
                )
            )
        await store.apply(Scope(scope.principal, None), inserts, [])
    return len(fresh), len(present)


async def reindex(store: SqliteStore, embedder: Embedder, scope: Scope, batch: int = 64) -> int:
    """Re-embed every memory of the principal with the configured model and record that model."""
    model = await embedder.ready()
    rows = await store.all_ids(scope)
    for start in range(0, len(rows), batch):
        chunk = rows[start : start + batch]
        vectors = await embedder.passages([content for _, content in chunk])
        await store.replace_vectors(
            scope,
            [(n, np.asarray(v, np.float32).tobytes()) for (n, _), v in zip(chunk, vectors, strict=True)],
        )
    await store.set_model(scope, model.model_id, model.dim)
    return len(rows)

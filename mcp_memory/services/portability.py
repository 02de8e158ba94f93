"""Export, import and re-embedding of a principal's memories.

Export writes one JSON object per line (every field, occurrence ids included, no vectors);
import re-embeds each text with the configured model and keeps ids, times and namespaces, so a
round trip loses nothing and an already-present id is skipped.

Lineage travels on the lines: a summary's or fact's ``source_ids``, each side's ``conflicts_with``,
and ``compression_failures`` when a memory resisted compression (an undone summary marks its
sources so; without the mark the next pass would make again what the user undid). All three are
optional, so files written before them still import. Import checks every id they name before
writing anything: one neither in the file nor in the store is refused with its line (a dangling
link would be a summary that cannot be undone), and links are written after every row, in one
transaction, so the order of the lines does not matter. Links of lines already present are written
too: importing a file again completes what an interrupted or older import left out.

Golden queries follow the memories, one line each (``{"golden_query": {...}}``), so an export
restores the questions the lifecycle passes are checked against; one whose memory is neither in the
file nor in the store is refused like a dangling link, and one already present is skipped.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import AsyncIterator, Iterable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import orjson
from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from mcp_memory.config import Limits
from mcp_memory.core import models
from mcp_memory.core.errors import InvalidInputError
from mcp_memory.core.ids import new_id
from mcp_memory.core.models import GoldenRow, MemoryRecord, NewMemory, NewOccurrence, Provenance, Scope, SecondVector
from mcp_memory.core.text import TextProblem, check_text, segment_for_index
from mcp_memory.embed.loader import Embedder
from mcp_memory.services import incoming, second
from mcp_memory.services.ports import MemoryStore

_TIMES = {"occurred_at", "created_at", "last_accessed_at", "valid_from", "valid_to", "expires_at", "last_seen_at"}


def _strict(cls: type, skip: set[str]) -> type[BaseModel]:
    """A pydantic model of dataclass ``cls``'s fields (but ``skip``), strict: what a line must hold,
    type for type, so a date string where seconds belong never reaches the store."""
    hints = typing.get_type_hints(cls, vars(models))
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        if f.default is not dataclasses.MISSING:
            fields[f.name] = (hints[f.name], f.default)
        elif f.default_factory is not dataclasses.MISSING:
            fields[f.name] = (hints[f.name], f.default_factory())
        else:
            fields[f.name] = (hints[f.name], ...)
    return create_model(f"Exported{cls.__name__}", __config__=ConfigDict(strict=True, extra="forbid"), **fields)


_ROW = _strict(MemoryRecord, {"written", "occurrence_ids", "provenance"})
_PROVENANCE = _strict(Provenance, set())


def _problem(exc: ValidationError, prefix: str = "") -> str:
    """The first thing wrong with a line, in words: the field, what it must be, what it held."""
    error = exc.errors()[0]
    name = prefix + ".".join(str(part) for part in error["loc"])
    if error["type"] == "extra_forbidden":
        return f"unknown field {name!r}"
    if error["type"] == "missing":
        return f"{name} is missing"
    hint = " (seconds since 1970, as `export` writes them)" if name in _TIMES else ""
    return f"{name}: {error['msg'].lower()}{hint}, not {orjson.dumps(error['input']).decode()[:60]}"


def _record(row: dict[str, Any], provenance: object) -> MemoryRecord:
    """The record a line describes, every field of the type the store keeps, within its range."""
    try:
        fields = _ROW.model_validate(row).model_dump()
    except ValidationError as exc:
        raise ValueError(_problem(exc)) from None
    try:
        origin = Provenance(**_PROVENANCE.model_validate(provenance or {}).model_dump())
    except ValidationError as exc:
        raise ValueError(_problem(exc, "provenance.")) from None
    if not fields["id"].strip():
        raise ValueError("id is empty")
    if not 0.0 <= fields["importance"] <= 1.0:
        raise ValueError(f"importance is {fields['importance']}; it is between 0 and 1")
    for name in ("access_count", "level"):
        if fields[name] < 0:
            raise ValueError(f"{name} is {fields[name]}; it is 0 or more")
    return MemoryRecord(**fields, provenance=origin)


async def export_lines(store: MemoryStore, scope: Scope) -> AsyncIterator[bytes]:
    failures = await store.lifecycle.compression_failures(scope)
    for record in await store.export_rows(scope):
        row: dict[str, Any] = asdict(record)
        row.pop("written")  # an order of this store, meaningless in another
        if record.id in failures:  # only then: files without it stay readable by older versions
            row["compression_failures"] = failures[record.id]
        yield orjson.dumps(row) + b"\n"
    for golden in await store.golden.queries(Scope(scope.principal)):  # every namespace, as the rows
        yield orjson.dumps({"golden_query": asdict(golden)}) + b"\n"


@dataclass(frozen=True, slots=True)
class _Golden:
    number: int
    row: GoldenRow


def _golden(number: int, value: object) -> _Golden:
    """A golden query line's row, its question redacted as a memory's text is."""
    try:
        if not isinstance(value, dict):
            raise TypeError("golden_query must be an object")
        row = GoldenRow(**value)
        for name in ("id", "query", "memory_id"):
            if not isinstance(getattr(row, name), str) or not getattr(row, name):
                raise ValueError(f"golden_query.{name} must be a non-empty string")
        if row.namespace is not None and not isinstance(row.namespace, str):
            raise ValueError("golden_query.namespace must be a string or null")
        if isinstance(row.created_at, bool) or not isinstance(row.created_at, int | float):
            raise ValueError("golden_query.created_at must be a time in seconds")
        check_text(row.query)
    except (TypeError, ValueError, TextProblem) as exc:
        raise InvalidInputError(f"line {number}", f"is not an exported golden query: {exc}") from None
    return _Golden(
        number, GoldenRow(row.id, row.namespace, incoming.redacted(row.query), row.memory_id, float(row.created_at))
    )


@dataclass(frozen=True, slots=True)
class _Line:
    number: int
    record: MemoryRecord
    compression_failures: int


def _ids(field: str, value: object) -> None:
    if not isinstance(value, list) or not all(isinstance(i, str) and i for i in value):
        raise ValueError(f"{field} must be a list of memory ids")


def _parse(number: int, line: bytes, max_bytes: int) -> _Line | _Golden:
    try:
        row = orjson.loads(line)
        if not isinstance(row, dict):
            raise ValueError(
                f"a line of an export is one JSON object (a memory), not {type(row).__name__}; "
                "for a mem0 or server-memory file use `import --from mem0` or `--from server-memory`"
            )
        if set(row) == {"golden_query"}:
            return _golden(number, row["golden_query"])
        provenance = row.pop("provenance", None)
        row.pop("occurrence_ids", None)
        failures = row.pop("compression_failures", 0)
        if isinstance(failures, bool) or not isinstance(failures, int) or failures < 0:
            raise ValueError("compression_failures must be a count (an integer, 0 or more)")
        record = _record(row, provenance)
        _ids("source_ids", record.source_ids)
        _ids("conflicts_with", record.conflicts_with)
        check_text(record.content)
        if len(record.content.encode()) > max_bytes:
            raise ValueError(
                f"content is {len(record.content.encode())} bytes, over limits.max_content_bytes ({max_bytes}); "
                "split it into smaller memories, or raise the limit in the configuration"
            )
    except orjson.JSONDecodeError as exc:
        raise InvalidInputError(
            f"line {number}",
            f"is not an exported memory: not one JSON object on the line ({exc}); an export holds one memory "
            "a line (JSON lines); for a mem0 file use `import --from mem0`",
        ) from None
    except (TypeError, ValueError, TextProblem) as exc:
        raise InvalidInputError(f"line {number}", f"is not an exported memory: {exc}") from None
    record.content = incoming.redacted(record.content)
    record.metadata = incoming.redacted_value(record.metadata)
    record.tags = incoming.redacted_all(record.tags)
    return _Line(number, record, failures)


def _replacer(line: _Line) -> list[str]:
    return [line.record.superseded_by] if line.record.superseded_by else []


async def _check_links(store: MemoryStore, scope: Scope, lines: list[_Line], goldens: list[_Golden]) -> None:
    """Refuse, before anything is written, a line naming a memory neither in the file nor in the store."""
    first_line: dict[str, int] = {}
    for line in lines:
        if (earlier := first_line.setdefault(line.record.id, line.number)) != line.number:
            raise InvalidInputError(
                f"line {line.number}",
                f"repeats the id {line.record.id!r} of line {earlier}; an export holds each memory once: "
                "remove one of the two lines (or give one a new id)",
            )
    in_file = set(first_line)
    named = {i for line in lines for i in (*line.record.source_ids, *line.record.conflicts_with, *_replacer(line))}
    named = (named | {g.row.memory_id for g in goldens}) - in_file
    known = in_file | (await store.existing_ids(scope, sorted(named)) if named else set())
    for golden in goldens:
        if golden.row.memory_id not in known:
            raise InvalidInputError(
                f"line {golden.number}",
                f"golden query {golden.row.id!r} names memory {golden.row.memory_id!r}, which is neither in the "
                "file nor in the store; export the whole store again, or remove that line",
            )
    for line in lines:
        named_by = (
            ("source_ids", line.record.source_ids),
            ("conflicts_with", line.record.conflicts_with),
            ("superseded_by", _replacer(line)),
        )
        for field, ids in named_by:
            for missing in (i for i in ids if i not in known):
                fix = f"set {field} to null" if field == "superseded_by" else f"remove {missing!r} from {field}"
                raise InvalidInputError(
                    f"line {line.number}",
                    f"{field} names memory {missing!r}, which is neither in the file nor in the store; export the "
                    f"whole store again, or {fix} on that line",
                )


async def import_lines(
    store: MemoryStore,
    embedder: Embedder,
    scope: Scope,
    lines: Iterable[bytes],
    batch: int = 64,
    max_bytes: int = Limits().max_content_bytes,
) -> tuple[int, int]:
    """Insert exported memories, re-embedded; returns (imported, skipped as already present). A line
    whose memory is over ``max_bytes`` is refused as ``remember`` would refuse it."""
    read = [_parse(i, line, max_bytes) for i, line in enumerate(lines, start=1) if line.strip()]
    parsed = [line for line in read if isinstance(line, _Line)]
    goldens = [line for line in read if isinstance(line, _Golden)]
    records = [line.record for line in parsed]
    await _check_links(store, scope, parsed, goldens)
    model = await embedder.ready()
    await store.check_model(scope, model.model_id, model.dim)
    present = await store.existing_ids(scope, [r.id for r in records])
    fresh = [r for r in records if r.id not in present]
    # Decided once, over everything imported: a chunk read before the other script arrives gets its too.
    mixed = embedder.second is not None and await second.mixes(store, scope, model.dim, [r.content for r in fresh])
    for start in range(0, len(fresh), batch):
        chunk = fresh[start : start + batch]
        texts = [r.content for r in chunk]
        vectors = await embedder.passages(texts, owner=scope.principal)
        made = await second.passages(embedder.second if mixed else None, texts, scope.principal)
        seconds: list[SecondVector | None] = list(made) if made else [None] * len(chunk)
        inserts = []
        for record, vector, other in zip(chunk, vectors, seconds, strict=True):
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
                    vector=np.asarray(vector, np.float32),
                    segmented=segment_for_index(record.content),
                    occurrence=occurrence,
                    second=other,
                )
            )
        await store.apply(Scope(scope.principal, None), inserts, [])
    # After every row, whatever batch a summary and its sources came in.
    await store.lifecycle.restore_lineage(
        scope,
        sources=[(r.id, source) for r in records for source in r.source_ids],
        conflicts=[(r.id, other) for r in records for other in r.conflicts_with],
        failures=[(line.record.id, line.compression_failures) for line in parsed if line.compression_failures],
    )
    held = {row.id for row in await store.golden.queries(Scope(scope.principal))}
    for golden in (g.row for g in goldens if g.row.id not in held):
        await store.golden.add(Scope(scope.principal, golden.namespace), golden)
    return len(fresh), len(present)


async def reindex(store: MemoryStore, embedder: Embedder, scope: Scope, batch: int = 64) -> int:
    """Re-embed every memory of the principal with the configured model and record that model."""
    model = await embedder.ready()
    rows = await store.all_ids(scope)
    mixed = embedder.second is not None and all(second.scripts_of([c for _, c in rows]))
    for start in range(0, len(rows), batch):
        chunk = rows[start : start + batch]
        vectors = await embedder.passages([content for _, content in chunk], owner=scope.principal)
        await store.replace_vectors(
            scope,
            [(n, np.asarray(v, np.float32)) for (n, _), v in zip(chunk, vectors, strict=True)],
        )
        made = await second.passages(embedder.second if mixed else None, [c for _, c in chunk], scope.principal)
        if made:  # the second model's too, from scratch: reindex is the way to a new second model
            pairs = [(n, v.vector) for (n, _), v in zip(chunk, made, strict=True)]
            await store.put_second_vectors(scope, made[0].model_id, pairs, first=start == 0)
    await store.set_model(scope, model.model_id, model.dim)
    return len(rows)

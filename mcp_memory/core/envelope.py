"""The durable checkpoint format: a versioned, checksummed envelope.

    MAGIC  b"MCPMEM-CHECKPOINT\\n"
    header one line of JSON: {"format_version", "sha256", "structured_bytes", "snapshot_bytes", "snapshot_codec"}
    payload structured JSON (orjson) followed by the snapshot, zlib-compressed

The checksum covers the payload. A file from a newer format is refused naming both versions;
older versions are upgraded step by step through ``MIGRATORS`` (version n -> n + 1).
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from mcp_memory.core.errors import StorageError

MAGIC = b"MCPMEM-CHECKPOINT\n"
FORMAT_VERSION = 1

# MIGRATORS[n] turns the structured part of a version-n envelope into version n + 1.
MIGRATORS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}


class CorruptCheckpointError(StorageError):
    """The stored bytes do not match their checksum or cannot be parsed."""


class CheckpointFormatError(StorageError):
    """The envelope was written by a newer format than this code reads."""


@dataclass(frozen=True, slots=True)
class Envelope:
    structured: dict[str, Any]
    snapshot: str
    checksum: str
    format_version: int
    size: int


def compress_snapshot(snapshot: str) -> bytes:
    return zlib.compress(snapshot.encode("utf-8"), 6)


def encode(
    structured: dict[str, Any], snapshot: str, *, version: int | None = None, packed: bytes | None = None
) -> tuple[Envelope, bytes]:
    """The envelope's description and its bytes (the current format unless ``version`` is given).

    ``packed`` is ``compress_snapshot(snapshot)`` when the caller already has it (a checkpoint and
    the head it becomes share one snapshot).
    """
    version = FORMAT_VERSION if version is None else version
    body = orjson.dumps(structured)
    if packed is None:
        packed = compress_snapshot(snapshot)
    checksum = hashlib.sha256(body + packed).hexdigest()
    header = orjson.dumps(
        {
            "format_version": version,
            "sha256": checksum,
            "structured_bytes": len(body),
            "snapshot_bytes": len(packed),
            "snapshot_codec": "zlib",
        }
    )
    raw = MAGIC + header + b"\n" + body + packed
    return Envelope(structured, snapshot, checksum, version, len(raw)), raw


def unpack(raw: bytes) -> Envelope:
    """Parse, verify and upgrade an envelope; raises CorruptCheckpointError or CheckpointFormatError."""
    if not raw.startswith(MAGIC):
        raise CorruptCheckpointError("the checkpoint does not start with the envelope marker")
    try:
        header_end = raw.index(b"\n", len(MAGIC))
        header = orjson.loads(raw[len(MAGIC) : header_end])
        version = int(header["format_version"])
        structured_len = int(header["structured_bytes"])
        snapshot_len = int(header["snapshot_bytes"])
        checksum = str(header["sha256"])
    except (ValueError, KeyError, TypeError, orjson.JSONDecodeError) as exc:
        raise CorruptCheckpointError(f"the checkpoint header is unreadable: {exc}") from None
    if version > FORMAT_VERSION:
        raise CheckpointFormatError(
            f"the checkpoint has format version {version}, newer than this mcp-memory reads "
            f"(format version {FORMAT_VERSION}); upgrade mcp-memory"
        )
    payload = raw[header_end + 1 :]
    if len(payload) != structured_len + snapshot_len or hashlib.sha256(payload).hexdigest() != checksum:
        raise CorruptCheckpointError("the checkpoint's bytes do not match its SHA-256 checksum")
    try:
        structured = orjson.loads(payload[:structured_len])
        snapshot = zlib.decompress(payload[structured_len:]).decode("utf-8")
    except (orjson.JSONDecodeError, zlib.error, UnicodeDecodeError) as exc:
        raise CorruptCheckpointError(f"the checkpoint payload is unreadable: {exc}") from None
    while version < FORMAT_VERSION:
        migrate = MIGRATORS.get(version)
        if migrate is None:
            raise CheckpointFormatError(f"no migrator from checkpoint format version {version} to {version + 1}")
        structured = migrate(structured)
        version += 1
    return Envelope(structured, snapshot, checksum, version, len(raw))

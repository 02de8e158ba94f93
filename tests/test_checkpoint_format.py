"""The durable checkpoint envelope: golden v1 bytes, corruption, newer versions, migrators."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mcp_memory.core import envelope
from mcp_memory.core.envelope import CheckpointFormatError, CorruptCheckpointError, encode, unpack
from mcp_memory.core.task_model import TaskHead

GOLDEN = Path(__file__).parent / "fixtures" / "checkpoint_v1.bin"


def test_the_golden_v1_envelope_reads_back() -> None:
    read = unpack(GOLDEN.read_bytes())
    assert read.format_version == 1
    assert read.checksum == "aa096a62cda7e948b21f360db887e24ae53f937604366695172b6934379106f7"
    assert read.snapshot == "Working notes: 快照 snapshot text.\n" * 3
    assert read.structured["task"]["task_id"] == "golden-task"
    assert read.structured["seq"] == 3
    head = TaskHead.model_validate({**read.structured["head"], "snapshot": read.snapshot})
    assert head.tree is not None
    assert head.tree.children[0].title == "第一步"
    assert head.pending_actions[0].external is True
    assert head.variables == {"branch": "main", "count": 3}
    assert head.iterations == 7


def test_encoding_is_stable_for_the_golden_content() -> None:
    read = unpack(GOLDEN.read_bytes())
    _, raw = encode(read.structured, read.snapshot)
    assert raw == GOLDEN.read_bytes()


@pytest.mark.parametrize("offset", [40, 200, 600, -10])
def test_a_flipped_byte_is_detected(offset: int) -> None:
    raw = bytearray(GOLDEN.read_bytes())
    raw[offset] ^= 0x01
    with pytest.raises(CorruptCheckpointError):
        unpack(bytes(raw))


def test_a_truncated_envelope_is_detected() -> None:
    with pytest.raises(CorruptCheckpointError):
        unpack(GOLDEN.read_bytes()[:-5])


def test_a_newer_format_is_refused_naming_both_versions() -> None:
    _, raw = encode({"head": {}}, "", version=7)
    with pytest.raises(CheckpointFormatError, match=r"format version 7.*format version 1"):
        unpack(raw)


def test_older_formats_upgrade_through_the_migrator_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def v1_to_v2(structured: dict[str, Any]) -> dict[str, Any]:
        calls.append(1)
        return {**structured, "upgraded": True}

    monkeypatch.setattr(envelope, "FORMAT_VERSION", 2)
    monkeypatch.setitem(envelope.MIGRATORS, 1, v1_to_v2)
    read = unpack(GOLDEN.read_bytes())
    assert calls == [1]
    assert read.format_version == 2
    assert read.structured["upgraded"] is True
    assert read.structured["task"]["task_id"] == "golden-task"


def test_a_missing_migrator_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(envelope, "FORMAT_VERSION", 3)
    monkeypatch.setitem(envelope.MIGRATORS, 1, lambda s: s)
    with pytest.raises(CheckpointFormatError, match="no migrator from checkpoint format version 2 to 3"):
        unpack(GOLDEN.read_bytes())

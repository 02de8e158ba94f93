"""Recall's second opinion (ADR 14): in a store that mixes scripts, a second embedding model
reorders the first candidates.

In a store that mixes English and Chinese, multilingual-e5-small's language component outweighs
meaning even after centring (ADR 10), and a small model misses paraphrases of its own ("their
command interpreter" for "User runs nushell"). USE-multilingual, trained otherwise, misses others.
Beside e5, each memory also keeps its USE vector; in a mixed store recall reads those of its first
candidates and adds how many standard deviations USE puts each above the others, so two models that
agree lift a memory and a memory only one of them favours keeps its place. In a store of one script
e5 alone ranks better (LoCoMo's long English turns), so it is not asked there, and a process loads
the second model only once it meets a store that mixes scripts. The opinion never adds candidates,
and a memory without a second vector (stored before, or by older code) keeps the first model's
score.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mcp_memory.core.errors import UpstreamError
from mcp_memory.core.models import Scope, SecondVector
from mcp_memory.core.text import script
from mcp_memory.embed.loader import Embedder
from mcp_memory.services.ports import MemorySearch, MemoryStore

if TYPE_CHECKING:
    from mcp_memory.core.models import Vector

log = logging.getLogger(__name__)

_MIN_SPREAD = 1e-6


@dataclass(frozen=True)
class Question:
    """The question as the second model reads it, its script's mean question taken out."""

    model_id: str
    vector: Vector


async def _model_id(embedder: Embedder) -> str | None:
    try:
        return (await embedder.ready()).model_id
    except UpstreamError as exc:
        log.warning("no second opinion in recall: %s", exc)
        return None


async def question(embedder: Embedder | None, words: str, owner: str, script: int) -> Question | None:
    """The second model's vector of ``words`` (``script`` 0 Latin, 1 CJK), or None without one. A
    model not loaded yet starts loading and is not waited for: this recall goes without."""
    import numpy as np

    if embedder is None:
        return None
    if not embedder.loaded:
        embedder.start()
        return None
    if (model_id := await _model_id(embedder)) is None:
        return None
    vector = await embedder.query(words, owner=owner)
    means = await embedder.language_means()
    if means is not None:
        shifted = vector - means.query[script]
        norm = float(np.linalg.norm(shifted))
        vector = shifted / norm if norm > _MIN_SPREAD else vector
    return Question(model_id, vector)


async def question_for(
    store: MemorySearch, embedder: Embedder | None, scope: Scope, dim: int, words: str
) -> Question | None:
    """The second model's vector of ``words`` when the principal's store mixes scripts, else None:
    asked while the first model reads the question, so that recall does not wait for the two in turn."""
    if embedder is None or not await mixes(store, scope, dim, []):
        return None
    return await question(embedder, words, scope.principal, script(words))


def scripts_of(texts: Sequence[str], latin: bool = False, cjk: bool = False) -> tuple[bool, bool]:
    """Whether ``texts`` (with what is already known) hold Latin-script ones, and CJK ones."""
    found = {script(text) for text in texts}
    return latin or 0 in found, cjk or 1 in found


async def mixes(store: MemorySearch, scope: Scope, dim: int, texts: Sequence[str]) -> bool:
    """Whether the principal's memories, with ``texts``, hold both scripts: only then is the second
    model asked, so a store of one language never loads it."""
    return all(scripts_of(texts, *await store.vectors.scripts(scope, dim)))


# Memories given the second model's vector at once (the pass and a store's first mixed write).
FILL_AT_ONCE = 2_000


async def fill(store: MemoryStore, embedder: Embedder, scope: Scope, limit: int = FILL_AT_ONCE) -> int:
    """Give up to ``limit`` stored memories without one the second model's vector; how many. A file
    whose second vectors are another model's gets none (and nothing is embedded for it)."""
    if (model_id := await _model_id(embedder)) is None:
        return 0
    rows = await store.lifecycle.without_second_vector(scope, limit, model_id)
    made = await passages(embedder, [text for _, text in rows], scope.principal)
    if not made:
        return 0
    pairs = [(n, vector.vector) for (n, _), vector in zip(rows, made, strict=True)]
    return await store.put_second_vectors(scope, model_id, pairs)


async def passages(embedder: Embedder | None, texts: list[str], owner: str) -> list[SecondVector] | None:
    """The second model's vectors of ``texts`` (loading it first if needed), or None without one."""
    if embedder is None or not texts or (model_id := await _model_id(embedder)) is None:
        return None
    vectors = await embedder.passages(texts, owner=owner)
    return [SecondVector(model_id, row.astype("float32")) for row in vectors]


async def opinion(
    store: MemorySearch,
    scope: Scope,
    fused: dict[str, float],
    asked: Question | None,
    candidates: int,
) -> dict[str, float]:
    """How many standard deviations the second model puts each of the first ``candidates`` above
    the others (those with a second vector); empty without a question or with too few."""
    import numpy as np

    if asked is None:
        return {}
    first = sorted(fused, key=lambda m: -fused[m])[:candidates]
    stored = await store.second_vectors(scope, first, asked.model_id)
    read = [m for m in first if m in stored]
    if len(read) < 3:
        return {}
    matrix = np.stack([stored[m] for m in read])
    if matrix.shape[1] != asked.vector.shape[0]:
        return {}
    similarity = matrix @ asked.vector
    spread = float(similarity.std())
    if spread < _MIN_SPREAD:
        return {}
    z = (similarity - similarity.mean()) / spread
    return {m: round(float(v), 4) for m, v in zip(read, z, strict=True)}


def add(fused: dict[str, float], said: dict[str, float]) -> None:
    """The opinion counts as much as the first model's among the candidates it read."""
    for m, z in said.items():
        fused[m] += z

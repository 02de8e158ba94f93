"""Each script's mean embedding, so recall can take the language out of a similarity.

A multilingual encoder places a text near the others of its language: in a store that mixes
English and Chinese, a Chinese question ranks every Chinese memory above the English answer. The
difference between the two means of a parallel corpus (the same sentences in both languages) is
that language component and nothing else, since the content cancels out. The means are measured
once per model by ``tools/language_means.py`` from ``language_means/parallel.tsv`` and shipped
beside it, named by the model; a model without a file (an OpenAI-compatible endpoint) is searched
without centring.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np

    from mcp_memory.core.models import Vector


log = logging.getLogger(__name__)

FOLDER = Path(__file__).parent / "language_means"
PARALLEL = FOLDER / "parallel.tsv"


class Encoder(Protocol):
    """What the means are measured with and kept for: every ``loader.Model`` is one. Named here, not
    imported from the loader, which imports this module (no import circle)."""

    @property
    def name(self) -> str: ...

    @property
    def model_id(self) -> str: ...

    def passages(self, texts: list[str]) -> Vector: ...

    def query(self, text: str) -> Vector: ...


@dataclass(frozen=True)
class LanguageMeans:
    """Mean passage and mean question embedding of each script: (Latin, CJK)."""

    passage: tuple[Vector, Vector]
    query: tuple[Vector, Vector]


def parallel_corpus() -> tuple[list[str], list[str]]:
    """The English and Chinese sides of the parallel corpus, line by line."""
    pairs = [line.split("\t") for line in PARALLEL.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def measure(model: Encoder) -> dict[str, np.ndarray[tuple[int, ...], np.dtype[np.float32]]]:
    """Embed the parallel corpus with ``model``: the arrays ``tools/language_means.py`` saves."""
    import numpy as np

    english, chinese = parallel_corpus()
    return {
        "passage_latin": model.passages(english).mean(axis=0),
        "passage_cjk": model.passages(chinese).mean(axis=0),
        "query_latin": np.stack([model.query(t) for t in english]).mean(axis=0),
        "query_cjk": np.stack([model.query(t) for t in chinese]).mean(axis=0),
    }


def load(model: Encoder) -> LanguageMeans | None:
    """The shipped means of ``model``, or None when none were measured for exactly this model."""
    import numpy as np

    path = FOLDER / f"{model.name}.npz"
    if not path.is_file():
        return None
    with np.load(path) as data:
        if str(data["model_id"]) != model.model_id:
            log.warning("language means in %s are for another model; searching without centring", path.name)
            return None
        f32 = np.float32
        return LanguageMeans(
            passage=(data["passage_latin"].astype(f32), data["passage_cjk"].astype(f32)),
            query=(data["query_latin"].astype(f32), data["query_cjk"].astype(f32)),
        )

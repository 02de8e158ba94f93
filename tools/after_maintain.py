"""Retrieval after the lifecycle: `mcp-memory maintain --as-of` on a loaded store, then the same questions.

After a store is loaded and its questions asked (the baseline), the harness runs the real CLI,
``mcp-memory maintain --as-of <moment>``, as a second process on the same data directory while
the server stays up (the server replays the change log), once per horizon and cumulatively: the
pass at +7 days sees what the pass at +1 day left. The first horizon, ``now``, is the pass at the
real time, which decays nothing in a store written a minute ago. Recall runs at the real time, so
recency is the same for every raw memory in both states and only what the passes did differs.

How a hit counts (decided here, printed with the report):

- ``lineage`` (the headline): a summary hit stands for every memory in its ``source_ids`` (the
  summary is meant to keep their facts), so it retrieves their evidence;
- ``strict``: a summary hit stands only for the sources a sentence of which is in the summary's
  text word for word (what an extractive summary actually kept);
- ``archived``: recall with ``include_archived=true``, strict credit (a diagnostic: the archive
  is kept and recallable on request, not what default recall serves).

The gate's verdict is read on ``strict``. ``lineage`` is an upper bound: when one summary stands
for a whole store (the extractive pass groups by session and the loader's turns share one
derived session), every question's evidence is "retrieved" by that one hit, 100% at any k.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import anyio
import orjson
from mcp.client.stdio import get_default_environment
from mcpclient import SERVER_BIN, MemoryClient, ServerSpec
from stats import SEED, Estimate, bootstrap, markdown_table, paired_bootstrap, verdict

from mcp_memory.core.text import normalize

DAY = 86_400.0
HORIZONS: dict[str, float | None] = {"now": None, "+1d": 1 * DAY, "+7d": 7 * DAY, "+30d": 30 * DAY}
MODES = ("lineage", "strict", "archived")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\n+")

Ranked = list[set[str]]  # per hit, the gold keys (dia_ids, file ids) it stands for


@dataclass
class Horizon:
    """One pass and the questions asked after it: ``ranked[mode][i]`` is question i's hit list."""

    name: str
    report: dict[str, Any]
    tiers: dict[str, int]
    ranked: dict[str, list[Ranked]] = field(default_factory=dict)
    summary_hits: int = 0  # summaries among the default recall's hits, all questions
    summary_sources: list[int] = field(default_factory=list)  # sources per distinct summary hit


async def maintain(spec: ServerSpec, as_of: float | None) -> dict[str, Any]:
    """``mcp-memory maintain [--as-of ISO]`` as its own process on the served data directory."""
    args = [str(SERVER_BIN), "maintain"]
    if as_of is not None:
        args += ["--as-of", datetime.fromtimestamp(as_of, UTC).isoformat()]
    # The same environment the stdio client gives the server: the SDK's safe defaults plus the spec's.
    env = {**get_default_environment(), **(spec.parameters().env or {})}
    done = await anyio.run_process(args, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"mcp-memory maintain failed ({done.returncode}): {done.stderr.decode()[-2000:]}")
    report: dict[str, Any] = orjson.loads(done.stdout)
    return report


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(normalize(text)) if s.strip()]


class Credit:
    """Memory id -> the gold keys a hit on it retrieves, summaries included."""

    def __init__(self, keys_of: dict[str, set[str]], text_of_key: dict[str, str]) -> None:
        self.keys_of = keys_of
        self.text_of_key = text_of_key
        self.sources_of: dict[str, list[str]] = {}  # summary id -> source ids, learnt from hits

    def keys(self, hit: dict[str, Any], mode: str) -> set[str]:
        sources = [str(s) for s in hit.get("source_ids") or []]
        if sources:
            self.sources_of[str(hit["id"])] = sources
        keys = set(self.keys_of.get(str(hit["id"]), set()))
        for key in self._source_keys(str(hit["id"]), set()):
            if mode != "strict" or self._kept(key, str(hit["text"])):
                keys.add(key)
        return keys

    def _source_keys(self, summary_id: str, seen: set[str]) -> set[str]:
        out: set[str] = set()
        for source in self.sources_of.get(summary_id, []):
            if source in seen:
                continue
            seen.add(source)
            out |= self.keys_of.get(source, set())
            out |= self._source_keys(source, seen)  # a level-2 summary's sources are summaries
        return out

    def _kept(self, key: str, summary_text: str) -> bool:
        text = normalize(summary_text)
        return any(sentence in text for sentence in _sentences(self.text_of_key.get(key, "")))


async def run(
    client: MemoryClient,
    spec: ServerSpec,
    queries: Sequence[str],
    credit: Credit,
    budget_tokens: int,
    loaded_at: float,
    label: str,
) -> list[Horizon]:
    """Every horizon in turn on the same store: the pass, the store's tiers, the questions in each mode."""
    out: list[Horizon] = []
    for name, ahead in HORIZONS.items():
        started = time.perf_counter()
        report = await maintain(spec, None if ahead is None else loaded_at + ahead)
        stats = await client.call("stats", {})
        horizon = Horizon(name, report, {k: int(v) for k, v in stats["memories"].items()})
        print(
            f"{label} maintain {name}: evicted {report.get('evicted')}, summaries {report.get('summaries')} "
            f"of {report.get('summarized')}, failures {report.get('compression_failures')}, tiers {horizon.tiers} "
            f"({time.perf_counter() - started:.1f} s)",
            file=sys.stderr,
            flush=True,
        )
        horizon.ranked = {mode: [] for mode in MODES}
        summaries: dict[str, int] = {}
        for query in queries:
            served = await client.recall(query, k=10, budget_tokens=budget_tokens)
            for hit in served["hits"]:
                if hit.get("source_ids"):
                    horizon.summary_hits += 1
                    summaries[str(hit["id"])] = len(hit["source_ids"])
            horizon.ranked["lineage"].append([credit.keys(h, "lineage") for h in served["hits"]])
            horizon.ranked["strict"].append([credit.keys(h, "strict") for h in served["hits"]])
            wide = await client.recall(query, k=10, budget_tokens=budget_tokens, filters={"include_archived": True})
            horizon.ranked["archived"].append([credit.keys(h, "strict") for h in wide["hits"]])
        horizon.summary_sources = sorted(summaries.values())
        out.append(horizon)
    return out


def _drop_ok(diff: Estimate) -> bool:
    """The gate's reading: no drop beyond what resampling the questions explains (upper bound >= 0)."""
    return diff.high >= 0


def _verdict(ok: bool, mode: str) -> str:
    return {"strict": verdict(ok), "lineage": f"({verdict(ok)}: upper bound)"}.get(mode, "(diagnostic)")


def _credit_note() -> list[str]:
    return [
        "Credit: `lineage` = a summary hit retrieves the evidence of all its `source_ids` (headline); "
        "`strict` = only of the sources one of whose sentences the summary kept word for word; "
        "`archived` = recall with `include_archived=true`, strict credit (diagnostic). "
        "Passes are cumulative on one store (now, then +1d, +7d, +30d after loading); recall runs at the real time.",
        "",
        "Verdict: the paired 95% interval of (after - baseline) per question reaches 0 or above (upper bound >= 0), "
        "i.e. the drop is no larger than the paired-bootstrap interval. The gate is read on `strict`; "
        "`lineage` is an upper bound (a summary of the whole store scores 100%).",
        "",
    ]


def pass_table(horizons: dict[str, list[Horizon]]) -> str:
    """What the passes did, summed over the stores, and how often summaries were served."""
    rows: list[list[object]] = []
    for name in HORIZONS:
        of = [h for hs in horizons.values() for h in hs if h.name == name]
        total = {key: sum(int(h.report.get(key) or 0) for h in of) for key in ("evicted", "summaries", "summarized")}
        failures = sum(int(h.report.get("compression_failures") or 0) for h in of)
        tiers = {key: sum(h.tiers.get(key, 0) for h in of) for key in ("tier:active", "tier:archived", "level:L1")}
        sources = sorted(n for h in of for n in h.summary_sources)
        rows.append(
            [
                name,
                ", ".join(str(h.report.get("outcome")) for h in of),
                total["evicted"],
                f"{total['summaries']} / {total['summarized']} / {failures}",
                f"{tiers['tier:active']} / {tiers['tier:archived']} / {tiers['level:L1']}",
                sum(h.summary_hits for h in of),
                ", ".join(map(str, sources)) or "-",
            ]
        )
    return markdown_table(
        [
            "pass as of",
            "outcome",
            "archived by decay",
            "summaries made / sources summarized / failed checks",
            "then active / archived / L1 summaries",
            "summary hits (all questions, top 10)",
            "sources of each summary served",
        ],
        rows,
    )


def locomo_table(
    baseline: dict[int, list[float]], after: dict[tuple[str, str], dict[int, list[float]]], resamples: int
) -> tuple[str, list[tuple[str, str, bool]]]:
    """Baseline and every (horizon, credit) with the paired difference per question; the gate's checks."""
    est = {k: bootstrap(baseline[k], resamples=resamples, seed=SEED) for k in (5, 10)}
    rows: list[list[object]] = [
        ["baseline (no maintain)", "-", est[5].n, est[5].percent(), est[10].percent(), "", "", ""]
    ]
    checks: list[tuple[str, str, bool]] = []
    for (name, mode), scores in after.items():
        now = {k: bootstrap(scores[k], resamples=resamples, seed=SEED) for k in (5, 10)}
        diff = {k: paired_bootstrap(scores[k], baseline[k], resamples=resamples, seed=SEED) for k in (5, 10)}
        ok = _drop_ok(diff[5]) and _drop_ok(diff[10])
        rows.append(
            [
                f"after maintain as of {name}",
                mode,
                now[5].n,
                now[5].percent(),
                now[10].percent(),
                diff[5].percent(),
                diff[10].percent(),
                _verdict(ok, mode),
            ]
        )
        if mode == "strict":
            checks.append(
                (
                    f"LoCoMo after maintain as of {name}: R@5 / R@10 drop within the paired interval",
                    f"{diff[5].percent()} / {diff[10].percent()}",
                    ok,
                )
            )
    headers = [
        "state",
        "credit",
        "n",
        "R@5 % [95% CI]",
        "R@10 % [95% CI]",
        "after - baseline R@5 (paired)",
        "after - baseline R@10 (paired)",
        "drop within interval",
    ]
    return markdown_table(headers, rows), checks


def bilingual_table(
    baseline: dict[int, list[float]], after: dict[tuple[str, str], dict[int, list[float]]], resamples: int
) -> tuple[str, list[tuple[str, str, bool]]]:
    est = {k: bootstrap(baseline[k], resamples=resamples, seed=SEED) for k in (1, 5)}
    rows: list[list[object]] = [
        ["baseline (no maintain)", "-", est[1].n, est[1].fraction(), est[5].fraction(), "", "", ""]
    ]
    checks: list[tuple[str, str, bool]] = []
    for (name, mode), scores in after.items():
        now = {k: bootstrap(scores[k], resamples=resamples, seed=SEED) for k in (1, 5)}
        diff = {k: paired_bootstrap(scores[k], baseline[k], resamples=resamples, seed=SEED) for k in (1, 5)}
        ok = _drop_ok(diff[1]) and _drop_ok(diff[5])
        rows.append(
            [
                f"after maintain as of {name}",
                mode,
                now[1].n,
                now[1].fraction(),
                now[5].fraction(),
                diff[1].fraction(),
                diff[5].fraction(),
                _verdict(ok, mode),
            ]
        )
        if mode == "strict":
            checks.append(
                (
                    f"bilingual after maintain as of {name}: R@1 / R@5 drop within the paired interval",
                    f"{diff[1].fraction()} / {diff[5].fraction()}",
                    ok,
                )
            )
    headers = [
        "state",
        "credit",
        "n",
        "R@1 [95% CI]",
        "R@5 [95% CI]",
        "after - baseline R@1 (paired)",
        "after - baseline R@5 (paired)",
        "drop within interval",
    ]
    return markdown_table(headers, rows), checks


def section(title: str, table: str, horizons: dict[str, list[Horizon]]) -> str:
    return "\n".join([f"## {title}", "", *_credit_note(), table, "", "What the passes did:", "", pass_table(horizons)])

"""Retrieval evaluation through MCP stdio: LoCoMo (with the bm25s baseline), the bilingual and the
small-store (agentstore) dev sets, each beside the previous release's ranking in the same run.

    .venv/bin/python tools/eval_retrieval.py [--data-dir ../shared/data] [--only locomo|bilingual|agentstore]
        [--baseline REF | --no-baseline] [--after-maintain]

Prints Markdown tables to stdout (progress to stderr). Every figure carries n and a 95%
percentile-bootstrap interval; comparisons with BM25 and with the baseline release are paired
bootstraps per question.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import after_maintain
import anyio
import dialog_set
import eval_agentstore
import eval_bilingual
import eval_dialogs
from mcpclient import SHARED_DATA, checkout, server_env
from stats import RESAMPLES, SEED, Estimate, bootstrap, markdown_table, paired_bootstrap, verdict
from strength_curve import table as strength_table

Score = eval_dialogs.QuestionScore

# The release before issue 10 (recall): what every change of this round is measured against.
BASELINE = "e8e2a43"


def _paired(ours: Sequence[float], theirs: Sequence[float], resamples: int) -> Estimate:
    return paired_bootstrap(list(ours), list(theirs), resamples=resamples, seed=SEED)


def _column(scores: Sequence[Score], system: str, k: int) -> list[float]:
    """R@k per question for ``system``: "ours", "bm25" or "fused_only" (or "session": session hit@k)."""
    return [float(getattr(s, system)[k]) for s in scores]


def _est(scores: Sequence[Score], system: str, k: int, resamples: int) -> Estimate:
    return bootstrap(_column(scores, system, k), resamples=resamples, seed=SEED)


def _previous(scores: Sequence[Score], k: int) -> list[float]:
    return [float(s.previous[k]) if s.previous is not None else 0.0 for s in scores]


def _est_list(values: Sequence[float], resamples: int) -> Estimate:
    return bootstrap(list(values), resamples=resamples, seed=SEED)


def baseline_rows(main: Sequence[Score], resamples: int, name: str = BASELINE) -> list[list[object]]:
    """The baseline release's rows of the headline table, when it was run."""
    if not main or any(s.previous is None for s in main):
        return []
    before = {k: _est_list(_previous(main, k), resamples) for k in (5, 10)}
    change = {k: _paired(_column(main, "ours", k), _previous(main, k), resamples) for k in (5, 10)}
    return [
        [f"baseline release ({name}) over MCP stdio", before[5].n, before[5].percent(), before[10].percent()],
        ["paired difference, ours - baseline", change[5].n, change[5].percent(), change[10].percent()],
    ]


def locomo_report(
    scores: list[Score],
    log: eval_dialogs.StoreLog,
    evidence: dialog_set.EvidenceLog,
    resamples: int,
    name: str = BASELINE,
) -> tuple[str, list[tuple[str, str, bool]]]:
    main = [s for s in scores if s.question.category in (1, 2, 3, 4)]
    out: list[str] = ["## LoCoMo dev split, turn level, categories 1-4", ""]
    ours = {k: _est(main, "ours", k, resamples) for k in (5, 10)}
    bm25 = {k: _est(main, "bm25", k, resamples) for k in (5, 10)}
    fused = {k: _est(main, "fused_only", k, resamples) for k in (5, 10)}
    sessions = {k: _est(main, "session", k, resamples) for k in (5, 10)}
    diff = {
        k: paired_bootstrap([s.ours[k] for s in main], [s.bm25[k] for s in main], resamples=resamples, seed=SEED)
        for k in (5, 10)
    }
    out.append(
        markdown_table(
            ["system", "n", "R@5 % [95% CI]", "R@10 % [95% CI]"],
            [
                [
                    "mcp-memory recall over MCP stdio (k=10, reinforce=false)",
                    ours[5].n,
                    ours[5].percent(),
                    ours[10].percent(),
                ],
                ["BM25 baseline (bm25s, stopwords 'en', same text)", bm25[5].n, bm25[5].percent(), bm25[10].percent()],
                ["paired difference, ours - BM25", diff[5].n, diff[5].percent(), diff[10].percent()],
                *baseline_rows(main, resamples, name),
            ],
        )
    )
    out += ["", "### Per category (category 5 is reported apart and is not in the figures above)", ""]
    rows: list[list[object]] = []
    for cat in sorted({s.question.category for s in scores}):
        group = [s for s in scores if s.question.category == cat]
        rows.append(
            [
                f"{cat} {dialog_set.CATEGORIES.get(cat, '?')}",
                len(group),
                *(_est(group, "ours", k, resamples).percent() for k in (5, 10)),
                *(_est(group, "bm25", k, resamples).percent() for k in (5, 10)),
            ]
        )
    out.append(markdown_table(["category", "n", "ours R@5", "ours R@10", "BM25 R@5", "BM25 R@10"], rows))
    by_category: dict[int, dict[int, Estimate]] = {}
    if all(s.previous is not None for s in scores):
        out += ["", "### Per category against the baseline release (paired, ours - baseline)", ""]
        change_rows: list[list[object]] = []
        for cat in sorted({s.question.category for s in scores}):
            group = [s for s in scores if s.question.category == cat]
            by_category[cat] = {k: _paired(_column(group, "ours", k), _previous(group, k), resamples) for k in (5, 10)}
            change_rows.append(
                [
                    f"{cat} {dialog_set.CATEGORIES.get(cat, '?')}",
                    len(group),
                    _est_list(_previous(group, 5), resamples).percent(),
                    by_category[cat][5].percent(),
                    by_category[cat][10].percent(),
                ]
            )
        out.append(markdown_table(["category", "n", "baseline R@5", "change R@5", "change R@10"], change_rows))
    out += ["", "### Per conversation (categories 1-4)", ""]
    conv_rows: list[list[object]] = []
    for conv in sorted({s.question.conversation for s in main}):
        group = [s for s in main if s.question.conversation == conv]
        conv_rows.append(
            [
                conv,
                len(group),
                *(_est(group, "ours", k, resamples).percent() for k in (5, 10)),
                *(_est(group, "bm25", k, resamples).percent() for k in (5, 10)),
            ]
        )
    out.append(markdown_table(["conversation", "n", "ours R@5", "ours R@10", "BM25 R@5", "BM25 R@10"], conv_rows))
    value_cost = {
        k: paired_bootstrap([s.ours[k] for s in main], [s.fused_only[k] for s in main], resamples=resamples, seed=SEED)
        for k in (5, 10)
    }
    out += ["", "### Diagnostics", ""]
    out.append(
        markdown_table(
            ["what", "value"],
            [
                [
                    "turns stored / merged / rejected",
                    "{} / {} / {}".format(*(log.outcomes[o] for o in ("stored", "merged", "rejected"))),
                ],
                [
                    "evidence strings repaired / unknown ids dropped / questions without evidence skipped",
                    f"{evidence.repaired} / {evidence.dropped_ids} / {evidence.no_evidence}",
                ],
                ["hits left out for the budget (all recalls)", log.omitted_for_budget],
                ["k=10 top list differs from the first 10 of k=33", log.top10_mismatch],
                [
                    "questions whose gold turn the relevance floor cut (in the unfloored top 10)",
                    f"{log.floor_cut} of {len(scores)} ({100 * log.floor_cut / len(scores):.1f}%; target <= 2%)",
                ],
                [
                    "session hit@5 / @10 (a hit from a gold turn's session; issue 37's target >= 93 at 5)",
                    f"{sessions[5].percent()} / {sessions[10].percent()}",
                ],
                [
                    "fused relevance only (top 33 of recall re-sorted by R), R@5 / R@10",
                    f"{fused[5].percent()} / {fused[10].percent()}",
                ],
                [
                    "served - fused-only (value function's effect), paired, R@5 / R@10",
                    f"{value_cost[5].percent()} / {value_cost[10].percent()}",
                ],
                [
                    "remember time (s, all batches) / recall time (s, k=10 calls)",
                    f"{log.seconds_remember:.1f} / {log.seconds_recall:.1f}",
                ],
            ],
        )
    )
    for new, old in log.merged_examples:
        out.append(f"- merged: {new!r} -> {old!r}")
    out += [
        "",
        strength_table("LoCoMo (absent: category 5; answered: categories 1-4, a gold turn first)", log.strength),
    ]
    checks = [
        ("LoCoMo R@5 >= 62", ours[5].percent(), 100 * ours[5].mean >= 62),
        ("LoCoMo R@10 >= 72", ours[10].percent(), 100 * ours[10].mean >= 72),
        ("LoCoMo session hit@5 >= 93 (issue 37)", sessions[5].percent(), 100 * sessions[5].mean >= 93),
        ("LoCoMo R@5 above BM25, paired lower bound > 0", diff[5].percent(), diff[5].low > 0),
        ("LoCoMo R@10 above BM25, paired lower bound > 0", diff[10].percent(), diff[10].low > 0),
    ]
    if by_category:
        multi, temporal = by_category[1][5], by_category[2][5]
        checks += [
            (
                f"multi-hop R@5 up >= 8 points on {name}, lower bound > 0",
                multi.percent(),
                multi.mean >= 0.08 and multi.low > 0,
            ),
            (
                f"temporal R@5 up >= 5 points on {name}, lower bound > 0",
                temporal.percent(),
                temporal.mean >= 0.05 and temporal.low > 0,
            ),
        ]
        for cat in (3, 4):
            name = f"{cat} {dialog_set.CATEGORIES[cat]}"
            checks.append(
                (f"{name} R@5 down <= 2 points", by_category[cat][5].percent(), by_category[cat][5].mean >= -0.02)
            )
    return "\n".join(out), checks


def bilingual_report(
    scores: list[eval_bilingual.QueryScore],
    log: eval_bilingual.BilingualLog,
    resamples: int,
    previous: list[eval_bilingual.QueryScore] | None = None,
    name: str = BASELINE,
) -> tuple[str, list[tuple[str, str, bool]]]:
    out = ["## Bilingual dev set (600 memories, one store)", ""]
    rows: list[list[object]] = []
    figures: dict[tuple[str, int], Estimate] = {}
    for name in [*eval_bilingual.ordered_sets(scores), "all"]:
        picked = [i for i, s in enumerate(scores) if name in ("all", s.set)]
        group = [scores[i] for i in picked]
        for k in (1, 5):
            figures[name, k] = bootstrap([eval_bilingual.hit_at(s, k) for s in group], resamples=resamples, seed=SEED)
        label = eval_bilingual.SET_NAMES.get(name, name)
        row: list[object] = [f"{name} ({label})", len(group), figures[name, 1].fraction(), figures[name, 5].fraction()]
        if previous is not None:
            for k in (1, 5):
                theirs = [eval_bilingual.hit_at(previous[i], k) for i in picked]
                row.append(_paired([eval_bilingual.hit_at(s, k) for s in group], theirs, resamples).fraction())
        rows.append(row)
    head = ["query set", "n", "R@1 [95% CI]", "R@5 [95% CI]"]
    if previous is not None:
        head += [f"R@1 change vs {name}", f"R@5 change vs {name}"]
    out.append(markdown_table(head, rows))
    merged = ", ".join(f"{a}->{b}" for a, b in log.merged_into_other[:6]) or "none"
    if len(log.merged_into_other) > 6:
        merged += f", ... ({len(log.merged_into_other)} in all)"
    out += [
        "",
        "stored / merged / rejected: {} / {} / {}; merged (file id -> the ids already on that memory): {}".format(
            *(log.outcomes[o] for o in ("stored", "merged", "rejected")), merged
        ),
        "",
        "Queries whose gold memory was not first (rank in the top 10, '-' when absent):",
        "",
    ]
    out += [f"- [{s.set}] {s.query} -> {s.gold} at {s.rank or '-'}" for s in log.misses]
    checks = [
        ("bilingual EN R@5 >= 0.92", figures["en", 5].fraction(), figures["en", 5].mean >= 0.92),
        ("bilingual ZH R@5 >= 0.95", figures["zh", 5].fraction(), figures["zh", 5].mean >= 0.95),
        ("bilingual zh->en R@5 >= 0.80", figures["zh->en", 5].fraction(), figures["zh->en", 5].mean >= 0.80),
        ("bilingual en->zh R@5 >= 0.80", figures["en->zh", 5].fraction(), figures["en->zh", 5].mean >= 0.80),
        ("bilingual identifier R@1 = 1.0", figures["kw", 1].fraction(), figures["kw", 1].mean == 1.0),
    ]
    return "\n".join(out), checks


AGENT_TARGETS = {"en": 0.80, "zh": 0.80, "en->zh": 0.80, "zh->en": 0.65}


def agentstore_report(
    scores: list[eval_agentstore.QueryScore],
    log: eval_agentstore.AgentLog,
    resamples: int,
    previous: list[eval_agentstore.QueryScore] | None = None,
    name: str = BASELINE,
) -> tuple[str, list[tuple[str, str, bool]]]:
    out = [f"## Agentstore dev set ({log.stores} small stores, {log.memories} memories, one store each)", ""]
    rows: list[list[object]] = []
    checks: list[tuple[str, str, bool]] = []
    for name in [*(s for s in eval_agentstore.SETS if any(q.set == s for q in scores)), "all"]:
        picked = [i for i, q in enumerate(scores) if name in ("all", q.set)]
        group = [scores[i] for i in picked]
        hit1 = _est_list([q.hit(1) for q in group], resamples)
        r3 = _est_list([q.hit(3) for q in group], resamples)
        mrr = _est_list([q.reciprocal for q in group], resamples)
        row: list[object] = [name, len(group), hit1.fraction(), r3.fraction(), mrr.fraction()]
        if previous is not None:
            row.append(_paired([q.hit(1) for q in group], [previous[i].hit(1) for i in picked], resamples).fraction())
            row.append(_paired([q.hit(3) for q in group], [previous[i].hit(3) for i in picked], resamples).fraction())
        rows.append(row)
        if name in AGENT_TARGETS:
            floor = AGENT_TARGETS[name]
            checks.append((f"agentstore {name} hit@1 >= {floor:.2f}", hit1.fraction(), hit1.mean >= floor))
        checks.append((f"agentstore {name} R@3 >= 0.90", r3.fraction(), r3.mean >= 0.90))
    head = ["set (question -> memory)", "n", "hit@1 [95% CI]", "R@3 [95% CI]", "MRR@10 [95% CI]"]
    if previous is not None:
        head += [f"hit@1 change vs {name}", f"R@3 change vs {name}"]
    out.append(markdown_table(head, rows))
    abstained = log.foreign_empty / log.foreign_asked if log.foreign_asked else 0.0
    out += [
        "",
        f"Relevance floor: {log.foreign_empty} of {log.foreign_asked} questions about attributes a store lacks "
        f"returned no hit ({100 * abstained:.0f}%); {log.floored} of them left some memories out below the floor "
        "(and said so), but still returned others. "
        f"The floor cut the gold of {log.floor_cut} of {len(scores)} questions "
        f"({100 * log.floor_cut / max(len(scores), 1):.1f}%; target <= 3%). "
        f"Memories merged on load: {log.merged}.",
        "",
        "Questions whose gold memory was not first (rank, the first hit):",
        "",
    ]
    out += [f"- [{q.set}] {q.query} -> {q.rank or '-'}; first: {top[0]}" for q, top in log.misses]
    out += ["", strength_table("agentstore (absent: attributes the store lacks; answered: gold first)", log.strength)]
    checks.append(
        ("agentstore: questions about absent attributes return nothing >= 80%", f"{abstained:.2f}", abstained >= 0.8)
    )
    return "\n".join(out), checks


def targets_table(checks: list[tuple[str, str, bool]]) -> str:
    return markdown_table(
        ["target (DESIGN.md section 9)", "measured [95% CI]", "verdict"], [[a, b, verdict(c)] for a, b, c in checks]
    )


def locomo_after(
    scores: list[Score], log: eval_dialogs.StoreLog, resamples: int
) -> tuple[str, list[tuple[str, str, bool]]]:
    main = [s for s in scores if s.question.category in (1, 2, 3, 4)]
    baseline = {k: _column(main, "ours", k) for k in (5, 10)}
    after = {
        (name, mode): {k: [s.after[name][mode][k] for s in main] for k in (5, 10)}
        for name in after_maintain.HORIZONS
        for mode in after_maintain.MODES
    }
    table, checks = after_maintain.locomo_table(baseline, after, resamples)
    title = "LoCoMo after `mcp-memory maintain --as-of`, categories 1-4"
    return after_maintain.section(title, table, log.horizons), checks


def bilingual_after(
    scores: list[eval_bilingual.QueryScore], log: eval_bilingual.BilingualLog, resamples: int
) -> tuple[str, list[tuple[str, str, bool]]]:
    baseline = {k: [eval_bilingual.hit_at(s, k) for s in scores] for k in (1, 5)}
    after = {
        (name, mode): {
            k: [eval_bilingual.hit_at(replace(s, rank=s.after[name][mode]), k) for s in scores] for k in (1, 5)
        }
        for name in after_maintain.HORIZONS
        for mode in after_maintain.MODES
    }
    table, checks = after_maintain.bilingual_table(baseline, after, resamples)
    title = "Bilingual after `mcp-memory maintain --as-of`, all 80 queries"
    return after_maintain.section(title, table, {"bilingual": log.horizons}), checks


async def run(
    data_dir: Path,
    only: str | None,
    budget_tokens: int,
    resamples: int,
    server_env: dict[str, str],
    after: bool = False,
    session_ids: bool = False,
    baseline: str | None = BASELINE,
) -> str:
    sections: list[str] = ["# Retrieval evaluation (through MCP stdio)", ""]
    if baseline:
        sections += [f"Baseline release: `{baseline}`, served from its own package in the same run.", ""]
    if server_env:
        sections += [f"Server environment overrides: {server_env}", ""]
    if session_ids:
        sections += ["LoCoMo turns carry their session as `session_id` (`--session-ids`).", ""]
    checks: list[tuple[str, str, bool]] = []
    with tempfile.TemporaryDirectory(prefix="mcp-memory-eval-") as tmp:
        work = Path(tmp)
        source = checkout(baseline, work / "baseline") if baseline else None
        if only in (None, "agentstore"):
            ascores, alog = await eval_agentstore.evaluate(data_dir, work, server_env)
            aprevious = (await eval_agentstore.evaluate(data_dir, work, server_env, source))[0] if source else None
            text, more = agentstore_report(ascores, alog, resamples, aprevious, baseline or BASELINE)
            sections += [text, ""]
            checks += more
        if only in (None, "locomo"):
            evidence = dialog_set.EvidenceLog()
            conversations = dialog_set.load(data_dir, evidence)
            scores, log = await eval_dialogs.evaluate(
                conversations, work, budget_tokens, server_env, after, session_ids, source
            )
            text, more = locomo_report(scores, log, evidence, resamples, baseline or BASELINE)
            sections += [text, ""]
            checks += more
            if after:
                text, more = locomo_after(scores, log, resamples)
                sections += [text, ""]
                checks += more
        if only in (None, "bilingual"):
            bscores, blog = await eval_bilingual.evaluate(data_dir, work, budget_tokens, server_env, after)
            bprevious = None
            if source is not None:
                bprevious = (await eval_bilingual.evaluate(data_dir, work, budget_tokens, server_env, source=source))[0]
            text, more = bilingual_report(bscores, blog, resamples, bprevious, baseline or BASELINE)
            sections += [text, ""]
            checks += more
            if after:
                text, more = bilingual_after(bscores, blog, resamples)
                sections += [text, ""]
                checks += more
    sections += ["## Retrieval targets", "", targets_table(checks)]
    return "\n".join(sections)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", type=Path, default=SHARED_DATA, help="the shared data folder (read in place)")
    p.add_argument("--only", choices=["locomo", "bilingual", "agentstore"], help="run one of the three sets")
    p.add_argument(
        "--baseline",
        default=BASELINE,
        metavar="REF",
        help=f"the release every figure is compared with, served in the same run (default {BASELINE})",
    )
    p.add_argument("--no-baseline", action="store_true", help="skip the baseline release (half the time)")
    p.add_argument("--budget-tokens", type=int, default=32_000, help="recall's token budget (default 32000)")
    p.add_argument("--resamples", type=int, default=RESAMPLES, help="bootstrap resamples (default 10000)")
    p.add_argument(
        "--after-maintain",
        action="store_true",
        help="also ask every question again after `mcp-memory maintain --as-of` now, +1d, +7d and +30d "
        "(issue 4's gate; see after_maintain.py)",
    )
    p.add_argument(
        "--session-ids",
        action="store_true",
        help="store each LoCoMo turn with its session as session_id (default: the client's derived session)",
    )
    p.add_argument(
        "--server-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="extra MCP_MEMORY_* variable for the server (sensitivity checks: MCP_MEMORY_RECALL__RRF_K=10)",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    report = anyio.run(
        run,
        args.data_dir,
        args.only,
        args.budget_tokens,
        args.resamples,
        server_env(args.server_env),
        args.after_maintain,
        args.session_ids,
        None if args.no_baseline else args.baseline,
    )
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())

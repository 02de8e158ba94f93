"""Retrieval evaluation through MCP stdio: LoCoMo (with the bm25s baseline) and the bilingual dev set.

    .venv/bin/python tools/eval_retrieval.py [--data-dir ../shared/data] [--only locomo|bilingual] [--after-maintain]

Prints Markdown tables to stdout (progress to stderr). Every figure carries n and a 95%
percentile-bootstrap interval; LoCoMo's comparison with BM25 is a paired bootstrap per question.
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
import eval_bilingual
import eval_dialogs
from mcpclient import SHARED_DATA
from stats import RESAMPLES, SEED, Estimate, bootstrap, markdown_table, paired_bootstrap, verdict

Score = eval_dialogs.QuestionScore


def _column(scores: Sequence[Score], system: str, k: int) -> list[float]:
    """R@k per question for ``system``: "ours", "bm25" or "fused_only"."""
    return [float(getattr(s, system)[k]) for s in scores]


def _est(scores: Sequence[Score], system: str, k: int, resamples: int) -> Estimate:
    return bootstrap(_column(scores, system, k), resamples=resamples, seed=SEED)


def locomo_report(
    scores: list[Score], log: eval_dialogs.StoreLog, evidence: dialog_set.EvidenceLog, resamples: int
) -> tuple[str, list[tuple[str, str, bool]]]:
    main = [s for s in scores if s.question.category in (1, 2, 3, 4)]
    out: list[str] = ["## LoCoMo dev split, turn level, categories 1-4", ""]
    ours = {k: _est(main, "ours", k, resamples) for k in (5, 10)}
    bm25 = {k: _est(main, "bm25", k, resamples) for k in (5, 10)}
    fused = {k: _est(main, "fused_only", k, resamples) for k in (5, 10)}
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
    checks = [
        ("LoCoMo R@5 >= 55", ours[5].percent(), 100 * ours[5].mean >= 55),
        ("LoCoMo R@10 >= 65", ours[10].percent(), 100 * ours[10].mean >= 65),
        ("LoCoMo R@5 above BM25, paired lower bound > 0", diff[5].percent(), diff[5].low > 0),
        ("LoCoMo R@10 above BM25, paired lower bound > 0", diff[10].percent(), diff[10].low > 0),
    ]
    return "\n".join(out), checks


def bilingual_report(
    scores: list[eval_bilingual.QueryScore], log: eval_bilingual.BilingualLog, resamples: int
) -> tuple[str, list[tuple[str, str, bool]]]:
    out = ["## Bilingual dev set (600 memories, one store)", ""]
    rows: list[list[object]] = []
    figures: dict[tuple[str, int], Estimate] = {}
    for name in [*eval_bilingual.ordered_sets(scores), "all"]:
        group = [s for s in scores if name in ("all", s.set)]
        for k in (1, 5):
            figures[name, k] = bootstrap([eval_bilingual.hit_at(s, k) for s in group], resamples=resamples, seed=SEED)
        label = eval_bilingual.SET_NAMES.get(name, name)
        rows.append([f"{name} ({label})", len(group), figures[name, 1].fraction(), figures[name, 5].fraction()])
    out.append(markdown_table(["query set", "n", "R@1 [95% CI]", "R@5 [95% CI]"], rows))
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
        ("bilingual ZH R@5 >= 0.90", figures["zh", 5].fraction(), figures["zh", 5].mean >= 0.90),
        ("bilingual EN R@5 >= 0.85", figures["en", 5].fraction(), figures["en", 5].mean >= 0.85),
        ("bilingual identifier R@1 = 1.0", figures["kw", 1].fraction(), figures["kw", 1].mean == 1.0),
    ]
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
) -> str:
    sections: list[str] = ["# Retrieval evaluation (through MCP stdio)", ""]
    if server_env:
        sections += [f"Server environment overrides: {server_env}", ""]
    if session_ids:
        sections += ["LoCoMo turns carry their session as `session_id` (`--session-ids`).", ""]
    checks: list[tuple[str, str, bool]] = []
    with tempfile.TemporaryDirectory(prefix="mcp-memory-eval-") as tmp:
        work = Path(tmp)
        if only in (None, "locomo"):
            evidence = dialog_set.EvidenceLog()
            conversations = dialog_set.load(data_dir, evidence)
            scores, log = await eval_dialogs.evaluate(
                conversations, work, budget_tokens, server_env, after, session_ids
            )
            text, more = locomo_report(scores, log, evidence, resamples)
            sections += [text, ""]
            checks += more
            if after:
                text, more = locomo_after(scores, log, resamples)
                sections += [text, ""]
                checks += more
        if only in (None, "bilingual"):
            bscores, blog = await eval_bilingual.evaluate(data_dir, work, budget_tokens, server_env, after)
            text, more = bilingual_report(bscores, blog, resamples)
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
    p.add_argument("--only", choices=["locomo", "bilingual"], help="run one of the two sets")
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


def server_env(pairs: Sequence[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.startswith("MCP_MEMORY_"):
            raise SystemExit(f"--server-env wants MCP_MEMORY_NAME=VALUE, got {pair!r}")
        env[name] = value
    return env


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
    )
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())

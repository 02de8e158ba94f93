"""The benchmark task: a realistic 1,000-node tree and a ~1 MB snapshot of agent working memory.

Deterministic for a seed; used by bench_tasks.py.
"""

from __future__ import annotations

import random
from typing import Any

import orjson

from mcp_memory.core.task_model import TaskHead
from mcp_memory.services.task_views import serialised_size

PHASES = [
    "Discovery and requirements",
    "Data model and schema migration",
    "Orders and billing API",
    "Web front end",
    "Search and indexing",
    "Payments integration",
    "中文本地化与合规",
    "Observability and alerting",
    "Performance and load testing",
    "Release and rollout",
]
VERBS = [
    "Implement",
    "Write tests for",
    "Review",
    "Refactor",
    "Document",
    "Benchmark",
    "Fix flaky behaviour in",
    "Migrate",
    "Add metrics to",
    "Design",
    "Remove dead code from",
    "Harden input validation in",
]
OBJECTS = [
    "the order export job",
    "the invoice PDF renderer",
    "session handling",
    "the payments webhook",
    "search ranking",
    "CSV import",
    "the tenant settings page",
    "the nightly reconciliation",
    "rate limiting on /v2/orders",
    "the refund workflow",
    "the audit log",
    "email notifications",
    "the currency conversion service",
    "the warehouse sync",
    "feature-flag cleanup",
    "the onboarding wizard",
]
QUALIFIERS = [
    "",
    "",
    " for tenants with more than 10k users",
    " behind a feature flag",
    " in staging",
    " (P1)",
    " before the code freeze",
    " for the EU region",
    " with a rollback plan",
    " on Postgres 16",
]
ZH_TITLES = [
    "修复订单导出的时区问题",
    "补充支付回调的单元测试",
    "核对发票模板的中文字段",
    "迁移旧版用户表到新结构",
    "评审搜索排序的改动",
    "压测下单接口并记录瓶颈",
    "整理上线检查清单",
    "为退款流程增加审计日志",
    "对接短信服务商的新接口",
    "确认数据保留策略符合当地法规",
]
NOTES = [
    "Waiting on the schema review from the platform team; see the design doc section 4.2.",
    "Flaky on CI about one run in thirty; retry logic masks it locally.",
    "Customer-reported: the March invoices were generated with the wrong VAT rate.",
    "Split into two PRs so the migration can ship ahead of the API change.",
    "Needs a decision on whether to keep the v1 endpoint for another quarter.",
    "Benchmarked at 1,840 req/s on the staging cluster, p95 212 ms.",
    "负责人是小林，预计周五前完成，依赖财务那边的字段确认。",
    "回归测试发现金额四舍五入不一致，已开工单跟进。",
    "Ops asked for a dry run in the maintenance window first.",
    "Depends on the new index; do not merge before it is built in production.",
]
BLOCKED_REASONS = [
    "waiting for the security review",
    "the staging database is being rebuilt",
    "needs sign-off from finance",
    "等待法务确认条款",
]


def _title(r: random.Random) -> str:
    if r.random() < 0.12:
        return r.choice(ZH_TITLES)
    return f"{r.choice(VERBS)} {r.choice(OBJECTS)}{r.choice(QUALIFIERS)}"


def _status(r: random.Random, phase: int, current_phase: int) -> str:
    if phase < current_phase:
        return "abandoned" if r.random() < 0.04 else "done"
    if phase > current_phase:
        return "pending"
    return r.choices(["done", "in_progress", "pending", "blocked"], weights=[45, 10, 40, 5])[0]


def _node(r: random.Random, node_id: str, title: str, status: str, children: list[dict[str, Any]]) -> dict[str, Any]:
    node: dict[str, Any] = {"id": node_id, "title": title, "status": status, "children": children}
    if status == "blocked":
        node["blocked_reason"] = r.choice(BLOCKED_REASONS)
    if r.random() < 0.15:
        node["notes"] = r.choice(NOTES)
    return node


def build_tree(r: random.Random, current_phase: int = 4) -> dict[str, Any]:
    """Exactly 1,000 nodes: a root, 10 phases, 60 epics, 300 tasks and 629 subtasks (five levels)."""
    extra = set(r.sample(range(300), 29))  # these tasks get a third subtask: 300 * 2 + 29 = 629
    phases = []
    task_index = 0
    for p, phase_title in enumerate(PHASES):
        epics = []
        for e in range(6):
            tasks = []
            for t in range(5):
                subtasks = [
                    _node(r, f"p{p}.e{e}.t{t}.s{s}", _title(r), _status(r, p, current_phase), [])
                    for s in range(3 if task_index in extra else 2)
                ]
                task_index += 1
                tasks.append(_node(r, f"p{p}.e{e}.t{t}", _title(r), _status(r, p, current_phase), subtasks))
            epic_status = "done" if p < current_phase else "in_progress" if p == current_phase else "pending"
            epics.append(_node(r, f"p{p}.e{e}", f"{phase_title}: {r.choice(OBJECTS)}", epic_status, tasks))
        phase_status = "done" if p < current_phase else "in_progress" if p == current_phase else "pending"
        phases.append(_node(r, f"p{p}", phase_title, phase_status, epics))
    return {
        "id": "root",
        "title": "Ship the Q4 billing and search release",
        "status": "in_progress",
        "notes": "Release train 2026.12; freeze on the 12th, rollout by region.",
        "children": phases,
    }


def walk(node: dict[str, Any]) -> list[dict[str, Any]]:
    out = [node]
    for child in node["children"]:
        out.extend(walk(child))
    return out


# ----- a realistic snapshot ----------------------------------------------------------------

FILES = [
    "billing/invoice.py",
    "billing/vat.py",
    "orders/export.py",
    "orders/api/v2.py",
    "search/ranking.py",
    "search/indexer.go",
    "web/src/pages/Settings.tsx",
    "payments/webhook.py",
    "migrations/0042_split_orders.sql",
    "ops/terraform/eu/main.tf",
]
FUNCS = ["render_invoice", "apply_vat", "export_orders", "rank_hits", "sync_stock", "refund", "reconcile_day"]
SERVICES = ["orders-api", "billing-worker", "search-indexer", "payments-gw", "web", "reconciler"]
ZH_LINES = [
    "用户要求在周五之前完成数据迁移，迁移脚本位于 {f}，执行前需要先备份订单表。",
    "第 {n} 次运行回归测试，失败 {m} 个用例，主要集中在发票金额的四舍五入上。",
    "和财务确认过：增值税税率按开票日期计算，不按下单日期，影响约 {n} 张历史发票。",
    "搜索排序改动后，中文查询的首条命中率从 {a}% 提升到 {b}%，英文基本不变。",
    "注意：{s} 在高峰期的延迟会升到 {n} 毫秒，上线窗口选在凌晨两点到四点之间。",
    "待办：整理 {n} 条客户反馈，按严重程度分类，下周一的例会上汇报。",
    "结论：先上线只读接口，写接口等审计日志完成后再开放，负责人小王。",
]
EN_LINES = [
    "Observed that {func}() in {f} is called {n} times per request; caching the tenant lookup should cut it to one.",
    "The failing case is an order with {m} line items where the discount is applied after VAT; expected {a}.{b}.",
    "Decided to keep the v1 export endpoint until {n} active integrations have moved; tracked in OPS-{n}{m}.",
    "Staging run {n}: p50 {a} ms, p95 {b} ms, error rate 0.{m}%; the slow path is the PDF font loading.",
    "Asked the user whether refunds older than {m} days should go through finance; answer: yes, with a note.",
    "Plan for the next step: rebase on main at {h}, rerun the migration dry run, then open the PR for review.",
    "{s} logs show {n} retries on the warehouse sync between 02:00 and 02:15 UTC; upstream was rate limiting.",
]


def fill(r: random.Random, template: str) -> str:
    return template.format(
        f=r.choice(FILES),
        func=r.choice(FUNCS),
        s=r.choice(SERVICES),
        n=r.randint(2, 9_999),
        m=r.randint(1, 99),
        a=r.randint(10, 999),
        b=r.randint(10, 999),
        h=f"{r.getrandbits(28):07x}",
    )


def _log_block(r: random.Random) -> str:
    lines = []
    for _ in range(r.randint(4, 12)):
        ts = f"2026-11-{r.randint(1, 28):02d}T{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}Z"
        level = r.choices(["INFO", "WARN", "ERROR", "DEBUG"], weights=[70, 15, 5, 10])[0]
        lines.append(
            f"{ts} {level} {r.choice(SERVICES)}[{r.randint(1, 8)}] batch={r.randint(1, 99_999)} "
            f"rows={r.randint(0, 50_000)} took={r.randint(1, 4_000)}ms trace={r.getrandbits(64):016x}"
        )
    return "```log\n" + "\n".join(lines) + "\n```"


def _code_block(r: random.Random) -> str:
    func, rate = r.choice(FUNCS), r.randint(5, 25)
    return (
        f"```python\n# {r.choice(FILES)}, proposed change\n"
        f"def {func}(order: Order, *, rate: Decimal = Decimal('0.{rate:02d}')) -> Money:\n"
        f"    subtotal = sum(line.price * line.qty for line in order.lines)\n"
        f"    if order.discount and order.created_at >= CUTOFF_{r.randint(1, 9)}:\n"
        f"        subtotal -= order.discount\n"
        f"    return Money(subtotal * (1 + rate)).quantize(CENT)  # rounded per line before BUG-{r.randint(100, 9999)}"
        "\n"
        "```"
    )


def _tool_output(r: random.Random) -> str:
    rows = [
        {
            "order_id": f"ORD-{r.randint(100_000, 999_999)}",
            "tenant": f"t{r.randint(1, 400)}",
            "total": round(r.uniform(5, 5000), 2),
            "currency": r.choice(["EUR", "USD", "CNY", "GBP"]),
            "status": r.choice(["paid", "refunded", "pending", "failed"]),
        }
        for _ in range(r.randint(2, 6))
    ]
    return "Tool output (sql_query, truncated):\n" + "\n".join(orjson.dumps(row).decode() for row in rows)


def build_snapshot(r: random.Random, target_bytes: int) -> str:
    """Varied working memory (prose, logs, code, tool output; about a fifth Chinese) of at most target_bytes."""
    parts: list[str] = []
    size = 0
    section = 0
    while True:
        kind = r.random()
        if kind < 0.08:
            section += 1
            piece = f"\n## Iteration {section}: {r.choice(PHASES)}\n"
        elif kind < 0.40:
            piece = " ".join(fill(r, r.choice(EN_LINES)) for _ in range(r.randint(2, 5)))
        elif kind < 0.62:
            piece = "".join(fill(r, r.choice(ZH_LINES)) for _ in range(r.randint(2, 4)))
        elif kind < 0.78:
            piece = _log_block(r)
        elif kind < 0.88:
            piece = _code_block(r)
        else:
            piece = _tool_output(r)
        piece_bytes = len(piece.encode("utf-8")) + 2
        if size + piece_bytes > target_bytes:
            break
        parts.append(piece)
        size += piece_bytes
    return "\n\n".join(parts)


# ----- the state that changes per call -----------------------------------------------------


def variables(i: int, node_id: str) -> dict[str, Any]:
    return {
        "iteration": i,
        "last_completed": node_id,
        "branch": f"release/2026.12-step-{i}",
        "open_prs": [4100 + i, 4102 + i, 4107 + i],
        "staging_ok": i % 3 != 0,
        "notes": f"step {i}: reviewed {node_id}, next one queued",
        "发布窗口": "12月14日 02:00-04:00 UTC",
    }


def tool_calls(i: int) -> list[dict[str, Any]]:
    return [
        {
            "name": name,
            "arguments": {"path": FILES[(i + k) % len(FILES)], "step": i},
            "result": f"ok, {120 + 7 * k + i} lines",
            "at": f"2026-11-29T10:{(i + k) % 60:02d}:00Z",
        }
        for k, name in enumerate(["read_file", "run_tests", "grep", "sql_query", "edit_file"])
    ]


def server_serialised_size(head: dict[str, Any]) -> int:
    """What the server's limit measures, computed with the server's own model and function."""
    return serialised_size(TaskHead.model_validate(head))


# ----- measuring ---------------------------------------------------------------------------

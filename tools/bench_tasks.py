"""Task checkpoints at full size, measured through a real MCP stdio client against `mcp-memory serve`.

    OMP_NUM_THREADS=1 .venv/bin/python tools/bench_tasks.py [--quick] [--calls N] [--no-breakdown]

One task with a 1,000-node tree (five levels, mixed statuses, notes on some nodes, some Chinese
titles) and a snapshot of varied agent working memory (notes, logs, code, tool output, about a
fifth Chinese) sized so the serialised head sits just under `limits.max_checkpoint_bytes`.

(a) `checkpoint` p50/p95: every call changes variables, iterations and one node's status, so
every call writes; three call shapes (state only, tree + state, tree + state + snapshot).
Stored envelope bytes (compressed) beside the serialised size the limit measures.
(b) `resume` p50/p95 at budgets of 1,000, 4,000 and 16,000 tokens, used_tokens against the
budget, and the packet's JSON bytes. The first resume (it waits for the embedding model) is
shown apart.
(c) `update_task` with one `set` edit; (d) rollback (`resume` with `checkpoint_id`);
(e) reading `memory://tasks/{task_id}/checkpoints/{checkpoint_id}` in full.
(f) unless --no-breakdown: the server-side steps of one checkpoint timed in-process on the same
head, to show where a checkpoint's time goes.

Medians and 95th percentiles, never means. Markdown goes to stdout, progress to stderr.
"""

from __future__ import annotations

import argparse
import functools
import platform
import random
import shlex
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import orjson
from mcpclient import MemoryClient, ServerSpec, Stopwatch, open_server
from stats import markdown_table, percentile

from mcp_memory.models import TaskHead, TaskState
from mcp_memory.redact import redact, redact_value
from mcp_memory.services import task_tree
from mcp_memory.services.checks import text_field
from mcp_memory.services.packet import build as build_packet
from mcp_memory.services.tasks import serialised_size
from mcp_memory.storage.envelope import encode, unpack
from mcp_memory.text import estimate_tokens

LIMIT = 1_048_576  # limits.max_checkpoint_bytes, the default
MARGIN = 24_576  # room left under the limit for the variables and tool calls that change per call
TASK_ID = "bench-release-2026-q4"
BUDGETS = (1_000, 4_000, 16_000)
SEED = 20_261_129

# ----- a realistic task --------------------------------------------------------------------

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


def _fill(r: random.Random, template: str) -> str:
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
            piece = " ".join(_fill(r, r.choice(EN_LINES)) for _ in range(r.randint(2, 5)))
        elif kind < 0.62:
            piece = "".join(_fill(r, r.choice(ZH_LINES)) for _ in range(r.randint(2, 4)))
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


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _ms(values: Sequence[float]) -> tuple[str, str]:
    return f"{1000 * percentile(values, 50):.1f}", f"{1000 * percentile(values, 95):.1f}"


def _p50(values: Sequence[float]) -> float:
    return percentile(values, 50)


class Bench:
    def __init__(self, client: MemoryClient, tree: dict[str, Any], snapshot: str, calls: int) -> None:
        self.client = client
        self.tree = tree
        self.snapshot = snapshot
        self.calls = calls
        self.nodes = {node["id"]: node for node in walk(tree)}
        self.todo: list[str] = [
            str(n["id"]) for n in walk(tree) if n["status"] in ("pending", "in_progress") and "." in n["id"]
        ]
        self.head_seq = 0
        self.step = 0
        self.checkpoint_ids: list[str] = []
        self.stored_sizes: list[int] = []
        self.serialised_sizes: list[int] = []
        self.problems: list[str] = []
        self.last_text_bytes = 0

    def _check(self, ok: bool, problem: str) -> None:
        if not ok:
            self.problems.append(problem)

    def _advance(self) -> str:
        """Mark the next open node done (so the tree changes) and return it."""
        node_id = self.todo[self.step % len(self.todo)]
        node = self.nodes[node_id]
        node["status"] = "done" if node["status"] != "done" else "in_progress"
        node.pop("blocked_reason", None)
        self.step += 1
        return node_id

    async def checkpoint(self, shape: str, *, first: bool = False) -> float:
        node_id = self._advance()
        args: dict[str, Any] = {
            "task_id": TASK_ID,
            "variables": variables(self.step, node_id),
            "iterations": self.step,
            "token_usage": {"input": 1_200 * self.step, "output": 310 * self.step},
            "reason": "node_completed" if self.step % 2 else "periodic",
        }
        if first:
            args |= {
                "goal": "Ship the Q4 billing and search release without breaking invoicing for existing tenants",
                "title": "Q4 release",
                "constraints": [
                    "No schema change without a tested rollback",
                    "Invoices already sent must never change",
                    "中文界面文案需经本地化团队审核",
                ],
                "pending_actions": [
                    {"text": "Email finance the VAT reconciliation", "external": True},
                    {"text": "Run the production migration 0042", "external": True, "irreversible": True, "cost": 3},
                ],
            }
        else:
            args["expected_head"] = self.head_seq
        if shape in ("tree", "full") or first:
            args["tree"] = self.tree
            args["current_node"] = self.todo[self.step % len(self.todo)]
            args["last_tool_calls"] = tool_calls(self.step)
        if shape == "full" or first:
            # A changed line at the end, same length, so every snapshot differs and stays in size.
            stamp = f"\n[step {self.step:06d}]"
            self.snapshot = self.snapshot[: -len(stamp)] + stamp if not first else self.snapshot
            args["snapshot"] = self.snapshot
        with Stopwatch() as sw:
            result = await self.client.call("checkpoint", args)
        cp = result["checkpoint"]
        self._check(result["head_seq"] > self.head_seq, f"checkpoint did not advance the head: {result['head_seq']}")
        self._check(cp["id"] not in self.checkpoint_ids, f"checkpoint id {cp['id']} repeated")
        self.head_seq = int(result["head_seq"])
        self.checkpoint_ids.append(str(cp["id"]))
        self.stored_sizes.append(int(cp["size"]))
        self.serialised_sizes.append(int(result["serialized_size"]))
        return sw.seconds

    async def resume(self, budget: int, checkpoint_id: str | None = None) -> tuple[float, dict[str, Any]]:
        args: dict[str, Any] = {"task_id": TASK_ID, "budget_tokens": budget}
        if checkpoint_id is not None:
            args["checkpoint_id"] = checkpoint_id
        with Stopwatch() as sw:
            result = await self.client.client.call_tool("resume", args)
        packet = result.structured_content
        if result.is_error or packet is None:
            raise RuntimeError(f"resume failed: {result.content}")
        self.last_text_bytes = sum(len(str(getattr(part, "text", "")).encode("utf-8")) for part in result.content)
        used, told = int(packet["used_tokens"]), int(packet["budget_tokens"])
        self._check(told == budget, f"resume answered budget_tokens={told} for {budget}")
        self._check(used <= budget, f"resume used {used} tokens over a budget of {budget}")
        if checkpoint_id is not None:
            self._check(packet["rolled_back_to"] == checkpoint_id, f"rollback to {checkpoint_id} not reported")
            self.head_seq = int(packet["head_seq"])
        return sw.seconds, packet

    async def update(self, i: int) -> float:
        node_id = self.todo[(self.step + i) % len(self.todo)]
        status = "in_progress" if i % 2 == 0 else "pending"
        with Stopwatch() as sw:
            result = await self.client.call(
                "update_task", {"task_id": TASK_ID, "edits": [{"op": "set", "node_id": node_id, "status": status}]}
            )
        self._check(int(result["head_seq"]) == self.head_seq + 1, "update_task did not advance the head by one")
        self.head_seq = int(result["head_seq"])
        return sw.seconds

    async def read_checkpoint(self, checkpoint_id: str) -> tuple[float, int, dict[str, Any]]:
        uri = f"memory://tasks/{TASK_ID}/checkpoints/{checkpoint_id}"
        with Stopwatch() as sw:
            result = await self.client.client.read_resource(uri, cache_mode="bypass")
        text = "".join(str(getattr(part, "text", "")) for part in result.contents)
        body: dict[str, Any] = orjson.loads(text)
        return sw.seconds, len(text.encode("utf-8")), body


async def task_memories(client: MemoryClient) -> int:
    """A few memories tied to the task, so the resume packet has some to pack."""
    r = random.Random(SEED + 1)
    items = [{"content": _fill(r, r.choice(EN_LINES + ZH_LINES)), "task_id": TASK_ID} for _ in range(24)]
    stored = await client.remember(items)
    return sum(1 for item in stored if item["outcome"] != "rejected")


async def run(calls: int, quick: bool) -> tuple[str, Bench, dict[str, Any]]:
    r = random.Random(SEED)
    tree = build_tree(r)
    probe = {
        "tree": tree,
        "current_node": "p4.e0.t0",
        "variables": variables(9_999, "p4.e0.t0.s0"),
        "pending_actions": [{"text": "x" * 120, "external": True}] * 2,
        "last_tool_calls": tool_calls(9_999),
        "token_usage": {"input": 10**9, "output": 10**9},
        "iterations": 10**6,
    }
    structured = server_serialised_size(probe)
    snapshot = build_snapshot(r, LIMIT - MARGIN - structured)
    facts: dict[str, Any] = {
        "nodes": len(walk(tree)),
        "depth": 5,
        "statuses": {
            s: sum(1 for n in walk(tree) if n["status"] == s)
            for s in ("done", "in_progress", "pending", "blocked", "abandoned")
        },
        "with_notes": sum(1 for n in walk(tree) if "notes" in n),
        "tree_json_bytes": len(orjson.dumps(tree)),
        "structured_bytes": structured,
        "snapshot_bytes": len(snapshot.encode("utf-8")),
        "snapshot_chars": len(snapshot),
        "snapshot_cjk_bytes": sum(len(c.encode("utf-8")) for c in snapshot if ord(c) > 0x2E7F),
    }
    out: list[str] = []
    with tempfile.TemporaryDirectory(prefix="mcp-memory-bench-tasks-") as tmp:
        spec = ServerSpec(Path(tmp) / "data", principal="bench")
        async with open_server(spec) as client:
            bench = Bench(client, tree, snapshot, calls)
            _progress("checkpoint: creating the task")
            create = await bench.checkpoint("full", first=True)
            facts["create_seconds"] = create
            facts["serialized_size"] = bench.serialised_sizes[0]
            facts["stored_size"] = bench.stored_sizes[0]

            # (a) checkpoints, the three shapes interleaved so drift hits them alike.
            shapes = ("state", "tree", "full")
            times: dict[str, list[float]] = {s: [] for s in shapes}
            sizes: dict[str, list[tuple[int, int]]] = {s: [] for s in shapes}
            for _ in range(2):  # warm-up, not counted
                await bench.checkpoint("tree")
            _progress(f"checkpoint: {calls} calls of each shape")
            for _ in range(calls):
                for shape in shapes:
                    times[shape].append(await bench.checkpoint(shape))
                    sizes[shape].append((bench.stored_sizes[-1], bench.serialised_sizes[-1]))
            labels = {
                "state": "variables + iterations + token_usage (tree and snapshot kept)",
                "tree": "+ whole tree with one status changed, current node, tool calls",
                "full": "+ the snapshot re-sent (last line changed)",
            }
            rows = []
            for shape in shapes:
                p50, p95 = _ms(times[shape])
                stored = [s for s, _ in sizes[shape]]
                serial = [z for _, z in sizes[shape]]
                rows.append(
                    [
                        labels[shape],
                        len(times[shape]),
                        p50,
                        p95,
                        f"{_p50(stored):,.0f}",
                        f"{_p50(serial):,.0f}",
                        f"{_p50(serial) / _p50(stored):.2f}x",
                    ]
                )
            out.append(
                "### (a) `checkpoint` (every call writes a new checkpoint)\n\n"
                + markdown_table(
                    ["what the call sends", "n", "p50 ms", "p95 ms", "stored bytes", "serialized bytes", "ratio"],
                    rows,
                )
                + f"\n\nCreating the task (first call, whole head sent): {1000 * create:.1f} ms."
            )

            # (b) resume at three budgets; the first call waits for the embedding model.
            _progress("resume: first call (embedding model load)")
            facts["task_memories"] = await task_memories(client)
            first_resume, _ = await bench.resume(4_000)
            rows = []
            for budget in BUDGETS:
                _progress(f"resume: {calls} calls at budget {budget}")
                await bench.resume(budget)  # warm-up
                lat: list[float] = []
                used: list[int] = []
                nbytes: list[int] = []
                text_bytes: list[int] = []
                whole: list[int] = []
                last: dict[str, Any] = {}
                for _ in range(calls):
                    seconds, packet = await bench.resume(budget)
                    lat.append(seconds)
                    used.append(int(packet["used_tokens"]))
                    nbytes.append(len(orjson.dumps(packet)))
                    text_bytes.append(bench.last_text_bytes)
                    whole.append(estimate_tokens(orjson.dumps(packet).decode()))
                    last = packet
                p50, p95 = _ms(lat)
                rows.append(
                    [
                        f"{budget:,}",
                        len(lat),
                        p50,
                        p95,
                        f"{min(used):,}-{max(used):,}",
                        "yes" if max(used) <= budget else "**no**",
                        f"{_p50(whole):,.0f}",
                        f"{_p50(nbytes):,.0f}",
                        f"{_p50(text_bytes):,.0f}",
                        last["tree"].count("\n") + 1,
                        len(last["memories"]),
                        f"{len(last['snapshot_excerpt']):,}",
                    ]
                )
            out.append(
                "### (b) `resume` (no rollback)\n\n"
                + markdown_table(
                    [
                        "budget_tokens",
                        "n",
                        "p50 ms",
                        "p95 ms",
                        "used_tokens",
                        "used <= budget",
                        "whole packet JSON, same estimator",
                        "packet JSON bytes (p50)",
                        "text content bytes (p50)",
                        "tree lines",
                        "memories",
                        "snapshot excerpt chars",
                    ],
                    rows,
                )
                + "\n\nused_tokens is the server's own estimate (`mcp_memory.text.estimate_tokens`); the column "
                "after the check applies the same estimator to the whole packet JSON (keys, ids, timestamps and "
                "memory metadata included), which used_tokens does not count."
                + f"\n\nFirst resume of the process (waits for the embedding model, budget 4,000): "
                f"{1000 * first_resume:.1f} ms; {facts['task_memories']} task memories stored before it."
            )

            # (c) update_task, (d) rollback, (e) the full checkpoint resource.
            _progress(f"update_task: {calls} calls")
            updates = [await bench.update(i) for i in range(calls)]
            _progress(f"rollback: {calls} calls")
            targets = bench.checkpoint_ids[1 : calls + 1]
            rollbacks: list[float] = []
            for target in targets:
                seconds, _ = await bench.resume(4_000, checkpoint_id=target)
                rollbacks.append(seconds)
            _progress(f"resource read: {calls} calls")
            reads: list[float] = []
            read_bytes: list[int] = []
            body: dict[str, Any] = {}
            read_ids = bench.checkpoint_ids[-calls:]
            for checkpoint_id in read_ids:
                seconds, nbytes_read, body = await bench.read_checkpoint(checkpoint_id)
                reads.append(seconds)
                read_bytes.append(nbytes_read)
            bench._check(body.get("snapshot") == bench.snapshot, "the resource's snapshot differs from the one sent")
            rows = [
                ["`update_task`, one `set` edit (status)", len(updates), *_ms(updates), ""],
                ["rollback: `resume` with `checkpoint_id` (budget 4,000)", len(rollbacks), *_ms(rollbacks), ""],
                [
                    "read `memory://tasks/{id}/checkpoints/{checkpoint_id}`",
                    len(reads),
                    *_ms(reads),
                    f"{_p50(read_bytes):,.0f}",
                ],
            ]
            out.append(
                "### (c)-(e) `update_task`, rollback, full checkpoint resource\n\n"
                + markdown_table(["call", "n", "p50 ms", "p95 ms", "bytes (p50)"], rows)
            )
    facts["quick"] = quick
    return "\n\n".join(out), bench, facts


# ----- where a checkpoint's time goes (in-process) ------------------------------------------


def _time(fn: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return percentile(samples, 50)


def _count_strings(value: Any) -> int:
    if isinstance(value, str):
        return 1
    if isinstance(value, dict):
        return sum(1 + _count_strings(v) for v in value.values())
    if isinstance(value, list):
        return sum(_count_strings(v) for v in value)
    return 0


def resume_breakdown(tree: dict[str, Any], snapshot: str, repeat: int) -> str:
    """packet.build (the resume packet) in-process at each budget, beside the token count of the snapshot."""
    head = TaskHead.model_validate(
        {
            "tree": tree,
            "current_node": "p4.e0.t0",
            "variables": variables(1, "p4.e0.t0.s0"),
            "last_tool_calls": tool_calls(1),
            "snapshot": snapshot,
            "iterations": 1,
        }
    )
    _, raw = encode({"head": head.model_dump(mode="json", exclude={"snapshot"})}, head.snapshot)
    now = datetime.now(UTC)
    state = TaskState(
        task_id=TASK_ID,
        namespace=None,
        title="Q4 release",
        goal="Ship the Q4 billing and search release",
        constraints=["No schema change without a tested rollback"],
        head=head,
        head_seq=1,
        created_at=now,
        updated_at=now,
        latest_checkpoint_id=None,
    )
    rows = []
    for budget in BUDGETS:
        build = functools.partial(
            build_packet,
            state,
            elapsed=1.0,
            budget=budget,
            checkpoint=None,
            memories=[],
            pinned=[],
            warnings=[],
            rolled_back_to=None,
            full_uri=None,
        )
        seconds = _time(build, repeat)
        rows.append([f"`packet.build` at budget {budget:,} (no memories)", f"{1000 * seconds:.1f}"])
    rows.append(
        [
            "of which: `estimate_tokens` over the whole snapshot",
            f"{1000 * _time(lambda: estimate_tokens(snapshot), repeat):.1f}",
        ]
    )
    rows.append(
        ["reading the head: unpack + TaskHead.model_validate", f"{1000 * _time(lambda: _read_head(raw), repeat):.1f}"]
    )
    return (
        f"### (g) where a resume's time goes: packet building timed in-process (median of {repeat})\n\n"
        + markdown_table(["step", "ms"], rows)
        + "\n\nNot here: the task-scoped `recall` (query embedding and search) and the transport."
    )


def _read_head(raw: bytes) -> TaskHead:
    envelope = unpack(raw)
    return TaskHead.model_validate({**envelope.structured["head"], "snapshot": envelope.snapshot})


def breakdown(tree: dict[str, Any], snapshot: str, repeat: int) -> str:
    """The server's steps of one checkpoint (tree + state), in the order tasks.checkpoint runs them."""
    head = TaskHead.model_validate(
        {
            "tree": tree,
            "current_node": "p4.e0.t0",
            "variables": variables(1, "p4.e0.t0.s0"),
            "last_tool_calls": tool_calls(1),
            "snapshot": snapshot,
            "iterations": 1,
        }
    )
    _, stored_head = encode({"head": head.model_dump(mode="json", exclude={"snapshot"})}, head.snapshot)
    changes = {"tree": tree, "variables": variables(2, "p4.e0.t1"), "iterations": 2}
    dumped = head.model_dump(mode="json")
    without_snapshot = {k: v for k, v in dumped.items() if k != "snapshot"}
    strings = _count_strings(without_snapshot)
    steps: list[tuple[str, Callable[[], object]]] = [
        ("tool layer: validate `tree` argument into TaskNode", lambda: TaskHead.model_validate({"tree": tree})),
        ("read head: unpack envelope (sha256 + zlib inflate + orjson)", lambda: unpack(stored_head)),
        ("read head: TaskHead.model_validate", lambda: TaskHead.model_validate(dumped)),
        ("merge: model_dump(mode=json) of the base head", lambda: head.model_dump(mode="json")),
        ("merge: TaskHead.model_validate(base | changes)", lambda: TaskHead.model_validate({**dumped, **changes})),
        ("merge: text check of the snapshot", lambda: text_field("snapshot", snapshot)),
        ("merge: tree validate (unique ids)", lambda: task_tree.validate(head.tree)),
        ("clean: redact the snapshot (one string, every pattern)", lambda: redact(snapshot)),
        (
            f"clean: redact_value over the rest ({strings:,} strings and keys)",
            lambda: redact_value(without_snapshot),
        ),
        ("clean: model_dump + model_validate around it", lambda: TaskHead.model_validate(head.model_dump(mode="json"))),
        ("size check: serialised_size", lambda: serialised_size(head)),
        (
            "encode checkpoint envelope (orjson + zlib -6 + sha256)",
            lambda: encode({"head": head.model_dump(mode="json", exclude={"snapshot"})}, head.snapshot),
        ),
        (
            "encode head envelope (same again)",
            lambda: encode({"head": head.model_dump(mode="json", exclude={"snapshot"})}, head.snapshot),
        ),
        ("result: serialised_size again", lambda: serialised_size(head)),
    ]
    rows = []
    total = 0.0
    for label, fn in steps:
        seconds = _time(fn, repeat)
        total += seconds
        rows.append([label, f"{1000 * seconds:.1f}"])
    rows.append(["**sum of the steps above**", f"**{1000 * total:.1f}**"])
    return (
        f"### (f) where a checkpoint's time goes: server steps timed in-process (median of {repeat})\n\n"
        + markdown_table(["step", "ms"], rows)
        + "\n\nNot in the sum: SQLite (two blob writes in one `BEGIN IMMEDIATE` transaction), the JSON-RPC "
        "framing and parsing on both sides, the client's own validation, and resource-change notifications."
    )


# ----- the report --------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="20 calls per measurement instead of 30")
    p.add_argument("--calls", type=int, help="timed calls per measurement (default 30, --quick 20; at least 20)")
    p.add_argument("--no-breakdown", action="store_true", help="skip the in-process timing of the checkpoint steps")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    calls = args.calls or (20 if args.quick else 30)
    if calls < 20:
        print("--calls must be at least 20", file=sys.stderr)
        return 2
    command = "OMP_NUM_THREADS=1 .venv/bin/python " + shlex.join(["tools/bench_tasks.py", *sys.argv[1:]])
    load_before = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    started = time.perf_counter()
    report, bench, facts = anyio.run(run, calls, args.quick)
    elapsed = time.perf_counter() - started
    load_after = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    statuses = ", ".join(f"{k} {v}" for k, v in facts["statuses"].items())
    print(f"## Task checkpoint benchmark\n\nCommand: `{command}`\n")
    print(
        f"Python {platform.python_version()} on {platform.machine()}, server `.venv/bin/mcp-memory serve` over stdio "
        f"(OMP_NUM_THREADS=1), load average {load_before} at the start and {load_after} at the end; "
        f"{elapsed:.0f} s for the MCP part.\n"
    )
    print(
        f"The task: {facts['nodes']:,} nodes over {facts['depth']} levels "
        f"({statuses}; {facts['with_notes']} with notes), "
        f"tree JSON {facts['tree_json_bytes']:,} bytes as sent; snapshot {facts['snapshot_bytes']:,} UTF-8 bytes "
        f"({facts['snapshot_chars']:,} characters; {100 * facts['snapshot_cjk_bytes'] / facts['snapshot_bytes']:.0f}% "
        "of the bytes Chinese). "
        f"Serialized head {facts['serialized_size']:,} bytes (limit {LIMIT:,}), stored envelope "
        f"{facts['stored_size']:,} bytes ({facts['serialized_size'] / facts['stored_size']:.2f}x smaller).\n"
    )
    print(report)
    if not args.no_breakdown:
        _progress("breakdown: timing the checkpoint steps in-process")
        print()
        print(breakdown(bench.tree, bench.snapshot, repeat=5))
        print()
        print(resume_breakdown(bench.tree, bench.snapshot, repeat=5))
    print()
    if bench.problems:
        print("**Problems:**\n\n" + "\n".join(f"- {p}" for p in bench.problems))
    else:
        print(
            "Checks: every checkpoint advanced head_seq and had a new id; every resume kept used_tokens <= "
            "budget_tokens; every rollback named its target; the resource's snapshot equals the one sent."
        )
    return 1 if bench.problems else 0


if __name__ == "__main__":
    sys.exit(main())

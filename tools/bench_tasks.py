"""Task checkpoints at full size, measured through a real MCP stdio client against `mcp-memory serve`.

    OMP_NUM_THREADS=1 .venv/bin/python tools/bench_tasks.py [--quick] [--calls N]

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

Medians and 95th percentiles, never means. Markdown goes to stdout, progress to stderr.
"""

from __future__ import annotations

import argparse
import platform
import random
import shlex
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import orjson
from mcpclient import MemoryClient, ServerSpec, Stopwatch, open_server
from stats import markdown_table, percentile
from task_data import (
    EN_LINES,
    ZH_LINES,
    build_snapshot,
    build_tree,
    fill,
    server_serialised_size,
    tool_calls,
    variables,
    walk,
)

from mcp_memory.core.text import estimate_tokens

LIMIT = 1_048_576  # limits.max_checkpoint_bytes, the default
MARGIN = 24_576  # room left under the limit for the variables and tool calls that change per call
TASK_ID = "bench-release-2026-q4"
BUDGETS = (1_000, 4_000, 16_000)
SEED = 20_261_129


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
    items = [{"content": fill(r, r.choice(EN_LINES + ZH_LINES)), "task_id": TASK_ID} for _ in range(24)]
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
                + "\n\nused_tokens is the server's own estimate (`mcp_memory.core.text.estimate_tokens`); the column "
                "after the check applies the same estimator to the whole packet JSON (keys, ids, timestamps and "
                "memory metadata included); used_tokens counts the same JSON but for the pinned memories, which have "
                "their own cap." + f"\n\nFirst resume of the process (waits for the embedding model, budget 4,000): "
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


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="20 calls per measurement instead of 30")
    p.add_argument("--calls", type=int, help="timed calls per measurement (default 30, --quick 20; at least 20)")
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

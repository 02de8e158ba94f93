"""How often the poisoning flag fires on ordinary memories: the evaluation sets' texts, none of
which is an injection, so every flag is a false positive.

    .venv/bin/python tools/eval_caution.py [--data-dir ../shared/data]

Reads the agent-store and bilingual memories and every LoCoMo turn, observation and summary, and
prints the flagged share per set (target: at most 0.5 %) with the flagged texts.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
from stats import markdown_table, verdict

from mcp_memory.core.caution import caution

TARGET = 0.005


def _locomo(data: Any) -> Iterator[str]:
    for sample in data:
        conversation = sample["conversation"]
        for key, turns in conversation.items():
            if key.startswith("session_") and isinstance(turns, list):
                yield from (t["text"] for t in turns if isinstance(t, dict) and t.get("text"))
        for field in ("observation", "session_summary", "event_summary"):
            yield from _strings(sample.get(field))


def _strings(node: Any) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    args = parser.parse_args()

    def load(name: str) -> Any:
        return orjson.loads((args.data_dir / name).read_bytes())

    sets = {
        "agentstore-dev memories": [m["text"] for s in load("agentstore-dev.json")["stores"] for m in s["memories"]],
        "bilingual-dev memories": [m["text"] for m in load("bilingual-dev.json")["memories"]],
        "locomo-dev turns, observations, summaries": list(_locomo(load("locomo-dev.json"))),
    }
    rows, flagged_texts = [], []
    for name, texts in sets.items():
        flagged = [t for t in texts if caution(t)]
        flagged_texts += flagged
        share = len(flagged) / max(len(texts), 1)
        rows.append([name, len(texts), len(flagged), f"{100 * share:.2f} %", verdict(share <= TARGET)])
    print(markdown_table(["set", "texts", "flagged", "share", f"<= {100 * TARGET:.1f} %"], rows))
    for text in flagged_texts[:20]:
        print(f"- {text[:160]!r}: {caution(text)}")


if __name__ == "__main__":
    main()

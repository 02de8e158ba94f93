"""A DeepSeek agent with long-term memory: the model decides when to call mcp-memory's tools.

    DEEPSEEK_API_KEY=sk-... MCP_MEMORY_TOKEN=mcpm_... \\
        .venv/bin/python examples/deepseek_agent.py http://127.0.0.1:8765/mcp "Which editor theme do I like?"

The model is reached through the `openai` package at DeepSeek's OpenAI-compatible endpoint
(`--llm-base-url` for another one); mcp-memory over streamable HTTP with the bearer token. The
tools the server lists are offered to the model as functions, and each call the model makes is
run through the MCP client; the token never enters the conversation.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import anyio
import orjson
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from openai import AsyncOpenAI

SYSTEM = (
    "You have a long-term memory server. Call recall with the user's question before answering when "
    "earlier context may matter; call remember for facts, preferences and decisions worth keeping."
)


async def run_agent(
    question: str,
    *,
    mcp_url: str,
    token: str,
    llm_api_key: str,
    llm_base_url: str = "https://api.deepseek.com",
    model: str = "deepseek-chat",
    max_steps: int = 6,
) -> str:
    """The model's final answer after at most ``max_steps`` rounds of tool calls."""
    async with (
        create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http,
        Client(streamable_http_client(mcp_url, http_client=http)) as memory,
    ):
        listed = (await memory.list_tools()).tools
        functions: list[Any] = [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description or "", "parameters": t.input_schema},
            }
            for t in listed
        ]
        llm = AsyncOpenAI(base_url=llm_base_url, api_key=llm_api_key)
        messages: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
        for _ in range(max_steps):
            reply = await llm.chat.completions.create(model=model, messages=messages, tools=functions, temperature=0.2)
            message = reply.choices[0].message
            if not message.tool_calls:
                return message.content or ""
            messages.append(message.model_dump(exclude_none=True))
            for tool_call in message.tool_calls:
                if tool_call.type != "function":
                    continue
                arguments = orjson.loads(tool_call.function.arguments or "{}")
                result = await memory.call_tool(tool_call.function.name, arguments)
                content = result.structured_content if result.structured_content is not None else result.content
                payload = orjson.dumps({"is_error": result.is_error, "result": content}, default=_plain).decode()
                messages.append({"role": "tool", "tool_call_id": tool_call.id, "content": payload})
        return "(stopped after the step limit)"


def _plain(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if dump is None:
        raise TypeError(type(value).__name__)
    return dump(mode="json")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mcp_url", help="the mcp-memory HTTP endpoint, e.g. http://127.0.0.1:8765/mcp")
    parser.add_argument("question")
    parser.add_argument("--llm-base-url", default="https://api.deepseek.com")
    parser.add_argument("--model", default="deepseek-chat")
    args = parser.parse_args()
    token, key = os.environ.get("MCP_MEMORY_TOKEN"), os.environ.get("DEEPSEEK_API_KEY")
    if not token or not key:
        sys.stderr.write("set MCP_MEMORY_TOKEN (from `mcp-memory token create`) and DEEPSEEK_API_KEY\n")
        return 2
    answer = anyio.run(
        lambda: run_agent(
            args.question,
            mcp_url=args.mcp_url,
            token=token,
            llm_api_key=key,
            llm_base_url=args.llm_base_url,
            model=args.model,
        )
    )
    print(answer)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

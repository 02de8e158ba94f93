"""mcp-memory: long-term memory and resumable task state for AI agents, over MCP."""

__version__ = "0.1.0"

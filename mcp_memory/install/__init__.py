"""What `mcp-memory install` writes into MCP clients' configuration files (cli/install.py runs it)."""

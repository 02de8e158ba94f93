"""What `mcp-memory install` writes into MCP clients' configuration files (cli_install.py runs it)."""

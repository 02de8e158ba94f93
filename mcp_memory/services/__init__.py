"""Services: the memory rules (write, recall, forget) between the MCP adapters and storage."""

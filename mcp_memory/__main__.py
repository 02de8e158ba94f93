from mcp_memory.cli import main

raise SystemExit(main())

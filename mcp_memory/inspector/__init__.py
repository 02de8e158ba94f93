"""The web inspector: pages to browse, search, correct and delete what the agent remembered, and
to see a task's tree and checkpoints (served under /ui/; see `app.py`)."""

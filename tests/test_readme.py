"""README.md's client configurations for Windows: the same server, started from the .exe."""

from __future__ import annotations

from tests.readme_configs import readme_client_configs


def test_the_windows_configuration_starts_the_same_server_from_the_venvs_exe() -> None:
    configs = readme_client_configs()
    windows = [c for c in configs if c.windows]
    assert windows, "README.md has no Windows client configuration"
    posix = {c.client: c for c in configs if not c.windows and not c.remote}
    for config in windows:
        for entry in config.servers().values():
            assert entry["command"].endswith("\\.venv\\Scripts\\mcp-memory.exe")
            twin = posix["Claude Desktop"].servers()["memory"]
            assert entry["args"] == twin["args"]

"""README.md stays a page a newcomer finishes; its links and the docs site's lead somewhere; the client
configurations for Windows (docs/clients.md) start the same server, from the .exe."""

from __future__ import annotations

import re
from pathlib import Path

from mcp_memory.mcp.table import TOOLS
from tests.readme_configs import README, REPO, readme_client_configs

DOCS = REPO / "docs"
PAGES = [README, *sorted(DOCS.rglob("*.md"))]

# An inline link or image, [text](target) or ![alt](target "title"); code is taken out first.
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", flags=re.S | re.M)
CODE_SPAN = re.compile(r"(`+).+?\1", flags=re.S)


def _links(page: Path) -> list[str]:
    text = CODE_SPAN.sub("", FENCE.sub("", page.read_text(encoding="utf-8")))
    return LINK.findall(text)


def _anchors(page: Path) -> set[str]:
    """The anchors of a page's headings as GitHub and the site's toc both make them from plain words."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    headings = re.findall(r"^#{1,6}\s+(.+?)\s*$", text, flags=re.M)
    return {re.sub(r"\s+", "-", re.sub(r"[^\w\s-]", "", heading.lower()).strip()) for heading in headings}


def test_the_readme_is_at_most_250_lines() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= 250, f"README.md has {lines} lines; move the reference into docs/ (the site) and link it"


def test_every_relative_link_in_the_readme_and_the_docs_names_a_file_that_exists() -> None:
    broken: list[str] = []
    for page in PAGES:
        for target in _links(page):
            if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue  # a URL elsewhere (https:, mailto:) or an anchor in the same page
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve()
            where = f"{page.relative_to(REPO)}: {target}"
            if not resolved.is_file():
                broken.append(f"{where} (no such file)")
            elif page.is_relative_to(DOCS) and not resolved.is_relative_to(DOCS):
                broken.append(f"{where} (outside docs/: the site cannot serve it; name the file as code)")
            elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
                broken.append(f"{where} (no heading makes that anchor)")
    assert not broken, "\n".join(broken)


def test_the_links_this_test_reads_are_found() -> None:
    """The link test above would pass on pages whose links it failed to see."""
    assert {"docs/clients.md", "docs/network.md", "docs/tools.md"} <= set(_links(README))
    assert "clients.md#over-the-network" in _links(DOCS / "network.md")
    assert "over-the-network" in _anchors(DOCS / "clients.md")


def test_every_decision_record_is_listed_in_the_records_index() -> None:
    """The site's nav leaves the records to their index (mkdocs.yml `not_in_nav`), so it must name each."""
    listed = set(_links(DOCS / "adr" / "index.md"))
    records = {path.name for path in (DOCS / "adr").glob("[0-9]*.md")}
    assert records, "no decision records in docs/adr/"
    assert records <= listed, f"docs/adr/index.md does not link {sorted(records - listed)}"


def test_the_windows_configuration_starts_the_same_server_from_the_venvs_exe() -> None:
    configs = readme_client_configs()
    windows = [c for c in configs if c.windows]
    assert windows, "docs/clients.md has no Windows client configuration"
    posix = {c.client: c for c in configs if not c.windows and not c.remote}
    for config in windows:
        for entry in config.servers().values():
            assert entry["command"].endswith("\\.venv\\Scripts\\mcp-memory.exe")
            twin = posix["Claude Desktop"].servers()["memory"]
            assert entry["args"] == twin["args"]


def test_the_tools_table_gives_each_tool_one_short_line_and_its_details_a_section() -> None:
    """recall's row was one cell of ~5,000 characters: the table is for finding a tool, a section
    below it for reading about one. Same-page anchors are checked here (the link test skips them)."""
    page = DOCS / "tools.md"
    text = page.read_text(encoding="utf-8")
    table = text[text.index("| tool | what it does | hints |") :].split("\n\n", 1)[0].splitlines()[2:]
    long = [row[:60] for row in table if len(row) > 200]
    assert not long, f"rows over 200 characters: {long}"
    named = {name for row in table for name in re.findall(r"`(\w+)`", row.split(" | ")[0])}
    assert named == {tool.fn.__name__ for tool in TOOLS}
    anchors = _anchors(page)
    linked = [target[1:] for row in table for target in LINK.findall(row) if target.startswith("#")]
    assert len(linked) == len(table)
    assert [anchor for anchor in linked if anchor not in anchors] == []

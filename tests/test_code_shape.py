"""The code stays readable in pieces: no module of the package over 500 lines, and no function in
services or storage over 60 lines (ruff's C901 and PLR0915 bound branches and statements; this
bounds length, which neither measures)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import MODEL_INDEPENDENT

PACKAGE = Path(__file__).resolve().parent.parent / "mcp_memory"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60


def test_no_module_is_over_500_lines() -> None:
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 40  # positive control: the package was found
    long = {
        str(m.relative_to(PACKAGE)): n for m in modules if (n := len(m.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_no_function_in_services_or_storage_is_over_60_lines() -> None:
    long: dict[str, int] = {}
    for folder in ("services", "storage"):
        for module in sorted((PACKAGE / folder).glob("*.py")):
            for node in ast.walk(ast.parse(module.read_text())):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    assert node.end_lineno is not None
                    lines = node.end_lineno - node.lineno + 1
                    if lines > MAX_FUNCTION_LINES:
                        long[f"{folder}/{module.name}:{node.name}"] = lines
    assert long == {}


def test_every_module_ci_runs_with_one_model_only_exists() -> None:
    """A misspelt name in MODEL_INDEPENDENT would silently run nothing less; one dropped from
    tests/ would leave the list lying."""
    present = {path.stem for path in Path(__file__).parent.glob("test_*.py")}
    assert MODEL_INDEPENDENT - present == set()


def test_row_ids_stay_in_storage() -> None:
    """Above storage a memory is named by its id and ordered by ``written``: a row id names a row of
    one backend's table (SQLite's rowid, PostgreSQL's n), which means nothing in another store."""
    leaks = [
        f"{module.relative_to(PACKAGE)}:{number}"
        for module in sorted(PACKAGE.rglob("*.py"))
        if "storage" not in module.relative_to(PACKAGE).parts
        for number, line in enumerate(module.read_text().splitlines(), 1)
        if "rowid" in line
    ]
    assert (PACKAGE / "storage" / "rows.py").read_text().count("written=")  # positive control: the mapping
    assert leaks == []

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

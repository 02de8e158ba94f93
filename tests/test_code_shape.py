"""The code stays readable in pieces: no module of the package over 500 lines, no function over 60
lines (ruff's C901 and PLR0915 bound branches and statements; this bounds length, which neither
measures), and no decorated function defined inside another (the MCP face registers module-level
functions from one table, ADR 23, not closures decorated inside a ``register_*``), and redaction
called from its three boundaries only (ADR 24)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
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


Function = ast.FunctionDef | ast.AsyncFunctionDef


def _functions(tree: ast.AST, outer: Function | None = None) -> Iterator[tuple[Function, Function | None]]:
    """Every function of the tree with the function it is defined in (None at module or class level)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, Function):
            yield node, outer
            yield from _functions(node, node)
        else:
            yield from _functions(node, outer)


def _package_functions() -> Iterator[tuple[str, Function, Function | None]]:
    for module in sorted(PACKAGE.rglob("*.py")):
        for node, outer in _functions(ast.parse(module.read_text())):
            yield str(module.relative_to(PACKAGE)), node, outer


def _wraps(decorator: ast.expr) -> bool:
    """``@functools.wraps(fn)``: the wrapper a decorator returns, not a registration."""
    call = decorator.func if isinstance(decorator, ast.Call) else decorator
    return ast.unparse(call) in ("functools.wraps", "wraps")


def test_no_function_is_over_60_lines() -> None:
    long: dict[str, int] = {}
    for module, node, _ in _package_functions():
        assert node.end_lineno is not None
        lines = node.end_lineno - node.lineno + 1
        if lines > MAX_FUNCTION_LINES:
            long[f"{module}:{node.name}"] = lines
    assert long == {}


def test_no_decorated_function_is_defined_inside_another() -> None:
    closures = [
        f"{module}:{outer.name}.{node.name}"
        for module, node, outer in _package_functions()
        if outer is not None and any(not _wraps(d) for d in node.decorator_list)
    ]
    assert closures == []


def test_the_shape_checks_see_long_functions_and_decorated_closures() -> None:
    """Positive control: the walk finds what the two tests above must refuse."""
    source = "def register(mcp):\n    @mcp.tool()\n    async def remember():\n" + "        pass\n" * 60
    [(outer, _), (inner, parent)] = list(_functions(ast.parse(source)))
    assert parent is outer
    assert inner.decorator_list
    assert not _wraps(inner.decorator_list[0])
    assert outer.end_lineno is not None
    assert outer.end_lineno - outer.lineno + 1 > MAX_FUNCTION_LINES


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


# The boundaries that may call the redactor (ADR 24): what comes in, what we say (the log filter,
# reused by the client's log notifications and the face's error messages), what goes to a model.
REDACTION_BOUNDARIES = {"services/incoming.py", "logs.py", "llm/client.py"}


def _imports_redact(tree: ast.AST) -> bool:
    """``import mcp_memory.redact``, ``from mcp_memory.redact import ...`` or ``from mcp_memory import redact``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name == "mcp_memory.redact" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.level == 0:
            if node.module == "mcp_memory.redact":
                return True
            if node.module == "mcp_memory" and any(a.name == "redact" for a in node.names):
                return True
    return False


def test_redaction_is_called_from_its_three_boundaries_only() -> None:
    """ "Never stored, never logged, never sent" holds by three modules, not by every caller
    remembering: a text that needs redacting goes through ``services.incoming``, ``logs.scrub`` or
    the LLM client."""
    callers = {
        str(module.relative_to(PACKAGE))
        for module in sorted(PACKAGE.rglob("*.py"))
        if _imports_redact(ast.parse(module.read_text()))
    }
    assert callers == REDACTION_BOUNDARIES
    assert len(callers | {"redact.py"}) <= 4


def test_the_redaction_check_sees_every_form_of_import() -> None:
    """Positive control: each way of reaching the redactor is found, and a look-alike is not."""
    for source in (
        "from mcp_memory.redact import redact",
        "import mcp_memory.redact",
        "from mcp_memory import config, redact",
        "def f():\n    from mcp_memory.redact import secret_kinds",
    ):
        assert _imports_redact(ast.parse(source)), source
    assert not _imports_redact(ast.parse("from mcp_memory.logs import scrub\nfrom mcp_memory import redaction"))


MAX_ROOT_MODULES = 12  # the package root holds the process-wide pieces; the rest sits in its layer's folder


def test_at_most_12_modules_sit_directly_in_the_package() -> None:
    root = sorted(m.name for m in PACKAGE.glob("*.py"))
    assert "__init__.py" in root  # positive control: the root was found
    assert len(root) <= MAX_ROOT_MODULES, root


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(module: str, is_package: bool, tree: ast.AST, known: set[str]) -> set[str]:
    """The package's modules that ``module`` names in any import statement: at module level, under
    ``if TYPE_CHECKING`` and inside functions alike (a lazy import is still a dependency)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom):
            base = module.split(".") if is_package else module.split(".")[:-1]
            parent = ".".join([*base[: len(base) - node.level + 1], node.module or ""]).strip(".")
            target = parent if node.level else node.module or ""
            for alias in node.names:
                name = f"{target}.{alias.name}"
                found.add(name if name in known else target)
    return (found & known) - {module}


def _import_graph() -> dict[str, set[str]]:
    paths = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
    known = set(paths)
    return {m: _imported(m, p.name == "__init__.py", ast.parse(p.read_text()), known) for m, p in paths.items()}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = stack[stack.index(node) :]
                    del stack[stack.index(node) :]
                    if len(component) > 1:
                        found.append(sorted(component))
            elif step not in index:
                index[step] = low[step] = len(index)
                stack.append(step)
                work.append((step, iter(sorted(graph[step]))))
            elif step in stack:
                low[node] = min(low[node], index[step])
    return found


def test_no_import_circles() -> None:
    graph = _import_graph()
    assert "mcp_memory.storage.vector_search" in graph["mcp_memory.storage.sqlite"]  # positive control: edges
    assert _circles(graph) == []


def test_the_circle_check_sees_every_form_of_import() -> None:
    """Positive control: a circle closed by a lazy, a TYPE_CHECKING or a relative import is found."""
    known = {"p", "p.a", "p.b", "p.c"}
    sources = {
        "p.a": "def f():\n    from p import b",
        "p.b": "if TYPE_CHECKING:\n    from p.c import X",
        "p.c": "from .a import g",
    }
    graph = {m: _imported(m, False, ast.parse(sources.get(m, "")), known) for m in known}
    assert graph == {"p": set(), "p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": {"p.a"}}
    assert _circles(graph) == [["p.a", "p.b", "p.c"]]
    assert _circles({**graph, "p.c": set()}) == []

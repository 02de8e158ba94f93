"""The backend seam (ADR 26): how many members the role protocols ask of a new backend, and that
both record stores (SQLite, PostgreSQL), their vector engines and the shared storage classes play
every role they are handed in as.

The count is static (the protocols' source); the conformance is structural: every member a role
names is there, async where the role's is, and takes every argument a caller may pass the role.
mypy checks the same statically through ``_as_memory_store`` below and the composition root.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path
from typing import Any, cast

import pytest

from mcp_memory.config import PostgresSettings
from mcp_memory.services.control_ports import ConfirmationCodes, PassControl, TokenCheck, UiSessions
from mcp_memory.services.ports import (
    BrowseRows,
    CountRows,
    GoldenRows,
    LifecycleRows,
    MemoryRows,
    MemorySearch,
    MemoryStore,
    StoreControl,
    VectorSearch,
)
from mcp_memory.services.task_ports import TaskRows
from mcp_memory.storage.control import ControlStore
from mcp_memory.storage.forget_codes import ForgetCodes
from mcp_memory.storage.pg.store import PostgresStore
from mcp_memory.storage.pg.vector_search import PgVectorSearch
from mcp_memory.storage.qdrant_search import QdrantVectorSearch
from mcp_memory.storage.sqlite import SqliteStore
from mcp_memory.storage.tasks import TaskStore
from mcp_memory.storage.tokens import TokenStore
from mcp_memory.storage.ui_sessions import UiSessionStore

# What a new backend implements: every member of these roles (ADR 26). MemoryStore's own members
# are its four parts (lifecycle, counts, browse, golden); the rest it has from its three roles.
# 97 before the roles (issue 38); keyword_search and flush_reinforcement left.
BACKEND_ROLES: dict[type, int] = {
    MemoryRows: 11,
    MemorySearch: 9,
    StoreControl: 9,
    MemoryStore: 4,
    LifecycleRows: 29,
    CountRows: 6,
    BrowseRows: 4,
    GoldenRows: 9,
    VectorSearch: 7,
    TaskRows: 7,
}
BACKEND_MEMBERS = 95
# What every process of a deployment shares (the control file, or PostgreSQL's shared tables).
DEPLOYMENT_ROLES: dict[type, int] = {PassControl: 5, TokenCheck: 2, UiSessions: 4, ConfirmationCodes: 3}
DEPLOYMENT_MEMBERS = 14


def members(role: type) -> dict[str, str]:
    """The members a protocol class declares itself: name -> "async", "method", "property" or "attribute"."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(role)))
    found: dict[str, str] = {}
    for node in cast(ast.ClassDef, tree.body[0]).body:
        if isinstance(node, ast.AsyncFunctionDef):
            found[node.name] = "async"
        elif isinstance(node, ast.FunctionDef):
            decorators = {d.id for d in node.decorator_list if isinstance(d, ast.Name)}
            found[node.name] = "property" if "property" in decorators else "method"
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            found[node.target.id] = "attribute"
    return found


def every_member(role: type) -> dict[str, str]:
    """A role's members with those of the roles it is made of."""
    found: dict[str, str] = {}
    for base in reversed(role.__mro__):
        if base in BACKEND_ROLES or base in DEPLOYMENT_ROLES:
            found |= members(base)
    return found


def _arguments(signature: inspect.Signature, *, optional: bool) -> tuple[list[object], dict[str, object]]:
    """Arguments a caller of the role may pass: every required one, and with ``optional`` the rest
    too (by keyword, as the services pass them)."""
    args: list[object] = []
    kwargs: dict[str, object] = {}
    for parameter in list(signature.parameters.values())[1:]:  # self
        required = parameter.default is inspect.Parameter.empty
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD) or not (required or optional):
            continue
        if parameter.kind is parameter.KEYWORD_ONLY or not required:
            kwargs[parameter.name] = object()
        else:
            args.append(object())
    return args, kwargs


def shortfalls(role: type, implementation: object) -> list[str]:
    """What ``implementation`` lacks of ``role``: absent members, sync for async, arguments refused."""
    problems = []
    for name, kind in every_member(role).items():
        if not hasattr(implementation, name):
            problems.append(f"{name}: absent")
            continue
        if kind not in ("async", "method"):
            continue
        wanted, given = getattr(role, name), getattr(implementation, name)
        if (kind == "async") != inspect.iscoroutinefunction(given):
            problems.append(f"{name}: {'not ' if kind == 'async' else ''}async, as the role's is")
        for optional in (False, True):
            args, kwargs = _arguments(inspect.signature(wanted), optional=optional)
            try:
                inspect.signature(given).bind(*args, **kwargs)
            except TypeError as exc:
                problems.append(f"{name}: refuses {[*range(len(args)), *kwargs]} ({exc})")
    return problems


def test_a_new_backend_implements_no_more_members_than_adr_26_says() -> None:
    counted = {role.__name__: len(members(role)) for role in BACKEND_ROLES}
    grown = {role.__name__: len(members(role)) for role, n in BACKEND_ROLES.items() if len(members(role)) > n}
    assert not grown, f"roles grew past ADR 26's figures: {grown} (all: {counted})"
    total = sum(counted.values())
    assert total <= BACKEND_MEMBERS, f"{total} members across the roles, more than ADR 26's {BACKEND_MEMBERS}"
    shared = sum(len(members(role)) for role in DEPLOYMENT_ROLES)
    assert shared <= DEPLOYMENT_MEMBERS, f"{shared} members in control_ports, more than {DEPLOYMENT_MEMBERS}"


def test_memory_store_is_its_three_roles_and_four_parts() -> None:
    everything = every_member(MemoryStore)
    assert len(everything) == sum(len(members(r)) for r in (MemoryRows, MemorySearch, StoreControl, MemoryStore))
    assert {name for name, kind in members(MemoryStore).items() if kind == "property"} == {
        "lifecycle",
        "counts",
        "browse",
        "golden",
    }


def test_the_check_finds_what_an_implementation_lacks() -> None:
    class Half:
        async def select_memories(self, scope: object) -> None: ...  # too few parameters

        def find_by_hash(self, scope: object, hashes: object, now: object) -> None: ...  # not async

    problems = shortfalls(MemoryRows, Half())
    assert any(p.startswith("select_memories: refuses") for p in problems), problems
    assert any(p.startswith("find_by_hash: not async") for p in problems), problems
    assert any(p == "apply: absent" for p in problems), problems


def _stores(tmp_path: Path) -> list[SqliteStore | PostgresStore]:
    """Both record stores as the composition root builds them, not opened (nothing here connects)."""
    return [SqliteStore(tmp_path), PostgresStore(PostgresSettings(dsn="postgresql://mcp@localhost/mcp"))]


def _as_memory_store(store: SqliteStore | PostgresStore) -> MemoryStore:
    return store  # mypy holds both stores to every role's signatures here


def test_both_record_stores_play_every_role(tmp_path: Path) -> None:
    for store in _stores(tmp_path):
        as_role = _as_memory_store(store)
        problems = {
            role.__name__: shortfalls(role, implementation)
            for role, implementation in [
                (MemoryStore, store),
                (LifecycleRows, as_role.lifecycle),
                (CountRows, as_role.counts),
                (BrowseRows, as_role.browse),
                (GoldenRows, as_role.golden),
                (VectorSearch, as_role.vectors),
                (TaskRows, TaskStore(store)),
            ]
        }
        assert not any(problems.values()), f"{type(store).__name__}: {problems}"


def test_every_vector_engine_plays_the_search_role(tmp_path: Path) -> None:
    sqlite = SqliteStore(tmp_path)
    postgres = PostgresStore(PostgresSettings(dsn="postgresql://mcp@localhost/mcp"))
    engines = [sqlite.vectors, postgres.vectors, PgVectorSearch(postgres), QdrantVectorSearch(sqlite, cast(Any, None))]
    assert {type(e).__name__ for e in engines} == {
        "ExactVectorSearch",
        "PgIndexSearch",
        "PgVectorSearch",
        "QdrantVectorSearch",
    }
    for engine in engines:
        assert not shortfalls(VectorSearch, engine), f"{type(engine).__name__}: {shortfalls(VectorSearch, engine)}"


# What a backend that runs the shared storage SQL over its connections (ADR 20) writes itself of the
# roles: the rest it inherits from RecordStore and the shared classes (lifecycle, counts, browse,
# golden, tasks), and the vector search from its engine.
OWN_MEMBERS = {
    "erasure_leaves",
    "path_for",
    "at_rest",
    "lease",
    "pool_figures",
    "one_transaction",
    "keyword_searches",
    "reinforce",
    "delete",
    "erase_principal",
}


@pytest.mark.parametrize("backend", [SqliteStore, PostgresStore])
def test_a_backend_on_the_shared_storage_classes_writes_ten_role_members_itself(backend: type) -> None:
    own = {name for name in every_member(MemoryStore) if name in vars(backend)}
    assert own <= OWN_MEMBERS, f"{backend.__name__} writes {sorted(own - OWN_MEMBERS)} itself too (ADR 26 says 10)"


@pytest.mark.parametrize(
    ("role", "kind"),
    [
        (PassControl, ControlStore),
        (TokenCheck, TokenStore),
        (UiSessions, UiSessionStore),
        (ConfirmationCodes, ForgetCodes),
    ],
)
def test_the_control_file_plays_the_deployment_roles(tmp_path: Path, role: type, kind: type) -> None:
    assert not shortfalls(role, kind(tmp_path)), f"{kind.__name__}: {shortfalls(role, kind(tmp_path))}"

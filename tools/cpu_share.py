"""CPU seconds spent by each party of a benchmark, read from /proc: where a call's cost goes.

A closed loop of clients on a small box measures queueing as much as work; the CPU each process
burnt per call says which party the cores were busy with (the bench's own clients, each server,
PostgreSQL), whatever the wait.
"""

from __future__ import annotations

import os
import resource
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")


def process_seconds(pid: int, reaped_children: bool = False) -> float:
    """User + system CPU seconds of ``pid`` (0 when it is gone); with ``reaped_children``, those of
    the children it has waited for too (a PostgreSQL postmaster's ended backends)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = text.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    utime, stime, cutime, cstime = (int(f) for f in fields[11:15])
    return (utime + stime + ((cutime + cstime) if reaped_children else 0)) / _TICK


def children(pid: int) -> list[int]:
    """The live children of ``pid``."""
    try:
        tasks = Path(f"/proc/{pid}/task").iterdir()
        found: list[int] = []
        for task in tasks:
            found += [int(c) for c in (task / "children").read_text().split()]
        return found
    except OSError:
        return []


def postgres_seconds(data_dir: Path) -> float:
    """CPU seconds of a PostgreSQL cluster: its postmaster, its live backends and the ended ones."""
    pid = int((data_dir / "postmaster.pid").read_text().split()[0])
    return process_seconds(pid, reaped_children=True) + sum(process_seconds(c) for c in children(pid))


def own_seconds() -> float:
    """CPU seconds of this process (the bench's clients)."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime

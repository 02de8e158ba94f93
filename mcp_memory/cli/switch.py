"""`mcp-memory switch off | on | status`: the kill switch, for every process on the data directory.

Without --principal the switch covers the whole data directory, whatever MCP_MEMORY_PRINCIPAL or
the config file say; --principal NAME covers that principal, and with --namespace one of its
namespaces. Off means recall returns no memories and says why, remember refuses and writes nothing,
the browsing tools refuse and the lifecycle passes leave those memories alone; tasks and checkpoints
stay readable. On again, nothing is lost: the memories were never touched.
"""

from __future__ import annotations

import sys
import time
from contextlib import closing
from datetime import UTC, datetime

from mcp_memory.compose import record_store
from mcp_memory.config import Settings
from mcp_memory.core.errors import InvalidInputError
from mcp_memory.core.models import Scope, describe_switch, switch_target
from mcp_memory.storage.pool import principal_file
from mcp_memory.storage.switch import SwitchFile


async def run(settings: Settings, state: str, principal: str | None, namespace: str | None) -> int:
    if namespace is not None and principal is None:
        raise InvalidInputError("--namespace", "switches one principal's namespace: give --principal too")
    with closing(SwitchFile.for_settings(settings)) as switches:
        return await _switch(settings, switches, state, principal, namespace)


async def _switch(
    settings: Settings, switches: SwitchFile, state: str, principal: str | None, namespace: str | None
) -> int:
    if state == "status":
        rows = await switches.all()
        if not rows:
            sys.stdout.write("on: no switch was ever turned off\n")
        for target, value, changed, source in rows:
            when = datetime.fromtimestamp(changed, UTC).isoformat(timespec="seconds")
            sys.stdout.write(f"{value}\t{describe_switch(target)}\tsince {when}\t(set by {source})\n")
        return 0
    target = switch_target(principal, namespace)
    await switches.set(target, state, time.time())
    still = await switches.off_for(Scope(principal, namespace)) if state == "on" and principal is not None else []
    if still:  # a broader switch is off: this one being on changes nothing yet
        broader = ", ".join(describe_switch(t) for t, _ in still)
        sys.stderr.write(
            f"{describe_switch(target)} is switched on, but memory stays off there: it is off for {broader}; "
            "turn that on too (`mcp-memory switch on` without flags for every principal)\n"
        )
        return 0
    where = "the PostgreSQL database" if settings.storage.backend == "postgres" else str(settings.data_dir)
    sys.stderr.write(f"memory is now {state} for {describe_switch(target)}, in every process on {where}\n")
    if principal is not None and not await _known(settings, principal):
        # A typo would leave the real principal's memory on: say so, but keep the switch (a
        # principal may be switched before its first call).
        sys.stderr.write(
            f"note: nothing is stored yet for principal {principal!r} on {where}: the switch holds from "
            "its first call on; if you meant a principal that has memories, check the name and run the command again\n"
        )
    return 0


async def _known(settings: Settings, principal: str) -> bool:
    if settings.storage.backend != "postgres":
        return principal_file(settings.data_dir, principal).exists()
    async with record_store(settings) as store:
        return principal in await store.known_principals()

"""The kill switch as the services obey it: memory off for a scope means recall returns no memories
and says why, remember refuses and writes nothing, and the lifecycle leaves the principal alone.
Tasks and checkpoints stay readable. The state lives in the control file, read at every call, so a
call that starts after `mcp-memory switch off` returned is already refused, in every process.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol

from mcp_memory.core.errors import MemoryOffError
from mcp_memory.core.models import Scope, describe_switch
from mcp_memory.core.recalled import Detail, Recollection


class SwitchState(Protocol):
    async def off_for(self, scope: Scope) -> list[tuple[str, float]]:
        """The switches covering ``scope`` that are off, with when each went off (none: memory is on)."""
        ...

    async def off_within(self, principal: str) -> bool:
        """Whether memory is off anywhere in ``principal``'s store (one of its namespaces included)."""
        ...


async def off_reason(switch: SwitchState | None, scope: Scope) -> str | None:
    """Why memory is off for ``scope``, in words; None when it is on."""
    if switch is None:
        return None
    found = await switch.off_for(scope)
    if not found:
        return None
    target, since = min(found, key=lambda f: f[1])
    when = datetime.fromtimestamp(since, UTC).isoformat(timespec="seconds")
    return (
        f"memory is switched off for {describe_switch(target)} since {when} (no memory is read or written); "
        "the person who runs this server turns it back on with `mcp-memory switch on`"
    )


async def refuse_if_off(switch: SwitchState | None, scope: Scope, what: str = "nothing was stored") -> None:
    reason = await off_reason(switch, scope)
    if reason is not None:
        raise MemoryOffError(f"{what}: {reason}")


def nothing_recalled(query: str, preset: str, budget: int, reason: str, detail: Detail) -> Recollection:
    """Recall's answer while memory is off: no memories, and why."""
    return Recollection(
        query=query,
        hits=[],
        pinned=[],
        detail=detail,
        preset=preset,
        budget_tokens=budget,
        used_tokens=0,
        omitted_for_budget=0,
        note=reason,
    )

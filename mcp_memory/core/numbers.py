"""Numbers and flags as typed JSON: a tool argument or a stored head field is not coerced from a
string (nor a flag from a number), and the refusal names the fix."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator


def _number(value: Any) -> Any:
    """pydantic's lax mode turns "10" into 10 and true into 1; a tool argument is typed JSON, so a
    quoted number or a flag where a number goes is the caller's mistake and is named as one."""
    if isinstance(value, str):
        raise ValueError(f"takes a JSON number, not the string {value[:24]!r}; drop the quotes")
    if isinstance(value, bool):
        raise ValueError(f"takes a JSON number, not {str(value).lower()}")
    return value


def _flag(value: Any) -> Any:
    """As ``_number``, for true/false: "yes" and 1 are not read as true."""
    if isinstance(value, str):
        raise ValueError(f"takes true or false, not the string {value[:24]!r}; drop the quotes")
    if not isinstance(value, bool):
        raise ValueError(f"takes true or false, not {value!r}")
    return value


# Numbers and flags as tool arguments: not coerced from strings (nor each other).
Int = Annotated[int, BeforeValidator(_number)]
Float = Annotated[float, BeforeValidator(_number)]
Bool = Annotated[bool, BeforeValidator(_flag)]

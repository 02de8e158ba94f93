"""What every inspector page shares: the services it reads through, the templates, the security
headers, and `page`, which admits only a signed-in visitor (and, on a POST, only a form that
carries the session's CSRF secret) and turns a refusal into a page that names the problem."""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from mcp_memory.core.errors import AccessDeniedError, MemoryServerError, NotFoundError
from mcp_memory.inspector.auth import SignIn, Visitor
from mcp_memory.scope import REQUEST_ID_KEY
from mcp_memory.services.browse import BrowseService
from mcp_memory.services.erasure import ErasureService
from mcp_memory.services.memory import MemoryService
from mcp_memory.services.ports import CountRows
from mcp_memory.services.stats import StatsService
from mcp_memory.services.tasks import TaskService

log = logging.getLogger("mcp_memory.inspector")
ROOT = "/ui"
# No script at all: every page is server-rendered, every chart an SVG drawn on the server.
CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",  # no-referrer would send "Origin: null" with every form
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}


@dataclass
class Inspector:
    """The services the pages use: the same ones, with the same scope rules, as the MCP tools."""

    memory: MemoryService
    browse: BrowseService
    tasks: TaskService
    stats: StatsService
    erasure: ErasureService
    counts: CountRows
    signin: SignIn
    secure_cookie: bool = False


def _when(value: datetime | str | None) -> str:
    if isinstance(value, str):  # an ISO 8601 time (the passes' records)
        value = datetime.fromisoformat(value)
    return "" if value is None else value.strftime("%Y-%m-%d %H:%M UTC")


def _label(key: str) -> str:
    """A count's key as words: "tier:active" -> "active", "level:L0" -> "level 0", "wal_emptied"."""
    name = key.split(":", 1)[-1]
    if name[:1] == "L" and name[1:].isdigit():
        return f"level {name[1:]}"
    return name.replace("_", " ")


def url_segment(value: object) -> str:
    """A path segment: every reserved character encoded, dots too (so ".." stays an id)."""
    return quote(str(value), safe="").replace(".", "%2E")


TEMPLATES = Environment(
    loader=PackageLoader("mcp_memory.inspector", "templates"),
    autoescape=select_autoescape(default=True),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
TEMPLATES.filters["when"] = _when
TEMPLATES.filters["url"] = url_segment
TEMPLATES.filters["label"] = _label
TEMPLATES.globals["root"] = ROOT


def html(template: str, status: int = 200, **context: Any) -> HTMLResponse:
    context.setdefault("visitor", None)
    context.setdefault("notice", None)
    body = TEMPLATES.get_template(template).render(**context)
    return HTMLResponse(body, status_code=status, headers=SECURITY_HEADERS)


# What a page may say when it is reached without a session; anything else a notice says is signed
# with the session's secret, so no link from elsewhere can put words on a page.
PUBLIC_NOTICES = {
    "signin": "Sign in to see this page.",
    "signedout": "Signed out.",
    "erased": "Everything of that user was erased; only the receipt remains.",
}


def _signature(secret: str, text: str) -> str:
    return hmac.new(secret.encode(), text.encode(), hashlib.sha256).hexdigest()[:32]


def redirect(path: str, notice: str | None = None, visitor: Visitor | None = None) -> RedirectResponse:
    """303 to ``path``; ``notice`` is signed for the visitor, or one of PUBLIC_NOTICES' keys."""
    query = ""
    if notice and visitor is not None:
        query = f"notice={quote(notice)}&sig={_signature(visitor.csrf, notice)}"
    elif notice:
        assert notice in PUBLIC_NOTICES, notice
        query = f"notice={notice}"
    target = path + (("&" if "?" in path else "?") + query if query else "")
    return RedirectResponse(target, status_code=303, headers=SECURITY_HEADERS)


def notice_of(request: Request, visitor: Visitor | None) -> str | None:
    """The notice the server wrote into this page's address, if it is the server's."""
    text, signature = request.query_params.get("notice", ""), request.query_params.get("sig", "")
    if visitor is not None and signature:
        return text if hmac.compare_digest(signature, _signature(visitor.csrf, text)) else None
    return PUBLIC_NOTICES.get(text)


# A correction goes through the tools' checks, whose messages name the argument of a `remember` item;
# on a page they name the form's own fields.
_FORM_FIELDS = {"content": "Text", "kind": "Kind", "tags": "Tags", "importance": "Importance"}
_ITEM_FIELD = re.compile(r"\bmemories\[0\]\.(\w+)")


def in_form_words(problem: str) -> str:
    return _ITEM_FIELD.sub(lambda m: _FORM_FIELDS.get(m.group(1), m.group(1)), problem)


def status_of(exc: MemoryServerError) -> int:
    if isinstance(exc, NotFoundError):
        return 404
    if isinstance(exc, AccessDeniedError):
        return 403
    return 400


Handler = Callable[[Request, Visitor, Inspector], Awaitable[Response]]


def inspector_of(request: Request) -> Inspector:
    found: Inspector = request.app.state.inspector
    return found


def page(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        inspector = inspector_of(request)
        visitor = await inspector.signin.visitor(request.cookies.get(inspector.signin.cookie))
        if visitor is None:
            if request.method == "GET":
                return redirect(f"{ROOT}/?next={quote(request.url.path)}", "signin")
            local = inspector.signin.local is not None
            return html("login.html", 401, problem="Your session has ended: sign in again.", local=local, next="")
        if request.method == "POST":
            form = await request.form()
            if not visitor.csrf_ok(str(form.get("csrf", ""))):
                problem = "This form is stale or came from another site. Reload the page and try again."
                return html("error.html", 403, visitor=visitor, problem=problem)
            log.info("inspector: %s by %s on %s", handler.__name__, visitor.scope.principal, request.url.path)
        try:
            return await handler(request, visitor, inspector)
        except MemoryServerError as exc:
            return html("error.html", status_of(exc), visitor=visitor, problem=in_form_words(str(exc)))
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            return html("error.html", 400, visitor=visitor, problem=f"The form has a bad value ({problems}).")
        except Exception:
            request_id = request.scope.get(REQUEST_ID_KEY, "-")
            log.exception("inspector page %s failed (request %s)", handler.__name__, request_id)
            problem = (
                f"Something failed inside the server on this page (request {request_id}); its log has the details."
            )
            return html("error.html", 500, visitor=visitor, problem=problem)

    endpoint.__name__ = handler.__name__
    return endpoint


async def form_text(request: Request, name: str) -> str:
    value = (await request.form()).get(name, "")
    return value if isinstance(value, str) else ""

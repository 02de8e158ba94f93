"""The web inspector's app: sign-in and sign-out, the home page of health pictures, `forget_user`
with its confirmation, the stylesheet, and the memory and task pages (ADR 17).

It is served under /ui/ by `serve --transport http|sse` (sign in with a bearer token) and by
`mcp-memory ui` (the local principal, through a one-time link). Every page reads and writes
through the same services as the MCP tools, in the visitor's scope.
"""

from __future__ import annotations

import time
from importlib.resources import files
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route

from mcp_memory import metrics
from mcp_memory.core.errors import InvalidInputError
from mcp_memory.core.models import GONE_EVENTS
from mcp_memory.inspector import charts, memory_pages, task_pages
from mcp_memory.inspector.auth import Visitor
from mcp_memory.inspector.base import (
    ROOT,
    SECURITY_HEADERS,
    Inspector,
    form_text,
    html,
    inspector_of,
    notice_of,
    page,
    redirect,
)
from mcp_memory.mcp.wire_upkeep import forget_user_result, stats_result
from mcp_memory.services.control_ports import UiSessionRecord

DAYS = 30


STATIC = {"inspector.css": "text/css", "icon.svg": "image/svg+xml"}


async def static(request: Request) -> Response:
    name = request.path_params["name"]
    if name not in STATIC:
        return Response(b"", status_code=404, headers=SECURITY_HEADERS)
    body = files("mcp_memory.inspector").joinpath("static", name).read_bytes()
    return Response(body, media_type=STATIC[name], headers={**SECURITY_HEADERS, "cache-control": "max-age=3600"})


def _within(wanted: str) -> str:
    """Where to go after signing in: a page of the inspector, never elsewhere ("" when not)."""
    return wanted if wanted.startswith(f"{ROOT}/") and "\\" not in wanted else ""


def _signed_in(session_id: str, session: UiSessionRecord, inspector: Inspector, wanted: str = "") -> Response:
    response = RedirectResponse(_within(wanted) or f"{ROOT}/", status_code=303, headers=SECURITY_HEADERS)
    response.set_cookie(
        inspector.signin.cookie,
        session_id,
        max_age=max(1, int(session.expires_at - time.time())),
        path=f"{ROOT}/",
        secure=inspector.secure_cookie,
        httponly=True,
        samesite="strict",
    )
    return response


async def home(request: Request) -> Response:
    inspector = inspector_of(request)
    visitor = await inspector.signin.visitor(request.cookies.get(inspector.signin.cookie))
    if visitor is None:
        local = inspector.signin.local is not None
        wanted = _within(request.query_params.get("next", ""))
        return html("login.html", problem=None, local=local, notice=notice_of(request, None), next=wanted)
    return await _health(request, visitor, inspector)


async def login(request: Request) -> Response:
    inspector = inspector_of(request)
    local = inspector.signin.local is not None
    if request.method == "GET":  # the one-time link `mcp-memory ui` opens
        opened = await inspector.signin.with_code(request.query_params.get("once", ""))
        problem = "This sign-in link was used already or has expired: ask for a new one below."
    else:
        opened = await inspector.signin.with_token(await form_text(request, "token"))
        problem = "That token is unknown, revoked or expired. Paste the bearer token your MCP client uses."
    if opened is None:
        return html("login.html", 401, problem=problem, local=local, next="")
    return _signed_in(*opened, inspector, await form_text(request, "next") if request.method == "POST" else "")


async def new_link(request: Request) -> Response:
    """The local inspector tells a fresh one-time link on its terminal (a spent or lost link)."""
    inspector = inspector_of(request)
    told = inspector.signin.new_link(str(request.base_url).rstrip("/") + ROOT) is not None
    problem = None if told else "This inspector signs in with tokens: paste yours."
    notice = "A new sign-in link was printed where `mcp-memory ui` runs." if told else None
    return html("login.html", 200 if told else 400, problem=problem, local=told, notice=notice, next="")


@page
async def logout(request: Request, visitor: Visitor, inspector: Inspector) -> Response:
    await inspector.signin.sign_out(visitor.session_id)
    response = redirect(f"{ROOT}/", "signedout")
    response.delete_cookie(inspector.signin.cookie, path=f"{ROOT}/", httponly=True, samesite="strict")
    return response


async def _health(request: Request, visitor: Visitor, inspector: Inspector) -> Response:
    stats = stats_result(await inspector.stats.stats(visitor.scope))
    now = time.time()
    rows = await inspector.counts.timeline(visitor.scope, DAYS, now)
    days = [time.strftime("%m-%d", time.gmtime(now - ago * 86_400)) for ago in range(DAYS - 1, -1, -1)]

    def series(pick: Any, name: str) -> charts.Series:
        values = [0.0] * DAYS
        for ago, tier, level, count in rows:
            if pick(tier, level) and ago < DAYS:
                values[DAYS - 1 - ago] += count
        return charts.Series(name, values)

    by_tier = [series(lambda t, _l, tier=tier: t == tier, tier) for tier in ("active", "archived")]
    by_level = [series(lambda _t, lv, level=level: lv == level, f"level {level}") for level in range(4)]
    latency = metrics.TOOL_SECONDS.counts(tool="recall")
    bounds = [f"{b * 1000:g}" if b != float("inf") else "more" for b, _ in latency]
    llm = stats.llm or {}
    pictures = {
        "Memories written per day, by tier": charts.bars("Memories written per day, by tier", days, by_tier),
        "Memories written per day, by level": charts.bars("Memories written per day, by level", days, by_level),
        "Recall latency in this process (calls per bucket, ms at most)": charts.bars(
            "Recall latency in this process", bounds, [charts.Series("calls", [float(c) for _, c in latency])]
        ),
    }
    if llm:
        used = [float(llm.get("calls_today", 0)), float(llm.get("tokens_today", 0)) / 1000]
        budget = [float(llm.get("calls_per_day", 0)), float(llm.get("tokens_per_day", 0)) / 1000]
        left = [max(0.0, b - u) for b, u in zip(budget, used, strict=True)]
        pictures["LLM use today against the budget"] = charts.bars(
            "LLM use today against the budget",
            ["calls", "thousand tokens"],
            [charts.Series("used", used), charts.Series("left", left)],
        )
    receipts = {name: count for name, count in stats.events.items() if name in GONE_EVENTS}
    return html(
        "home.html",
        visitor=visitor,
        stats=stats,
        pictures=pictures,
        receipts=receipts,
        gone=await inspector.browse.receipts(visitor.scope, 20),
        notice=notice_of(request, visitor),
    )


@page
async def forget_user(request: Request, visitor: Visitor, inspector: Inspector) -> Response:
    code = (await form_text(request, "confirmation_code")).strip() or None
    try:
        result = forget_user_result(await inspector.erasure.forget_user(visitor.scope, code))
    except InvalidInputError:
        problem = "That code did not match, and nothing was deleted. Start again for a new code."
        return html("error.html", 400, visitor=visitor, problem=problem)
    if result.dry_run:
        return html("forget_user.html", visitor=visitor, result=result)
    await inspector.signin.sign_out_everywhere(visitor.scope.principal)
    response = html("erased.html", result=result)
    response.delete_cookie(inspector.signin.cookie, path=f"{ROOT}/", httponly=True, samesite="strict")
    return response


async def _not_here(request: Request, exc: Exception) -> Response:
    status = getattr(exc, "status_code", 404)
    problem = "No such page in the inspector." if status == 404 else "That page does not take this kind of request."
    return html("error.html", status, problem=problem)


def inspector_app(inspector: Inspector) -> Starlette:
    """The inspector as an ASGI app answering every path under /ui/."""
    routes = [
        Route("/", home),
        Route("/login", login, methods=["GET", "POST"]),
        Route("/login/new-link", new_link, methods=["POST"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/forget-user", forget_user, methods=["POST"]),
        Route("/static/{name}", static),
        *memory_pages.ROUTES,
        *task_pages.ROUTES,
    ]
    app = Starlette(
        routes=[Mount(ROOT, routes=routes)],
        exception_handlers={404: _not_here, 405: _not_here},
    )
    app.state.inspector = inspector
    return app

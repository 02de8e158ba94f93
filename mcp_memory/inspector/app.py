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
from mcp_memory.inspector import charts, memory_pages, task_pages
from mcp_memory.inspector.auth import COOKIE, Visitor
from mcp_memory.inspector.base import ROOT, SECURITY_HEADERS, Inspector, form_text, html, inspector_of, page, redirect
from mcp_memory.services.control_ports import UiSessionRecord

DAYS = 30
GONE_EVENTS = ("forgotten", "expired", "evicted", "undone")


STATIC = {"inspector.css": "text/css", "icon.svg": "image/svg+xml"}


async def static(request: Request) -> Response:
    name = request.path_params["name"]
    if name not in STATIC:
        return Response(b"", status_code=404, headers=SECURITY_HEADERS)
    body = files("mcp_memory.inspector").joinpath("static", name).read_bytes()
    return Response(body, media_type=STATIC[name], headers={**SECURITY_HEADERS, "cache-control": "max-age=3600"})


def _signed_in(session_id: str, session: UiSessionRecord, inspector: Inspector) -> Response:
    response = RedirectResponse(f"{ROOT}/", status_code=303, headers=SECURITY_HEADERS)
    response.set_cookie(
        COOKIE,
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
    visitor = await inspector.signin.visitor(request.cookies.get(COOKIE))
    if visitor is None:
        local = inspector.signin.local is not None
        return html("login.html", problem=None, local=local, notice=request.query_params.get("notice"))
    return await _health(request, visitor, inspector)


async def login(request: Request) -> Response:
    inspector = inspector_of(request)
    local = inspector.signin.local is not None
    if request.method == "GET":  # the one-time link `mcp-memory ui` opens
        opened = await inspector.signin.with_code(request.query_params.get("once", ""))
        problem = "This sign-in link was used already or has expired: run `mcp-memory ui` again."
    else:
        opened = await inspector.signin.with_token(await form_text(request, "token"))
        problem = "That token is unknown, revoked or expired. Paste the bearer token your MCP client uses."
    if opened is None:
        return html("login.html", 401, problem=problem, local=local)
    return _signed_in(*opened, inspector)


@page
async def logout(request: Request, visitor: Visitor, inspector: Inspector) -> Response:
    await inspector.signin.sign_out(visitor.session_id)
    response = redirect(f"{ROOT}/", "Signed out.")
    response.delete_cookie(COOKIE, path=f"{ROOT}/", httponly=True, samesite="strict")
    return response


async def _health(request: Request, visitor: Visitor, inspector: Inspector) -> Response:
    stats = await inspector.stats.stats(visitor.scope)
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
    bounds = [f"≤{b * 1000:g} ms" if b != float("inf") else "more" for b, _ in latency]
    llm = stats.llm or {}
    pictures = {
        "Memories written per day, by tier": charts.bars("Memories written per day, by tier", days, by_tier),
        "Memories written per day, by level": charts.bars("Memories written per day, by level", days, by_level),
        "Recall latency (this process)": charts.bars(
            "Recall latency (this process)", bounds, [charts.Series("calls", [float(c) for _, c in latency])]
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
        notice=request.query_params.get("notice"),
    )


@page
async def forget_user(request: Request, visitor: Visitor, inspector: Inspector) -> Response:
    code = (await form_text(request, "confirmation_code")).strip() or None
    result = await inspector.erasure.forget_user(visitor.scope, code)
    if result.dry_run:
        return html("forget_user.html", visitor=visitor, result=result)
    await inspector.signin.sign_out(visitor.session_id)
    response = html("erased.html", result=result)
    response.delete_cookie(COOKIE, path=f"{ROOT}/", httponly=True, samesite="strict")
    return response


def inspector_app(inspector: Inspector) -> Starlette:
    """The inspector as an ASGI app answering every path under /ui/."""
    routes = [
        Route("/", home),
        Route("/login", login, methods=["GET", "POST"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/forget-user", forget_user, methods=["POST"]),
        Route("/static/{name}", static),
        *memory_pages.ROUTES,
        *task_pages.ROUTES,
    ]
    app = Starlette(routes=[Mount(ROOT, routes=routes)])
    app.state.inspector = inspector
    return app

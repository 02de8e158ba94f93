"""The web inspector in a real browser: Debian's Chromium, driven by Playwright, against a real
`mcp-memory serve --transport http`, with the data written and checked over MCP by the SDK's
client on the same server."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx2
import pytest
from mcp.client import Client
from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright

from tests.conftest import call
from tests.netserver import (
    SERVER_BIN,
    NetServer,
    connect,
    create_token,
    local_store,
    revoke,
    running,
    server_env,
)

pytestmark = [pytest.mark.slow, pytest.mark.model_independent]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# As the machine's notes advise: no sandbox as root, and no background calls to a closed network.
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
T = TypeVar("T")


def over_mcp(server: NetServer, token: str, work: Callable[[Client], Awaitable[T]]) -> T:
    """Run ``work`` with an MCP client of the token's principal, on a thread of its own (the
    browser's sync API holds this one)."""

    async def session() -> T:
        async with connect(server, token, "legacy") as client:
            return await work(client)

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(anyio.run, session).result(timeout=120)


class World:
    def __init__(self, server: NetServer, data_dir: Path, tokens: dict[str, str]) -> None:
        self.server, self.data_dir = server, data_dir
        self.alice, self.bob, self.carol = tokens["alice"], tokens["bob"], tokens["carol"]
        self.ids: dict[str, str] = {}
        self.checkpoints: list[str] = []

    def ui(self, path: str = "/") -> str:
        return f"{self.server.base}/ui{path}"


TREE = {
    "id": "root",
    "title": "Move billing to v2",
    "status": "in_progress",
    "children": [
        {"id": "staging", "title": "Deploy to staging", "status": "in_progress"},
        {"id": "email", "title": "Email customers", "status": "pending"},
    ],
}


async def _seed(client: Client) -> tuple[dict[str, str], list[str]]:
    ids: dict[str, str] = {}
    for key, text in (
        ("tea", "The user drinks oolong tea without sugar"),
        ("vim", "The user uses vim keybindings"),
        ("berlin", "用户住在柏林"),
        ("editor", "The user's laptop is a ThinkPad X1"),
        ("cats", "Alice likes cats"),
    ):
        kind = "preference" if key == "cats" else "fact"
        ids[key] = (await call(client, "remember", {"content": text, "kind": kind}))["items"][0]["id"]
    dogs = await call(client, "remember", {"content": "Alice likes dogs", "kind": "preference"})
    ids["dogs"] = dogs["items"][0]["id"]
    assert dogs["items"][0]["conflicts_with"] == [ids["cats"]]
    first = await call(
        client,
        "checkpoint",
        {
            "task_id": "billing-v2",
            "title": "Billing v2 migration",
            "goal": "Move every customer to billing v2",
            "tree": TREE,
            "current_node": "staging",
            "variables": {"branch": "release-2.0"},
            "pending_actions": [{"text": "send the announcement email", "external": True, "irreversible": True}],
            "reason": "phase_change",
        },
    )
    second = await call(
        client,
        "checkpoint",
        {"task_id": "billing-v2", "current_node": "email", "variables": {"branch": "release-2.1"}, "reason": "manual"},
    )
    return ids, [first["checkpoint"]["id"], second["checkpoint"]["id"]]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    data_dir = tmp_path_factory.mktemp("inspector") / "data"
    data_dir.mkdir()
    tokens = {name: create_token(data_dir, name) for name in ("alice", "bob", "carol")}
    with running(data_dir, "http", env={"MCP_MEMORY_HTTP__ALLOWED_HOSTS": '["memory.example.test"]'}) as server:
        world = World(server, data_dir, tokens)
        world.ids, world.checkpoints = over_mcp(server, world.alice, _seed)
        yield world


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian's chromium is not installed: `sh tools/bootstrap.sh --dev` installs it (apt-get)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield launched
        launched.close()


class Watched:
    """A browser context whose page errors and the policy's refusals are kept."""

    def __init__(self, context: BrowserContext) -> None:
        self.context = context
        self.page = context.new_page()
        self.errors: list[str] = []
        # An answer's status (a 401 for a wrong token) is logged as an error too: only refusals count.
        self.page.on("console", lambda m: self.errors.append(m.text) if "Refused" in m.text else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))


@pytest.fixture
def visit(browser: Browser) -> Iterator[Watched]:
    context = browser.new_context()
    watched = Watched(context)
    yield watched
    context.close()


def sign_in(page: Page, world: World, token: str) -> None:
    page.goto(world.ui("/"))
    page.get_by_label("Bearer token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Health")).to_be_visible()


def test_sign_in_with_a_token_shows_the_health_pictures_under_a_strict_policy(world: World, visit: Watched) -> None:
    page = visit.page
    answer = page.goto(world.ui("/"))
    assert answer is not None
    assert "script-src" not in answer.headers["content-security-policy"]  # default-src 'none': no script
    assert "default-src 'none'" in answer.headers["content-security-policy"]
    page.get_by_label("Bearer token").fill("mcpm_not-a-real-token")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("unknown, revoked or expired")
    sign_in(page, world, world.alice)
    expect(page.locator("svg.chart")).to_have_count(3)
    # Today's six memories are drawn as bars in the tier chart.
    expect(page.locator("svg.chart").first.locator("rect.bar")).not_to_have_count(0)
    (cookie,) = [c for c in visit.context.cookies() if c["name"] == "mcpm_ui"]
    assert cookie["httpOnly"]
    assert cookie["sameSite"] == "Strict"
    assert cookie["expires"] > time.time()
    assert visit.errors == []  # the stylesheet and the SVGs load under the policy, nothing is refused


def test_search_finds_what_was_remembered_over_mcp_in_english_and_chinese(world: World, visit: Watched) -> None:
    page = visit.page
    sign_in(page, world, world.alice)
    page.get_by_role("link", name="Memories").click()
    page.get_by_label("Search (recall)").fill("What does the user like to drink?")
    page.get_by_role("button", name="Search").click()
    first = page.locator("li.hit").first
    expect(first.locator("a.text")).to_have_text("The user drinks oolong tea without sugar")
    expect(first.locator(".why")).to_contain_text("Why: ")
    first.get_by_text("Every signal").click()
    expect(first.locator("table.signals")).to_contain_text("relevance")
    page.get_by_label("Search (recall)").fill("用户住在哪里")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("li.hit").first.locator("a.text")).to_have_text("用户住在柏林")
    page.goto(world.ui("/memories?kind=preference"))
    expect(page.locator("table.listing tbody tr")).to_have_count(2)  # cats and dogs, nothing else
    assert visit.errors == []


def test_a_correction_keeps_history_and_recall_over_mcp_returns_it(world: World, visit: Watched) -> None:
    page = visit.page
    sign_in(page, world, world.alice)
    page.goto(world.ui(f"/memories/{world.ids['editor']}"))
    page.get_by_label("Text").fill("The user's laptop is a ThinkPad T14")
    page.get_by_role("button", name="Correct (keeps history)").click()
    expect(page.get_by_role("status")).to_contain_text("Corrected (text)")
    expect(page.locator("ol.versions")).to_contain_text("The user's laptop is a ThinkPad X1")
    new_id = page.url.rsplit("/", 1)[-1].split("?")[0]
    assert new_id != world.ids["editor"]

    async def ask(client: Client) -> dict[str, Any]:
        return await call(client, "recall", {"query": "which laptop does the user have", "reinforce": False})

    hits = over_mcp(world.server, world.alice, ask)["hits"]
    assert hits[0]["id"] == new_id
    assert hits[0]["text"] == "The user's laptop is a ThinkPad T14"
    # Forgetting the correction takes the version it replaced too: no earlier wording stays behind.
    page.get_by_role("button", name="Forget…").click()
    expect(page.locator("ul.dry-run li")).to_have_count(2)
    page.get_by_role("button", name="Delete it").click()
    expect(page.get_by_role("status")).to_contain_text("Forgotten: 2 deleted")

    async def old(client: Client) -> str:
        answer = await client.call_tool("get_memory", {"id": world.ids["editor"]})
        assert answer.is_error
        return str(answer.content)

    assert "forgotten" in over_mcp(world.server, world.alice, old)


def test_forget_lists_first_then_deletes_and_recall_over_mcp_no_longer_finds_it(world: World, visit: Watched) -> None:
    page = visit.page
    sign_in(page, world, world.alice)
    page.goto(world.ui(f"/memories/{world.ids['vim']}"))
    page.get_by_role("button", name="Forget…").click()
    expect(page.locator("ul.dry-run")).to_contain_text("The user uses vim keybindings")

    async def ask(client: Client) -> dict[str, Any]:
        return await call(client, "recall", {"query": "which editor keybindings", "reinforce": False})

    assert world.ids["vim"] in [h["id"] for h in over_mcp(world.server, world.alice, ask)["hits"]]  # not yet
    page.get_by_role("button", name="Delete it").click()
    expect(page.get_by_role("status")).to_contain_text("Forgotten: 1 deleted from every table and index")
    assert world.ids["vim"] not in [h["id"] for h in over_mcp(world.server, world.alice, ask)["hits"]]
    page.goto(world.ui("/"))
    receipt = page.locator("table.receipts tr", has_text=world.ids["vim"])
    expect(receipt).to_contain_text("forgotten")
    expect(page.locator("table.receipts")).not_to_contain_text("vim keybindings")  # content-free


def test_a_conflict_is_settled_side_by_side_and_mcp_sees_the_verdict(world: World, visit: Watched) -> None:
    page = visit.page
    sign_in(page, world, world.alice)
    page.get_by_role("link", name="Conflicts").click()
    pair = page.locator("section.pair")
    expect(pair).to_have_count(1)
    expect(pair).to_contain_text("Alice likes cats")
    expect(pair).to_contain_text("Alice likes dogs")
    first_id = pair.locator("input[name=first]").get_attribute("value")
    dogs_button = "Keep the second" if first_id == world.ids["cats"] else "Keep the first"
    pair.get_by_role("button", name=dogs_button).click()
    expect(page.get_by_role("status")).to_contain_text("The other one is replaced")
    expect(page.locator("section.pair")).to_have_count(0)

    async def look(client: Client) -> dict[str, Any]:
        return await call(client, "get_memory", {"id": world.ids["cats"]})

    assert over_mcp(world.server, world.alice, look)["memory"]["superseded_by"] == world.ids["dogs"]


def test_a_task_tree_diff_and_rollback_agree_with_resume_over_mcp(world: World, visit: Watched) -> None:
    page = visit.page
    sign_in(page, world, world.alice)
    page.get_by_role("link", name="Tasks").click()
    page.get_by_role("link", name="Billing v2 migration").click()
    tree = page.locator("ul.tree")
    expect(tree).to_contain_text("Deploy to staging")
    expect(tree.locator("li.current")).to_contain_text("Email customers")
    expect(page.locator("ul.pending li.irreversible")).to_contain_text("send the announcement email")
    first, second = world.checkpoints
    page.get_by_label(f"diff from {first}").check()
    page.get_by_label(f"diff to {second}").check()
    page.get_by_role("button", name="Show the diff").click()
    expect(page.locator("pre.diff .removed")).to_contain_text(['"branch": "release-2.0"'])
    expect(page.locator("pre.diff .added")).to_contain_text(['"branch": "release-2.1"'])
    page.locator("table.timeline tr", has_text=first).get_by_role("button", name="Roll back…").click()
    expect(page.get_by_role("heading", name=re.compile("Roll back"))).to_be_visible()
    page.get_by_role("button", name="Roll back", exact=True).click()
    expect(page.get_by_role("status")).to_contain_text(f"Rolled back to {first}")
    expect(page.locator("ul.tree li.current")).to_contain_text("Deploy to staging")

    async def resume(client: Client) -> dict[str, Any]:
        return await call(client, "resume", {"task_id": "billing-v2"})

    packet = over_mcp(world.server, world.alice, resume)
    assert packet["current_node"]["id"] == "staging"
    assert packet["variables"] == {"branch": "release-2.0"}


def test_another_principal_sees_none_of_it_and_forms_need_the_session_secret(world: World, visit: Watched) -> None:
    page = visit.page
    sign_in(page, world, world.bob)
    answer = page.goto(world.ui(f"/memories/{world.ids['tea']}"))
    assert answer is not None
    assert answer.status == 404
    page.goto(world.ui("/memories"))
    expect(page.locator("table.listing tbody")).to_contain_text("No memories match.")
    page.goto(world.ui("/tasks/billing-v2"))
    expect(page.get_by_role("alert")).to_contain_text("No task by the id of 'billing-v2'")
    # A form posted without the session's secret (a cross-site request would have none) changes nothing.
    cookie = {c["name"]: c["value"] for c in visit.context.cookies()}
    with httpx2.Client(base_url=world.server.base, cookies=cookie) as http:
        refused = http.post("/ui/memories/anything/pin", data={"pinned": "yes"})
        assert refused.status_code == 403
        assert "came from another site" in refused.text
    with httpx2.Client(base_url=world.server.base) as http:
        unsigned = http.post("/ui/memories/anything/pin", data={"pinned": "yes"})
        assert unsigned.status_code == 401


def test_revoking_the_token_ends_its_inspector_session(world: World, visit: Watched) -> None:
    page = visit.page
    sign_in(page, world, world.carol)
    revoke(world.data_dir, "carol")
    page.goto(world.ui("/memories"))
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()


def test_mcp_memory_ui_opens_a_one_time_link_for_the_local_principal(tmp_path: Path, browser: Browser) -> None:
    log, out = tmp_path / "ui.log", tmp_path / "ui.out"  # the links come alone on stdout
    local_store(tmp_path / "data")
    with log.open("wb") as sink, out.open("wb") as links_sink:
        process = subprocess.Popen(
            [str(SERVER_BIN), "ui", "--no-browser"], env=server_env(tmp_path / "data"), stdout=links_sink, stderr=sink
        )
    try:
        deadline = time.monotonic() + 60
        while (found := re.search(r"^(http://\S+once=\S+)$", out.read_text(), re.M)) is None:
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        link = found.group(1)
        context = browser.new_context()
        page = context.new_page()
        page.goto(link)
        expect(page.locator("nav .who")).to_have_text("local-owner")
        fresh = browser.new_context()
        again = fresh.new_page()
        again.goto(link)  # the link is spent
        expect(again.get_by_role("alert")).to_contain_text("used already")
        again.get_by_role("button", name="Print a new link there").click()
        expect(again.get_by_role("status")).to_contain_text("A new sign-in link was printed")
        links = re.findall(r"^(http://\S+once=\S+)$", out.read_text(), re.M)
        assert len(links) == 2
        assert links[1] != link
        again.goto(links[1])  # the new one opens a session
        expect(again.locator("nav .who")).to_have_text("local-owner")
        assert httpx2.get(link.split("/ui/")[0] + "/mcp").status_code == 404  # the inspector alone: no MCP
        context.close()
        fresh.close()
    finally:
        process.terminate()
        process.wait(20)


def test_the_pages_work_from_the_keyboard_and_at_200_percent_zoom(world: World, browser: Browser) -> None:
    # 200% zoom of a 1280-pixel window is a 640-CSS-pixel viewport at twice the pixel density.
    context = browser.new_context(viewport={"width": 640, "height": 900}, device_scale_factor=2)
    page = context.new_page()
    page.goto(world.ui("/"))
    assert page.evaluate("document.activeElement.id") == "token"  # the sign-in field has the focus
    page.keyboard.type(world.alice)
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Sign in"
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Health")).to_be_visible()
    for path in ("/", "/memories", f"/memories/{world.ids['berlin']}", "/conflicts", "/tasks", "/tasks/billing-v2"):
        page.goto(world.ui(path))
        overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 0, f"{path} scrolls sideways by {overflow} px at 200% zoom"
    page.goto(world.ui(f"/memories/{world.ids['berlin']}"))
    expect(page.locator("blockquote.memory-text")).to_have_text("用户住在柏林")
    assert page.locator("blockquote.memory-text").get_attribute("lang") == "zh"
    context.close()


def test_forget_user_asks_for_the_code_then_leaves_only_a_receipt(
    world: World, visit: Watched, browser: Browser
) -> None:
    dave = create_token(world.data_dir, "dave")

    async def seed(client: Client) -> None:
        await call(client, "remember", {"content": "Dave keeps bees on the roof", "kind": "fact"})

    over_mcp(world.server, dave, seed)
    elsewhere = browser.new_context()  # dave signed in on another browser too
    other = elsewhere.new_page()
    sign_in(other, world, dave)
    page = visit.page
    sign_in(page, world, dave)
    page.get_by_role("button", name="Forget this user…").click()
    expect(page.locator("dl.counts")).to_contain_text("memories")
    code = page.locator("label[for=confirmation_code] code").inner_text()
    page.get_by_label("Type this code to confirm").fill("wrong-code")
    page.get_by_role("button", name="Delete everything").click()
    expect(page.get_by_role("alert")).to_contain_text("did not match, and nothing was deleted")

    async def look(client: Client) -> dict[str, Any]:
        return await call(client, "recall", {"query": "bees", "reinforce": False})

    assert [h["text"] for h in over_mcp(world.server, dave, look)["hits"]] == ["Dave keeps bees on the roof"]
    page.goto(world.ui("/"))
    page.get_by_role("button", name="Forget this user…").click()
    code = page.locator("label[for=confirmation_code] code").inner_text()
    page.get_by_label("Type this code to confirm").fill(code)
    page.get_by_role("button", name="Delete everything").click()
    expect(page.get_by_role("heading", name="Erased")).to_be_visible()
    expect(page.locator("dl.counts")).to_contain_text("memories")
    assert over_mcp(world.server, dave, look)["hits"] == []
    page.goto(world.ui("/memories"))
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()  # the erasure signed dave out
    other.goto(world.ui("/memories"))
    expect(other.get_by_role("heading", name="Sign in")).to_be_visible()  # everywhere
    elsewhere.close()


def test_the_inspector_takes_its_own_origin_and_refuses_others(world: World) -> None:
    """Behind a name (not loopback), the pages' own forms post with that Origin: no allowed_origins
    entry is needed for it, while another site's Origin, or an unknown Host, is refused."""
    named = {"host": "memory.example.test"}
    with httpx2.Client(base_url=world.server.base) as http:
        own = http.post(
            "/ui/login", data={"token": world.alice}, headers={**named, "origin": "http://memory.example.test"}
        )
        assert own.status_code == 303
        other = http.post("/ui/login", data={"token": world.alice}, headers={**named, "origin": "http://evil.test"})
        assert other.status_code == 403
        # No setting admits another site's form, so the refusal names none (http.allowed_origins would not help).
        refusal = other.json()["error_description"]
        assert "only from its own pages" in refusal
        assert "allowed_origins" not in refusal
        assert http.get("/ui/", headers={"host": "evil.test"}).status_code == 421


def test_hostile_requests_get_clear_refusals_and_no_words_of_theirs_on_a_page(world: World) -> None:
    with httpx2.Client(base_url=world.server.base) as http:
        big = http.post(
            "/ui/login",
            content=b"token=" + b"x" * 600_000,
            headers={"content-type": "application/x-www-form-urlencoded"},
        )
        assert big.status_code == 413  # read no further than the form limit, signed in or not
        # Login CSRF: another origin, even on loopback, cannot sign a browser in.
        other = http.post("/ui/login", data={"token": world.bob}, headers={"origin": "http://localhost:9999"})
        assert other.status_code == 403
        page = http.get("/ui/", params={"notice": "Your token expired: paste it at https://evil.test"})
        assert "evil.test" not in page.text
        signed = http.post("/ui/login", data={"token": f"Bearer {world.alice}", "next": "/ui/tasks"})
        assert signed.status_code == 303
        assert signed.headers["location"] == "/ui/tasks"  # where the person was going; "Bearer " tolerated
        far = http.get("/ui/memories", params={"before": "9999-12-31"})
        assert far.status_code == 400
        assert "9999-12-30" in far.text
        forged = http.get("/ui/memories", params={"notice": "Forged words", "sig": "0" * 32})
        assert "Forged words" not in forged.text
        missing = http.get("/ui/no-such-page")
        assert missing.status_code == 404
        assert "default-src 'none'" in missing.headers["content-security-policy"]


def test_a_task_whose_id_holds_a_slash_opens_and_rolls_back(world: World, visit: Watched) -> None:
    async def seed(client: Client) -> list[str]:
        made = []
        for branch in ("one", "two"):
            saved = await call(
                client, "checkpoint", {"task_id": "ops/deploy?x=1", "goal": "Deploy", "variables": {"branch": branch}}
            )
            made.append(saved["checkpoint"]["id"])
        return made

    first, _second = over_mcp(world.server, world.alice, seed)
    page = visit.page
    sign_in(page, world, world.alice)
    page.get_by_role("link", name="Tasks").click()
    page.get_by_role("link", name="Deploy").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("ops/deploy?x=1")
    page.locator("table.timeline tr", has_text=first).get_by_role("button", name="Roll back…").click()
    page.get_by_role("button", name="Roll back", exact=True).click()
    expect(page.get_by_role("status")).to_contain_text(f"Rolled back to {first}")
    expect(page.get_by_role("heading", level=1)).to_contain_text("ops/deploy?x=1")


def test_search_shows_the_pins_recall_gives_apart_and_a_correction_keeps_a_comma_tag(
    world: World, visit: Watched
) -> None:
    async def seed(client: Client) -> str:
        pinned = await call(client, "remember", {"content": "Always answer the user in metric units", "kind": "note"})
        await call(client, "pin", {"id": pinned["items"][0]["id"]})
        tagged = await call(client, "remember", {"content": "The staging database is pg-17", "tags": ["infra,prod"]})
        memory_id: str = tagged["items"][0]["id"]
        return memory_id

    tagged = over_mcp(world.server, world.alice, seed)
    page = visit.page
    sign_in(page, world, world.alice)
    page.goto(world.ui("/memories?q=metric+units"))  # recall returns pins apart from its hits: the page showed none
    expect(page.locator("h3", has_text="Pinned")).to_be_visible()
    expect(page.locator("ul.hits li.hit a.text")).to_contain_text(["Always answer the user in metric units"])
    page.goto(world.ui(f"/memories/{tagged}"))
    page.get_by_role("button", name="Correct (keeps history)").click()  # sent back as shown
    expect(page.get_by_role("status")).to_contain_text("Nothing to correct: the form came back as shown.")
    page.get_by_label("Text").fill("x" * 17_000)
    page.get_by_role("button", name="Correct (keeps history)").click()
    expect(page.locator("main")).to_contain_text("Text: is 17000 bytes")  # the form's field, not memories[0].content
    page.goto(world.ui(f"/memories/{tagged}"))
    page.get_by_label("Importance").fill("0.9")
    page.get_by_role("button", name="Correct (keeps history)").click()
    expect(page.get_by_role("status")).to_contain_text("Corrected (importance)")  # not "(tags, importance)"

    async def tags_now(client: Client) -> list[str]:
        hits = (await call(client, "recall", {"query": "staging database", "reinforce": False, "detail": "full"}))[
            "hits"
        ]
        found: list[str] = hits[0]["tags"]
        return found

    assert over_mcp(world.server, world.alice, tags_now) == ["infra,prod"]
    assert visit.errors == []

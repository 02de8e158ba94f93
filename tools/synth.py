"""Synthetic memories and questions that look like an agent's: names, tickets, versions, paths, dates.

About one in five is Chinese. Deterministic for a seed; every text in one call is distinct.
"""

from __future__ import annotations

import random
from collections.abc import Callable

NAMES = "Sam Alice Priya Wei Carlos Fatima Jonas Mei Olu Hana Diego Lena Ravi Tom Yuki Noah Ines Omar Zoe Ken".split()
ZH_NAMES = "小林 小王 老张 阿梅 李娜 陈刚 周洁 赵磊 孙悦 吴昊".split()
PROJECTS = "atlas falcon orion billing-service search-api mobile-app data-pipeline auth-gateway recommender".split()
CITIES = "Berlin Lisbon Tokyo Nairobi Toronto Seoul Austin Oslo Lima Delhi".split()
ZH_CITIES = "北京 上海 深圳 杭州 成都 广州 南京 西安".split()
TECH = "Postgres Rust Go Kafka Redis ClickHouse Kubernetes SQLite gRPC Terraform".split()
FOODS = "peanuts shellfish gluten dairy sesame soy eggs kiwi".split()
THINGS = "code reviews stand-ups release notes design docs dashboards incident reports".split(" ")
PREFS = "dark mode|short bullet lists|async updates|Vim keybindings|metric units|ISO dates|morning meetings".split("|")
CAUSES = "a missing env var|an expired TLS certificate|a full disk|a schema migration lock|a DNS timeout".split("|")
ISSUES = "checkout returns 502|login loops forever|CSV export drops rows|search ignores accents|push arrives twice"
ZH_ISSUES = "支付回调超时|导出报表乱码|登录验证码收不到|搜索结果重复|图片上传失败".split("|")
ZH_TOOLS = "Vim VSCode Emacs PyCharm Neovim".split()
ZH_HOBBY = "吉他 钢琴 游泳 羽毛球 书法 围棋".split()
ZH_FOODS = "花生 海鲜 牛奶 芒果 鸡蛋".split()
WEEKDAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
ZH_WEEKDAYS = "一二三四五六日"
MONTHS = "January February March April May June July August September October November December".split()

Pick = Callable[[list[str]], str]


def _date(r: random.Random) -> str:
    return f"{r.randint(1, 28)} {r.choice(MONTHS)} {r.randint(2023, 2026)}"


def _ticket(r: random.Random) -> str:
    return f"{r.choice(['INV', 'OPS', 'BUG', 'SEC', 'PAY'])}-{r.randint(100, 99999)}"


def _version(r: random.Random) -> str:
    return f"{r.randint(0, 9)}.{r.randint(0, 30)}.{r.randint(0, 40)}"


def memory(r: random.Random) -> str:
    n, p = r.choice(NAMES), r.choice(PROJECTS)
    hhmm, city, day = f"{r.randint(5, 22)}:{r.choice(['05', '30', '45'])}", r.choice(CITIES), r.choice(WEEKDAYS)
    port, conf = r.randint(1024, 65000), r.choice(["app", "db", "cache"])
    booking = f"{r.choice('ABCDEFGHJK')}{r.randint(10000, 99999)}"
    if r.random() < 0.2:
        z = r.choice(ZH_NAMES)
        return r.choice(
            [
                f"{z}喜欢用{r.choice(ZH_TOOLS)}写{r.choice(TECH)}代码，缩进用{r.randint(2, 8)}个空格。",
                f"{p} 项目决定在{r.randint(1, 12)}月{r.randint(1, 28)}日前迁移到 {r.choice(TECH)}，负责人是{z}。",
                f"工单 {_ticket(r)}：{r.choice(ZH_ISSUES)}，已在 v{_version(r)} 修复。",
                f"{z}下周{r.choice(ZH_WEEKDAYS)}去{r.choice(ZH_CITIES)}出差，航班号 CA{r.randint(100, 9999)}。",
                f"{z}对{r.choice(ZH_FOODS)}过敏，订餐时要注意，预算每人 {r.randint(50, 500)} 元。",
                f"{z}每周{r.choice(ZH_WEEKDAYS)}晚上练{r.choice(ZH_HOBBY)}，已经坚持了{r.randint(2, 40)}个月。",
                f"{p} 服务的接口超时设为 {r.randint(1, 90) * 100} 毫秒，由{z}负责监控。",
            ]
        )
    return r.choice(
        [
            f"{n} prefers {r.choice(PREFS)} for {r.choice(THINGS)} on {p}.",
            f"Decided to move {p} to {r.choice(TECH)} by {_date(r)}; {n} owns the migration.",
            f"Ticket {_ticket(r)} ({p}): {r.choice(ISSUES.split('|'))}; fixed in v{_version(r)} by {n}.",
            f"{n}'s flight to {city} leaves on {_date(r)} at {hhmm}, booking ref {booking}.",
            f"The {p} deploy on {_date(r)} failed because of {r.choice(CAUSES)}; rolled back to v{_version(r)}.",
            f"{n} is allergic to {r.choice(FOODS)}, so book restaurants with a {r.choice(FOODS)}-free menu.",
            f"Weekly sync with {n} about {p} moved to {day} {r.randint(8, 17)}:00, room {r.randint(100, 999)}.",
            f"Config: {p} reads /etc/{p}/{conf}.toml and listens on port {port}.",
            f"{n} asked to always cc {r.choice(NAMES)} on {p} release notes from v{_version(r)} on.",
            f"Budget for {p} in Q{r.randint(1, 4)} {r.randint(2023, 2026)} is ${r.randint(5, 900)}k, approved by {n}.",
            f"{n} runs {r.randint(3, 42)} km every {day} and is training for the {city} marathon.",
            f"{n} reported that {p} p95 latency rose to {r.randint(80, 2000)} ms after upgrading {r.choice(TECH)}.",
        ]
    )


def question(r: random.Random) -> str:
    n, p = r.choice(NAMES), r.choice(PROJECTS)
    return r.choice(
        [
            f"what does {n} prefer for {r.choice(THINGS)}?",
            f"what is the plan for migrating {p}?",
            f"what happened to ticket {_ticket(r)}?",
            f"when is {n}'s flight to {r.choice(CITIES)}?",
            f"why did the {p} deploy fail?",
            f"is {n} allergic to anything?",
            f"when is the weekly sync with {n}?",
            f"which port does {p} listen on?",
            f"who should be copied on {p} release notes?",
            f"what is the budget for {p}?",
            f"how much does {n} run each week?",
            f"did {p} get slower after the {r.choice(TECH)} upgrade?",
            f"{r.choice(ZH_NAMES)}用什么编辑器？",
            f"工单 {_ticket(r)} 修好了吗？",
            f"{r.choice(ZH_NAMES)}什么时候出差？",
            f"{p} 的接口超时是多少？",
        ]
    )


def distinct(make: Callable[[random.Random], str], count: int, seed: int, avoid: set[str] | None = None) -> list[str]:
    r = random.Random(seed)
    seen: set[str] = set(avoid or ())
    out: list[str] = []
    while len(out) < count:
        text = make(r)
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out


def variant(text: str, i: int) -> str:
    """A distinct restatement of ``text`` that keeps its meaning (for stores larger than the embedded pool)."""
    r = random.Random(i)
    if any("\u4e00" <= ch <= "\u9fff" for ch in text):
        return f"{text}（{r.randint(1, 12)}月{r.randint(1, 28)}日再次确认，记录 {i}）"
    return f"{text} (confirmed again on {_date(r)}, note {i})"

"""Time in a question, resolved against ``occurred_at`` without an LLM.

"last week", "in April 2022", "the first weekend of August", "yesterday", "3 days ago", "上个月",
"去年五月", "前天", "in the last few days", "最近三天", "recently": each becomes a half-open
interval [start, end) in UTC seconds, relative to the caller's ``as_of`` (default now) and in the
caller's days (its UTC offset, else the configured zone's). A month or date without a year is the latest one not after
``as_of``. Recall prefers memories that happened inside the interval and says so; it never drops
the others (a question's time is a hint, and a resolver can be wrong).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from mcp_memory.core.models import to_seconds

MONTHS = {
    name: i
    for i, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
WEEKDAYS = {d: i for i, d in enumerate(("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"))}
ORDINALS = {"first": 1, "1st": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3, "fourth": 4, "4th": 4, "last": -1}
NUMBER_WORDS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten".split()) if i} | {
    "a": 1,
    "an": 1,
}
UNITS = {"day": 1, "week": 7, "month": 30, "year": 365}
ZH_DIGITS = {"一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9, "十": 10}

_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
_ZH_NUM = r"(?:\d{1,2}|十[一二]?|[一二两三四五六七八九])"


@dataclass(frozen=True)
class Span:
    """When a question is about: [start, end) in UTC seconds, and the words that said it."""

    start: float
    end: float
    said: str
    yearly: bool = False  # a month or a weekend named without its year ("in June"): which June is a guess

    def holds(self, moment: float) -> bool:
        return self.start <= moment < self.end

    def years_earlier(self, years: int) -> Span:
        """The same days ``years`` years before (29 February becomes the 28th)."""

        def back(moment: float) -> float:
            at = datetime.fromtimestamp(moment, UTC)
            day = min(at.day, 28) if (at.month, at.day) == (2, 29) else at.day
            return at.replace(year=at.year - years, day=day).timestamp()

        return replace(self, start=back(self.start), end=back(self.end))

    def distance_hours(self, moment: float) -> float:
        if self.holds(moment):
            return 0.0
        return (self.start - moment if moment < self.start else moment - self.end) / 3600


def _zh_number(text: str) -> int:
    if text.isdigit():
        return int(text)
    if text.startswith("十"):
        return 10 + (ZH_DIGITS[text[1]] if len(text) > 1 else 0)
    return ZH_DIGITS[text]


def _day(d: date) -> datetime:
    return datetime(d.year, d.month, d.day, tzinfo=UTC)


def _span(start: date, end: date, said: str) -> Span:
    return Span(_day(start).timestamp(), _day(end).timestamp(), said)


def _month(year: int, month: int, said: str) -> Span:
    end = date(year + 1, 1, 1) if month == 12 else date(year, month + 1, 1)
    return _span(date(year, month, 1), end, said)


def _latest_month(today: date, month: int, said: str, years_back: int = 0) -> Span:
    year = today.year - years_back
    if years_back == 0 and month > today.month:
        year -= 1
    return _month(year, month, said)


def _week_of(d: date) -> date:
    return d - timedelta(days=d.weekday())


def _weekend(month_start: date, which: int) -> date:
    """The Saturday of the ``which``-th weekend of a month (-1: the last)."""
    saturdays = [month_start + timedelta(days=i) for i in range(31)]
    saturdays = [d for d in saturdays if d.month == month_start.month and d.weekday() == 5]
    return saturdays[which - 1 if which > 0 else -1]


def utc_offset(moment: datetime | None) -> float:
    """The UTC offset a caller's ``as_of`` carries, in seconds (0 without one)."""
    delta = moment.utcoffset() if moment is not None else None
    return delta.total_seconds() if delta else 0.0


def asker_offset(as_of: datetime | None, moment: float, zone: str) -> float:
    """Whose days a question counts in, as a UTC offset in seconds at ``moment``: the one ``as_of``
    carries, else ``zone``'s ("local": this machine's; an IANA name such as "Asia/Shanghai")."""
    if as_of is not None and as_of.utcoffset() is not None:
        return utc_offset(as_of)
    instant = datetime.fromtimestamp(moment, UTC)
    delta = instant.astimezone().utcoffset() if zone == "local" else instant.astimezone(ZoneInfo(zone)).utcoffset()
    return delta.total_seconds() if delta else 0.0


def asked(question: str, as_of: datetime | None, now: float, zone: str) -> tuple[float, float, Span | None]:
    """When a question is asked from (``as_of``, else now), the asker's UTC offset (``asker_offset``)
    and the time the question names, if any."""
    moment = to_seconds(as_of) if as_of is not None else now
    offset = asker_offset(as_of, moment, zone)
    return moment, offset, resolve(question, moment, offset)


def said(occurred: float, now: float, offset: float = 0.0) -> str:
    """When something was said, as a person would put it from ``now`` in the days of ``offset``:
    "just now", "today", "yesterday", "3 days ago", "2 weeks ago", "in 2 days"."""
    span = now - occurred
    if 0 <= span < 3600:
        return "just now"
    days = int((now + offset) // 86400 - (occurred + offset) // 86400)  # calendar days, not 24-hour spans
    if days == 0:
        return "today" if span >= 0 else "later today"
    if days == 1:
        return "yesterday"
    if days == -1:
        return "tomorrow"
    if abs(days) < 7:
        return f"{days} days ago" if days > 0 else f"in {-days} days"
    unit, size = next((unit, size) for unit, size in (("year", 365), ("month", 30), ("week", 7)) if abs(days) >= size)
    count = abs(days) // size
    words = f"{count} {unit}{'s' if count > 1 else ''}"
    return f"{words} ago" if days > 0 else f"in {words}"


def resolve(question: str, as_of: float, offset: float = 0.0) -> Span | None:
    """The first time expression of ``question`` as an interval, or None when it names no time.
    Days are the asker's: ``offset`` is their UTC offset in seconds (``as_of``'s own), so at 07:30
    in Shanghai "yesterday" is the Shanghai day before, not the UTC one."""
    today = datetime.fromtimestamp(as_of + offset, UTC).date()
    text = question.lower()
    for rule in _RULES:
        span = rule(text, today)
        if span is not None:
            return replace(span, start=span.start - offset, end=span.end - offset)
    return None


# How far back a month named without its year is looked for among the memories recall weighs.
YEARS_BACK = 30


def anchored(span: Span | None, moments: Iterable[float]) -> Span | None:
    """A month or weekend named without its year is the latest one not after ``as_of``: that is, the
    latest one any of ``moments`` (when the memories recall weighs happened) falls in, and the very
    latest when none does. Asked in December about "the camping trip in June", a store whose
    memories are from 2023 speaks of June 2023, not of a June it holds nothing from."""
    if span is None or not span.yearly:
        return span
    times = list(moments)
    earliest = min(times, default=span.end)
    for years in range(YEARS_BACK + 1):
        candidate = span.years_earlier(years) if years else span
        if any(candidate.holds(t) for t in times):
            return candidate
        if candidate.end <= earliest:  # every memory is later than this one: none can fall in an earlier year
            break
    return span


def _english_dates(text: str, today: date) -> Span | None:
    m = re.search(rf"\b(\d{{1,2}})(?:st|nd|rd|th)? ({_MONTH})\.?,? (\d{{4}})\b", text) or re.search(
        rf"\b({_MONTH})\.? (\d{{1,2}})(?:st|nd|rd|th)?,? (\d{{4}})\b", text
    )
    if m:
        groups = m.groups()
        day, month = (groups[0], groups[1]) if groups[0].isdigit() else (groups[1], groups[0])
        try:
            d = date(int(groups[2]), MONTHS[month], int(day))
        except ValueError:
            return None
        return _span(d, d + timedelta(days=1), m.group(0))
    m = re.search(rf"\b(?:the )?({'|'.join(ORDINALS)}) weekend (?:of|in) ({_MONTH})(?:,? (\d{{4}}))?\b", text)
    if m:
        month = MONTHS[m.group(2)]
        first = _latest_month(today, month, "").start if not m.group(3) else _month(int(m.group(3)), month, "").start
        start = datetime.fromtimestamp(first, UTC).date()
        saturday = _weekend(start, ORDINALS[m.group(1)])
        return replace(_span(saturday, saturday + timedelta(days=2), m.group(0)), yearly=not m.group(3))
    m = re.search(rf"\b(?:in |during |of )?({_MONTH})\.?,? (\d{{4}})\b", text)
    if m:
        return _month(int(m.group(2)), MONTHS[m.group(1)], m.group(0).strip())
    m = re.search(r"\b(?:in|during) (\d{4})\b", text)
    if m:
        year = int(m.group(1))
        return _span(date(year, 1, 1), date(year + 1, 1, 1), m.group(0))
    m = re.search(rf"\b(last|this) ({_MONTH})\b", text) or re.search(rf"\b(?:in|during) ({_MONTH})\b", text)
    if m:
        month = MONTHS[m.group(m.lastindex or 1)]
        back = 1 if m.group(1) == "last" and month >= today.month else 0
        if back:
            return _latest_month(today, month, m.group(0), years_back=back)
        # "in June" names no year; "this June" and "last June" do, counted from today
        return replace(_latest_month(today, month, m.group(0)), yearly=m.lastindex == 1 and m.group(1) in MONTHS)
    return None


def _english_relative(text: str, today: date) -> Span | None:
    if re.search(r"\bday before yesterday\b", text):  # before "yesterday", which it contains
        d = today - timedelta(days=2)
        return _span(d, d + timedelta(days=1), "the day before yesterday")
    if re.search(r"\byesterday\b|\blast night\b", text):
        d = today - timedelta(days=1)
        return _span(d, today, "yesterday")
    if re.search(r"\btoday\b|\bthis morning\b|\btonight\b", text):
        return _span(today, today + timedelta(days=1), "today")
    m = re.search(r"\b(\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten) (day|week|month|year)s? ago\b", text)
    if m:
        words = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7}
        count = (
            int(m.group(1))
            if m.group(1).isdigit()
            else words.get(m.group(1), {"eight": 8, "nine": 9}.get(m.group(1), 10))
        )
        days = count * UNITS[m.group(2)]
        centre = today - timedelta(days=days)
        slack = max(1, days // 4)  # "3 weeks ago" is not one exact day: a reason says "about"
        return _span(centre - timedelta(days=slack), centre + timedelta(days=slack + 1), f"about {m.group(0)}")
    m = re.search(r"\b(last|this) (week|weekend|month|year)\b", text)  # calendar ones ("past": _rolling)
    if m:
        which, unit = m.groups()
        if unit == "week":
            start = _week_of(today) - timedelta(days=7 if which == "last" else 0)
            return _span(start, start + timedelta(days=7), m.group(0))
        if unit == "weekend":  # this week's (still to come on a weekday), or the one before it
            saturday = _week_of(today) + timedelta(days=5) - timedelta(days=7 if which == "last" else 0)
            return _span(saturday, saturday + timedelta(days=2), m.group(0))
        if unit == "month":
            first = date(today.year, today.month, 1)
            if which == "last":
                first = date(first.year - (first.month == 1), 12 if first.month == 1 else first.month - 1, 1)
            return _month(first.year, first.month, m.group(0))
        year = today.year - (which == "last")
        return _span(date(year, 1, 1), date(year + 1, 1, 1), m.group(0))
    m = re.search(r"\blast (monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b", text)
    if m:
        back = (today.weekday() - WEEKDAYS[m.group(1)]) % 7 or 7
        d = today - timedelta(days=back)
        return _span(d, d + timedelta(days=1), m.group(0))
    return None


def _chinese(text: str, today: date) -> Span | None:
    m = re.search(rf"(\d{{4}})年({_ZH_NUM})月(?:({_ZH_NUM})[日号])?", text)
    if m:
        month = _zh_number(m.group(2))
        if m.group(3):
            d = date(int(m.group(1)), month, _zh_number(m.group(3)))
            return _span(d, d + timedelta(days=1), m.group(0))
        return _month(int(m.group(1)), month, m.group(0))
    m = re.search(rf"(去年|前年|今年)({_ZH_NUM})月", text)
    if m:
        back = {"今年": 0, "去年": 1, "前年": 2}[m.group(1)]
        return _month(today.year - back, _zh_number(m.group(2)), m.group(0))
    for words, back_days, length in (("前天", 2, 1), ("昨天", 1, 1), ("昨晚", 1, 1), ("今天", 0, 1)):
        if words in text:
            d = today - timedelta(days=back_days)
            return _span(d, d + timedelta(days=length), words)
    m = re.search(rf"({_ZH_NUM})(天|周|个星期|星期|个月|年)前", text)
    if m:
        unit = {"天": 1, "周": 7, "个星期": 7, "星期": 7, "个月": 30, "年": 365}[m.group(2)]
        days = _zh_number(m.group(1)) * unit
        centre = today - timedelta(days=days)
        slack = max(1, days // 4)
        return _span(centre - timedelta(days=slack), centre + timedelta(days=slack + 1), f"about {m.group(0)}")
    if re.search("上周末|上个周末", text):
        saturday = _week_of(today) - timedelta(days=2)
        return _span(saturday, saturday + timedelta(days=2), "上周末")
    if re.search("上周|上个星期|上星期|上个礼拜", text):
        start = _week_of(today) - timedelta(days=7)
        return _span(start, start + timedelta(days=7), "上周")
    if re.search("这周|本周|这个星期", text):
        start = _week_of(today)
        return _span(start, start + timedelta(days=7), "本周")
    if "上个月" in text or "上月" in text:
        first = date(today.year - (today.month == 1), 12 if today.month == 1 else today.month - 1, 1)
        return _month(first.year, first.month, "上个月")
    if "这个月" in text or "本月" in text:
        return _month(today.year, today.month, "本月")
    for words, back in (("前年", 2), ("去年", 1), ("今年", 0)):
        if words in text:
            year = today.year - back
            return _span(date(year, 1, 1), date(year + 1, 1, 1), words)
    m = re.search(rf"({_ZH_NUM})月份?", text)
    if m and not re.search(rf"{_ZH_NUM}个月", text):
        return replace(_latest_month(today, _zh_number(m.group(1)), m.group(0)), yearly=True)
    return None


_FEW = {"few": 3, "couple of": 2, "several": 5}
# A vague "lately" is the last week; "这几天" / "这两天" (these few days) the last three.
_LATELY = re.compile(r"\b(?:recently|lately)\b|最近|近来|近期")
_THESE_DAYS = re.compile("这几天|这两天|这些天")


def _rolling(text: str, today: date) -> Span | None:
    """A window that ends today: "in the last few days", "over the past two weeks", "the past
    month", "最近三天", "过去一周", "recently" (a calendar "last week" is another rule's)."""
    m = re.search(
        r"\b(?:(?:in|over|during|within) the (?:last|past)|(?:the )?past) (?:(\d+|few|couple of|several|"
        + "|".join(NUMBER_WORDS)
        + r") )?(day|week|month|year)s?\b",
        text,
    )
    if m:
        count = m.group(1) or "one"
        n = int(count) if count.isdigit() else _FEW.get(count) or NUMBER_WORDS[count]
        return _span(today - timedelta(days=n * UNITS[m.group(2)]), today + timedelta(days=1), m.group(0))
    m = re.search(rf"(?:最近|过去|近)({_ZH_NUM}|几)(天|周|个星期|星期|个月)", text)
    if m:
        n = 3 if m.group(1) == "几" else _zh_number(m.group(1))
        unit = {"天": 1, "周": 7, "个星期": 7, "星期": 7, "个月": 30}[m.group(2)]
        return _span(today - timedelta(days=n * unit), today + timedelta(days=1), m.group(0))
    for vague, days in ((_THESE_DAYS, 3), (_LATELY, 7)):
        if m := vague.search(text):
            return _span(today - timedelta(days=days), today + timedelta(days=1), m.group(0))
    return None


_RULES = (_rolling, _english_dates, _english_relative, _chinese)

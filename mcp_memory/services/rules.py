"""Write rules: what is worth remembering, how important it is, and when two texts are one memory."""

from __future__ import annotations

import re
from typing import Literal

from mcp_memory.core.text import EN_STOPWORDS, identifiers, normalize

_THROWAWAY = frozenset(
    [
        "ok",
        "okay",
        "k",
        "kk",
        "sure",
        "yes",
        "yep",
        "yeah",
        "no",
        "nope",
        "thanks",
        "thank",
        "you",
        "thx",
        "ty",
        "cool",
        "nice",
        "great",
        "fine",
        "got",
        "it",
        "continue",
        "go",
        "on",
        "go",
        "ahead",
        "next",
        "done",
        "right",
        "alright",
        "understood",
        "noted",
        "lol",
        "haha",
        "hmm",
        "hi",
        "hello",
        "bye",
        "好",
        "好的",
        "好吧",
        "嗯",
        "嗯嗯",
        "哦",
        "噢",
        "继续",
        "谢谢",
        "谢了",
        "收到",
        "行",
        "可以",
        "对",
        "是的",
        "没问题",
        "明白",
        "了解",
        "知道了",
        "好滴",
        "ok了",
    ]
)
_THROWAWAY_PHRASES = frozenset({"thank you", "got it", "go on", "go ahead", "sounds good", "thanks a lot"})
_PUNCT = re.compile(r"[\s\W_]+", re.UNICODE)

# The head of a sentence, where an instruction's imperative stands ("Always ...", "Caroline: Never ...",
# "please make sure ...", "you should always ...").
_LEAD = r"(?:^|(?<=[.!?;:\n])\s*|\bplease\s+|\byou\s+(?:should|must)\s+)"
# A request to keep something or an instruction: "always", "never" and "make sure" as imperatives,
# "important" as a label. Inside a statement conversation uses the same words all the time ("it's so
# important", "I've always wanted to", "it isn't always easy"), and there they mark nothing.
_EXPLICIT = re.compile(
    r"(?i)\b(?:remember (?:this|that)|don'?t forget|from now on)\b"
    rf"|{_LEAD}(?:always|never|make sure)\b"
    rf"|{_LEAD}(?:very\s+)?important\s*[:!-]|\bimportant\s*:"
    r"|记住|别忘|以后都|以后一律|永远|务必|一定要|不要再|千万"
)
_DECISION = re.compile(
    r"(?i)\b(decided|decision|we will|we'll use|chose|choose|agreed|going with)\b|决定|选定|采用|约定"
)
_PREFERENCE = re.compile(r"(?i)\b(prefer|preference|likes?|loves?|hates?|dislikes?|favou?rite)\b|喜欢|偏好|讨厌|更愿意")


def is_throwaway(content: str) -> bool:
    """An acknowledgement ("ok", "好的", "继续") carries nothing worth recalling."""
    text = normalize(content).lower()
    bare = _PUNCT.sub(" ", text).strip()
    if not bare:
        return True
    return bare in _THROWAWAY or bare in _THROWAWAY_PHRASES or bare.replace(" ", "") in _THROWAWAY


# Words that, alone, only acknowledge, thank or greet: "Great, thanks a lot.", "Perfect, see you then."
_ACK_WORDS = _THROWAWAY | frozenset(
    "a lot again sounds good perfect see then agreed awesome wonderful much very so that will do i we all set "
    "excellent exactly indeed absolutely of course cheers later soon talk too glad happy to help me welcome "
    "yes no sure thing works for and it's that's is this bye goodbye today tomorrow tonight night evening morning "
    "weekend have nice day you".split()
)
_ZH_ACK = re.compile(
    "好的|好吧|好滴|谢谢|谢了|多谢|非常感谢|感谢|太好了|辛苦了|收到|明白|了解|知道了|没问题|可以|是的|再见|明天见|回头见|"
    "晚安|今天就到这里|大家|嗯+|哦|噢|好|行|对|啊|呀|吧|呢|的|了"
)


def is_acknowledgement(sentence: str) -> bool:
    """A sentence that only acknowledges, thanks or greets: no fact to keep in a summary."""
    if is_throwaway(sentence):
        return True
    text = normalize(sentence).lower()
    latin = re.findall(r"[a-z']+", text)
    cjk = "".join(_CJK_CHAR.findall(text))
    if re.search(r"\d", text) or _ZH_ACK.sub("", cjk):
        return False  # a number, or Chinese beyond acknowledgements, says something
    return bool(latin or cjk) and all(word.strip("'") in _ACK_WORDS for word in latin)


def estimate_importance(content: str, kind: str) -> float:
    """0.5 by default; decisions, preferences, identifiers and explicit requests raise it."""
    score = 0.5
    if kind in ("decision", "preference", "instruction", "goal") or _DECISION.search(content):
        score += 0.1
    if kind == "preference" or _PREFERENCE.search(content):
        score += 0.05
    if identifiers(content):
        score += 0.05
    if _EXPLICIT.search(content):
        score += 0.2
    return round(min(score, 0.95), 3)


_NEGATION = re.compile(r"(?i)\b(not|no|never|none|nothing|without|cannot)\b|n't|[不没別别无非未]")
_NUMBER = re.compile(r"\d+(?:[.,:/]\d+)*")
_LATIN = re.compile(r"[A-Za-z][A-Za-z'-]*")
_CJK_CHAR = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_TIME_WORDS = frozenset(
    (
        "monday tuesday wednesday thursday friday saturday sunday today tomorrow yesterday morning evening night "
        "january february march april may june july august september october november december"
    ).split()
)
_ZH_FILLER = frozenset("的了是在和与也就都而及或吗呢吧啊呀个我你他她它们这那")
# Chinese numerals and weekday/day characters: like digits, they must agree for two texts to merge.
_ZH_NUMERALS = frozenset("零〇一二三四五六七八九十百千万亿两日天")


def _stem(word: str) -> str:
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    for suffix in ("ing", "ed", "e"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def _units(text: str) -> tuple[dict[str, str], set[str]]:
    words = {_stem(w.lower()): w for w in _LATIN.findall(text) if w.lower() not in EN_STOPWORDS}
    chars = {c for c in _CJK_CHAR.findall(text) if c not in _ZH_FILLER}
    return words, chars


def same_facts(a: str, b: str) -> bool:
    """True only when two similar texts state the same thing and may merge into one memory.

    Merging loses the second wording, so this errs towards keeping both: identifiers, numbers
    and dates must agree exactly, negation must agree, and the words that differ must be few
    and not names, weekdays or months ("on Monday" vs "on Tuesday" stays two memories).
    """
    if identifiers(a) != identifiers(b) or sorted(_NUMBER.findall(a)) != sorted(_NUMBER.findall(b)):
        return False
    if sorted(c for c in a if c in _ZH_NUMERALS) != sorted(c for c in b if c in _ZH_NUMERALS):
        return False
    if bool(_NEGATION.search(a)) != bool(_NEGATION.search(b)):
        return False
    words_a, chars_a = _units(a)
    words_b, chars_b = _units(b)
    differing = set(words_a) ^ set(words_b)
    for stem in differing:
        if any(prefix + stem in differing for prefix in ("dis", "un", "in", "non")):
            return False  # likes / dislikes
        original = words_a.get(stem) or words_b[stem]
        if original[0].isupper() or stem in _TIME_WORDS or _stem(original.lower()) in _TIME_WORDS:
            return False
    only_a, only_b = set(words_a) - set(words_b), set(words_b) - set(words_a)
    if (only_a and only_b) or (chars_a - chars_b and chars_b - chars_a):
        return False  # a word was replaced, not added or dropped: tea / coffee is another fact
    changed = len(differing) + len(chars_a ^ chars_b)
    size = max(len(words_a) + len(chars_a), len(words_b) + len(chars_b), 1)
    return changed <= max(1, int(0.25 * size))


Relation = Literal["same", "negation", "changed", "conflict", "different"]

# A new statement that says it replaces an old one ("no longer", "switched to", "不再", "改为").
_CHANGE = re.compile(
    r"(?i)\b(no longer|not any ?more|anymore|now (?:prefers?|likes?|uses?|wants?|drinks?|eats?)|"
    r"switched (?:to|from|over|back)|moved (?:to|from|over)|changed (?:to|from|my mind)|instead(?: of)?|"
    r"from now on|these days)\b|不再|改成|改为|换成|现在|以后都|已经改"
)
_CHANGE_CHARS = frozenset("不再改成为换现在以后都已经")
# Said as an addition ("my brother moved to Paris too", "现在也喜欢咖啡"): both statements stay true,
# unless it also says the old one stopped.
_ADDITIVE = re.compile(r"(?i)\b(?:also|as well|in addition|additionally|besides)\b|\btoo\b(?=\s*(?:[.!?,;]|$))|也|同时")
_STOPPED = re.compile(
    r"(?i)\b(?:no longer|not any ?more|anymore|instead|switched|stopped)\b|不再|改成|改为|换成|已经改"
)


def says_stopped(text: str) -> bool:
    """Whether ``text`` says something stopped being so ("no longer", "instead", "switched", "不再")."""
    return _STOPPED.search(text) is not None


_CHANGE_WORDS = frozenset(_stem(w) for w in "longer anymore switched moved changed instead mind days actually".split())
# "Prefer" names a choice among alternatives: a newer preference for the same thing replaces the older.
_PREFER = re.compile(r"(?i)^prefer(?:s|red|ring|ence|ences)?$|^(?:偏好|更喜欢|更愿意|宁愿|更爱)$")
_TOKEN = re.compile(
    r"[A-Za-z][A-Za-z'-]*|\d+(?:[.,:/]\d+)*|偏好|更喜欢|更愿意|宁愿|更爱|[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]"
)


def _tokens(text: str) -> list[str]:
    return [t if _CJK_CHAR.match(t) or _PREFER.match(t) else _stem(t.lower()) for t in _TOKEN.findall(text)]


def _content_tokens(text: str) -> set[str]:
    """The stems of the words that carry meaning (judged before stemming: "notes" is not "not")."""
    return {
        t if _CJK_CHAR.match(t) else _stem(t.lower())
        for t in _TOKEN.findall(text)
        if t.lower() not in EN_STOPWORDS and t not in _ZH_FILLER and not _PREFER.match(t)
    }


def _one_run(tokens: list[str], part: set[str], after: int) -> bool:
    """The tokens of ``part`` sit together, as one value, after the verb at ``after``."""
    places = [i for i, t in enumerate(tokens) if t in part]
    return bool(places) and places[0] > after and places[-1] - places[0] + 1 == len(places)


def same_preference_replaced(old: str, new: str) -> bool:
    """True when ``new`` states a preference for the same thing as ``old`` with another value.

    Both must say "prefer" (偏好, 更喜欢...); the texts differ in one run of at most four words
    after the verb on each side (the value: "dark theme" / "light theme"), and they share a word
    that says what the preference is for ("editor", "commute"). Who prefers must not change
    ("Alice prefers" / "Bob prefers" differ before the verb), and neither may the time it is for
    ("coffee in the morning" / "tea in the evening" differ in two places: both may be true).
    """
    tokens_old, tokens_new = _tokens(old), _tokens(new)
    verb_old = next((i for i, t in enumerate(tokens_old) if _PREFER.match(t)), None)
    verb_new = next((i for i, t in enumerate(tokens_new) if _PREFER.match(t)), None)
    if verb_old is None or verb_new is None:
        return False
    gone, came = set(tokens_old) - set(tokens_new), set(tokens_new) - set(tokens_old)
    if not 0 < len(gone) <= 4 or not 0 < len(came) <= 4:
        return False
    if not _one_run(tokens_old, gone, verb_old) or not _one_run(tokens_new, came, verb_new):
        return False
    timed = [bool(part & _TIME_WORDS) and bool(part - _TIME_WORDS) for part in (gone, came)]
    if all(timed):
        return False  # the value and its time both changed: two preferences, not one replaced
    words = _content_tokens(old) | _content_tokens(new)
    context = {t for i, t in enumerate(tokens_old) if i > verb_old and t in words} | {
        t for i, t in enumerate(tokens_new) if i > verb_new and t in words
    }
    return bool(context - gone - came)


def relation(old: str, new: str, kind: str) -> Relation:
    """How a new memory bears on a similar older one (deterministic rules; the LLM may judge better).

    - same: they state one thing (merge);
    - negation: one denies the other, word for word ("likes tea" / "does not like tea");
    - changed: the new one says it replaces the old ("no longer", "switched to", "不再", "改为"), or
      it is a preference stated with "prefer" for the same thing with another value
      (``same_preference_replaced``: "prefers dark theme for the editor" / "... light theme ...");
    - conflict: a preference or decision with one value swapped and no word of change that the
      rules cannot judge: kept both, flagged for the user to confirm (either may be true: "likes
      cats" and "likes dogs"); recall ranks the newer side first;
    - different: anything else.
    """
    if same_facts(old, new):
        return "same"
    if identifiers(old) != identifiers(new) or sorted(_NUMBER.findall(old)) != sorted(_NUMBER.findall(new)):
        return "different"
    if _ADDITIVE.search(new) and not _ADDITIVE.search(old) and not _STOPPED.search(new):
        return "different"  # an addition: both stand
    if kind == "preference" and same_preference_replaced(old, new):
        return "changed"
    words_old, chars_old = _units(old)
    words_new, chars_new = _units(new)
    if set(words_old) == set(words_new) and chars_old == chars_new:
        return "negation" if bool(_NEGATION.search(old)) != bool(_NEGATION.search(new)) else "different"
    gone, came = set(words_old) - set(words_new), set(words_new) - set(words_old)
    gone_chars, came_chars = chars_old - chars_new, (chars_new - chars_old) - _CHANGE_CHARS
    marked = _CHANGE.search(new) is not None
    came -= _CHANGE_WORDS
    if marked and len(gone) + len(gone_chars) <= 1 and 0 < len(came) + len(came_chars) <= 4:
        return "changed"  # it names the old statement and says it changed: "switched from Dvorak to Colemak"
    if any(words_new[w][0].isupper() for w in came) or any(words_old[w][0].isupper() for w in gone):
        return "different"  # another name: another subject
    swapped = (0 < len(gone) <= 2 and 0 < len(came) <= 2 and not gone_chars and not came_chars) or (
        not gone and not came and 0 < len(gone_chars) <= 4 and 0 < len(came_chars) <= 3
    )
    if marked and (swapped or (len(gone) + len(gone_chars) <= 4 and len(came) + len(came_chars) <= 3)):
        return "changed"
    if swapped and kind in ("preference", "decision"):
        return "conflict"
    return "different"

"""Text rules shared by every layer: validation, CJK segmentation, word forms, token estimates,
identifiers.

FTS5's unicode61 tokenizer reads a run of Chinese characters as one token, and the trigram
tokenizer cannot match two-character words, so CJK runs are indexed as overlapping bigrams.
Each English word is indexed twice: as written, and as its Snowball stem behind ``STEM_MARK``, a
token of its own that no written word can be, so "games" finds "game recommendations" through
the stem while the word as written keeps its own statistics (and ranks a memory that says it first).
Token budgets must be counted offline: CJK characters and Latin words are counted apart
(calibrated against cl100k-style tokenizers: ~1 token per CJK character, ~1.3 per word).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable
from urllib.parse import quote

import Stemmer

_CJK = (
    r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
    r"\U00020000-\U0002a6df\U0002a700-\U0002ebef"
)
CJK_RUN = re.compile(f"[{_CJK}]+")
_CJK_CHAR = re.compile(f"[{_CJK}]")
_LATIN_WORD = re.compile(r"[A-Za-z0-9\u00c0-\u024f]+")
_LONGEST_WORD = 20
# Query syntax characters: searched as words, never as operators (DESIGN.md section 6).
_SYNTAX = re.compile(r"[\"'`()\[\]{}*^]")

# A token that mixes letters and digits or joins parts with - _ . / : (INV-767, v1.2.3, src/app.py).
# ASCII word characters only: "运行tools/app.py" holds the identifier "tools/app.py", not the whole run.
_IDENTIFIER = re.compile(
    r"(?<![A-Za-z0-9_])(?:[A-Za-z]+[-_#]?\d[A-Za-z0-9_\-./#]*|\d+[-_./:]\d[A-Za-z0-9_\-./:]*"
    r"|[A-Za-z0-9_\-]+(?:[./][A-Za-z0-9_\-]+)+|\d{2,})(?![A-Za-z0-9_])",
    re.ASCII,
)

# The NLTK-style list: on the LoCoMo dev split it beat Lucene's 33 words by 7 points of R@5 (FTS5 alone).
EN_STOPWORDS = frozenset(
    """i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her
    hers herself it its itself they them their theirs themselves what which who whom this that these those
    am is are was were be been being have has had having do does did doing a an the and but if or because as
    until while of at by for with about against between into through during before after above below to
    from up down in out on off over under again further then once here there when where why how all any both
    each few more most other some such no nor not only own same so than too very s t can will just don
    should now""".split()
)
# Function characters split a CJK run in a question (they are not dropped: no new bigram is formed).
ZH_FUNCTION_CHARS = re.compile("[的了是吗呢吧啊和与在也就都而及或]")
_STRICT_IDENTIFIER = re.compile(
    r"^(?=.*[A-Za-z])(?=.*\d)[A-Za-z0-9._/\-:#]+$"  # letters mixed with digits: INV-767, v1.2.3
    r"|^\w*[A-Za-z0-9]_[A-Za-z0-9]\w*$"  # snake_case
    r"|^[\w\-/.]*\w\.[a-z0-9]{1,5}$"  # a file name: app.py
    r"|^[\w.\-]*/[\w.\-]+/[\w./\-]*$"  # a path with two or more slashes
)
_ORDINAL = re.compile(r"^\d+(st|nd|rd|th)$", re.I)
_EDGE = "()[]{}*^:\"'`.,;!?<>|~@#$%&+=，。？！；：、（）【】《》“”‘’…·"


class TextProblem(ValueError):
    """Raised by :func:`check_text`; the message says what is wrong."""


def check_text(text: str) -> None:
    """Reject text SQLite or JSON cannot carry faithfully: NUL bytes and lone surrogates."""
    if "\x00" in text:
        raise TextProblem("contains a NUL character (\\u0000); remove it")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise TextProblem("contains a lone surrogate code point; send valid UTF-8 text") from None


_LINE_BREAK = re.compile("\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")


def one_line(text: str) -> str:
    """``text`` kept on one line, each line break shown as ``↵``: a field a rendering gives a line of
    its own (a task node's title, a pending action) cannot start lines that read as the rendering's
    own (another node, a section). ``↵`` is no word character, so the words either side stay words."""
    return _LINE_BREAK.sub("↵", text)


def indented(text: str, indent: str = "  ", *, first: bool = False) -> str:
    """``text`` with every line after the first (and the first too, with ``first``) starting with
    ``indent``, each kind of line break read as one: a field that may span lines (a goal, working
    notes) keeps its lines, and none of them can pass for a line the rendering writes at the margin
    (a section's header such as "Verify before acting:", a bullet of the section)."""
    lines = _LINE_BREAK.split(text)
    return "\n".join(indent + line if first or i else line for i, line in enumerate(lines))


def normalize(text: str) -> str:
    """NFC and collapsed whitespace: the form that is stored and hashed."""
    return " ".join(unicodedata.normalize("NFC", text).split())


def strip_query_syntax(query: str) -> str:
    """A question as words: quotes, brackets and ``*`` become spaces."""
    return " ".join(_SYNTAX.sub(" ", query).split())


def has_cjk(text: str) -> bool:
    return _CJK_CHAR.search(text) is not None


CJK_LANGUAGES = frozenset({"zh", "ja", "ko"})


def script(text: str) -> int:
    """0 for a text in Latin script (or none), 1 for one CJK characters carry: the two scripts
    whose means a mixed store takes out (ADR 10)."""
    return 1 if language(text) in CJK_LANGUAGES else 0


def language(text: str) -> str:
    """'zh' when CJK characters carry the text, 'en' for Latin script, else 'und'."""
    cjk = len(_CJK_CHAR.findall(text))
    latin = len(_LATIN_WORD.findall(text))
    if cjk == 0 and latin == 0:
        return "und"
    if cjk >= latin:
        if re.search(r"[\u3040-\u30ff]", text):
            return "ja"
        if re.search(r"[\uac00-\ud7af]", text):
            return "ko"
        return "zh"
    return "en"


def _bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def segment_for_index(text: str) -> str:
    """The text the keyword index sees: CJK runs become space-separated bigrams, and the stems of its
    English words follow the text (``word_stems``)."""
    lowered = text.lower()
    segmented = CJK_RUN.sub(lambda m: " " + " ".join(_bigrams(m.group(0))) + " ", lowered)
    stems = word_stems(_WORD.findall(lowered))
    return f"{segmented} {' '.join(stems)}" if stems else segmented


# A private-use character: a token character to FTS5's unicode61 and to the PostgreSQL index's
# tokenizer alike, and never in a word as written, so a marked stem matches only a marked stem.
STEM_MARK = "\ue000"
_STEMMER = Stemmer.Stemmer("english")  # Snowball (Porter2), compiled in the wheel: nothing to download
_WORD = re.compile(r"[^\W_]+")  # a run of letters and digits, as unicode61 cuts tokens


def _stemmable(word: str) -> bool:
    return word.isascii() and word.isalpha() and word not in EN_STOPWORDS


def word_stems(words: Iterable[str]) -> list[str]:
    """The marked Snowball stems of the English words among ``words`` (lower-cased tokens), in
    order; numbers, identifiers, stopwords, CJK and words with other letters have none."""
    kept = [w for w in words if _stemmable(w)]
    return [STEM_MARK + stem for stem in _STEMMER.stemWords(kept)]


def stem_terms(terms: Iterable[str]) -> list[str]:
    """The marked stems of a question's keyword terms (``keyword_terms``) that are English words:
    what the keyword index searches besides the words as written."""
    return list(dict.fromkeys(word_stems(terms)))


def shares_stem(content: str, term: str) -> str | None:
    """The first word of ``content`` with the stem of the English word ``term``, as written there."""
    if not _stemmable(term):
        return None
    stem = _STEMMER.stemWord(term)
    if stem[:3] not in content.lower():  # most memories hold nothing of it: no stemming for them
        return None
    return next((w for w in _WORD.findall(content.lower()) if _stemmable(w) and _STEMMER.stemWord(w) == stem), None)


def keyword_terms(query: str) -> list[str]:
    """The words of a question for the keyword index: no syntax, no stopwords, CJK as bigrams.

    A Latin chunk such as ``INV-767`` stays whole, so the index searches it as a phrase.
    """
    terms: list[str] = []
    for chunk in strip_query_syntax(query).lower().split():
        pos = 0
        for run in CJK_RUN.finditer(chunk):
            terms.extend(_latin_terms(chunk[pos : run.start()]))
            for part in ZH_FUNCTION_CHARS.split(run.group(0)):
                if part:
                    terms.extend(_bigrams(part))
            pos = run.end()
        terms.extend(_latin_terms(chunk[pos:]))
    return list(dict.fromkeys(terms))


def _latin_terms(piece: str) -> list[str]:
    piece = piece.strip(_EDGE)
    if not piece or piece in EN_STOPWORDS or not any(c.isalnum() for c in piece):
        return []
    return [piece]


# The stopwords that point at something (a person, a thing, what is asked): "who am I?" is a question
# the meaning side can answer. The others are glue ("the of and"): a query of glue alone asks nothing.
_POINTERS = frozenset(
    """i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her
    hers herself it its itself they them their theirs themselves this that these those what which who whom
    when where why how""".split()
)
_GLUE = EN_STOPWORDS - _POINTERS


def nothing_to_search(query: str) -> str | None:
    """Why ``query`` gives recall nothing to search for (punctuation alone, "???"; glue words alone,
    "the of and", "的 了"), as the problem an error names; None when it has something."""
    words = strip_query_syntax(query).lower()
    if all(unicodedata.category(c)[0] in "PZ" for c in words):
        return "has no words to search for; ask a question in words"
    for chunk in words.split():
        pieces = [chunk[m.start() : m.end()] for m in CJK_RUN.finditer(chunk)]
        latin = [piece.strip(_EDGE) for piece in CJK_RUN.split(chunk)]
        if any(not ZH_FUNCTION_CHARS.fullmatch(c) for piece in pieces for c in piece):
            return None
        if any(piece and piece not in _GLUE for piece in latin):
            return None
    return (
        "has only words as common as 'the', 'of' or '的': nothing to search for; "
        "ask about something in words ('what tea does the user drink?')"
    )


def identifiers(text: str) -> frozenset[str]:
    """Identifier-like tokens (ids, versions, paths, numbers, dates), lower-cased."""
    return frozenset(m.group(0).lower().rstrip(".") for m in _IDENTIFIER.finditer(text))


def looks_like_identifier_query(query: str) -> bool:
    """True when a question names an id, version, file or path: keywords then weigh more."""
    for chunk in strip_query_syntax(query).split():
        for piece in CJK_RUN.split(chunk):
            word = piece.strip(_EDGE)
            if word and _STRICT_IDENTIFIER.match(word) and not _ORDINAL.match(word):
                return True
    return False


def estimate_tokens(text: str) -> int:
    """Offline token estimate: ~1 per CJK character, ~1.3 per Latin word, ~0.5 per symbol."""
    cjk = len(_CJK_CHAR.findall(text))
    rest = _CJK_CHAR.sub(" ", text)
    words = _LATIN_WORD.findall(rest)
    # A run past 20 characters is no word (words run together, an identifier, base64): a tokenizer
    # cuts it into pieces of about three characters.
    latin = sum(1.3 if len(w) <= _LONGEST_WORD else len(w) / 3 for w in words)
    symbols = sum(1 for c in rest if not c.isalnum() and not c.isspace())
    return max(1, cjk + math.ceil(latin) + math.ceil(symbols * 0.5))


_SPEAKER_PREFIX = re.compile(r"^[A-Z][\w.'-]*(?: [A-Z][\w.'-]*){0,2}:\s")
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s*")
_TITLE = re.compile(r"[《「『“\"]([^》」』”\"]{2,40})[》」』”\"]")
# Capitalised words that are not names: pronouns, greetings and sentence openers after a comma.
_NOT_NAMES = frozenset(
    """i i'm i've i'd i'll i'm it's that's there's let's im ok okay oh hey hi hello wow yes no yeah yep thanks thank
    sure dear mr mrs ms dr user user's users please also maybe reminder note today yesterday tomorrow great
    awesome cool nice sounds glad sorry well so anyway really""".split()
) | frozenset(  # times are not things two memories share as a subject
    """monday tuesday wednesday thursday friday saturday sunday january february march april may june july
    august september october november december""".split()
)


def entities(text: str) -> frozenset[str]:
    """What a memory names, lower-cased: identifiers (INV-767, v1.2.3, a path) and names (capitalised
    words, joined when adjacent: "ThinkPad X1 Carbon", "New York"; one opening a sentence unless it is
    a common word), and titles in quotes or 《》. A leading "Speaker: " is not an entity of the memory:
    a speaker is in every turn."""
    body = _SPEAKER_PREFIX.sub("", text, count=1)
    found = {i for i in identifiers(body) if not i.replace(".", "").replace(",", "").isdigit()}
    found.update(m.group(1).strip().lower() for m in _TITLE.finditer(body))
    for sentence in _SENTENCE.split(body):
        # A CJK run separates names (用户写代码用VS Code) and opens no sentence of its own.
        words = CJK_RUN.sub(" \u3001 ", sentence).split()
        run: list[str] = []
        for raw in [*words, ""]:
            word = raw.strip(_EDGE + "…—-")
            lower = word.lower()
            if word[:1].isupper() and lower not in _NOT_NAMES and lower not in EN_STOPWORDS:
                run.append(lower)
                continue
            if run:
                found.add(" ".join(run))
                run = []
    return frozenset(e for e in found if len(e) > 1)


def segment(value: str) -> str:
    """An id as one path segment of a URI: "/", "?", "#", "%" and the like percent-encoded, which the
    resource templates decode, so a task id "a/b" is read back as itself."""
    return quote(value, safe="")


def task_uri(task_id: str, *, encoded: bool = True) -> str:
    """The resource of a task's head, as the server hands it out (the id one encoded path segment),
    or (``encoded=False``) as a subscriber may have typed it, the id raw."""
    return f"memory://tasks/{segment(task_id) if encoded else task_id}"


def checkpoint_uri(task_id: str, checkpoint_id: str) -> str:
    return f"{task_uri(task_id)}/checkpoints/{segment(checkpoint_id)}"

"""Edit one entry of a JSON or JSONC document by changing as little text as possible.

VS Code's and Zed's settings are JSONC (// and /* */ comments, trailing commas). Loading such a file
and dumping it again would drop the user's comments and reformat every line, so this module parses the
text into nodes that remember where they start and end, and an edit rewrites only the bytes of the
one entry it adds, replaces or removes. Everything else (comments, order, indentation, other
servers) stays byte for byte. Strict JSON is a subset, so the same edits serve every JSON client.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson


class JsoncError(ValueError):
    """The text is not JSON(C); the message gives the line and column."""


@dataclass
class Node:
    start: int
    end: int  # one past the value's last character
    value: Any
    members: list[Member] = field(default_factory=list)  # an object's, in text order


@dataclass
class Member:
    key: str
    key_start: int
    node: Node


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, problem: str, at: int | None = None) -> JsoncError:
        at = self.pos if at is None else at
        line = self.text.count("\n", 0, at) + 1
        column = at - (self.text.rfind("\n", 0, at) + 1) + 1
        return JsoncError(f"{problem} at line {line}, column {column}")

    def skip(self) -> None:
        """Whitespace and comments."""
        text = self.text
        while self.pos < len(text):
            if text[self.pos] in " \t\r\n\ufeff":
                self.pos += 1
            elif text.startswith("//", self.pos):
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end
            elif text.startswith("/*", self.pos):
                end = text.find("*/", self.pos + 2)
                if end < 0:
                    raise self.fail("unclosed /* comment")
                self.pos = end + 2
            else:
                return

    def value(self) -> Node:
        self.skip()
        if self.pos >= len(self.text):
            raise self.fail("unexpected end of text")
        char = self.text[self.pos]
        if char == "{":
            return self.container("}")
        if char == "[":
            return self.container("]")
        if char == '"':
            return self.string()
        return self.scalar()

    def string(self) -> Node:
        start, text = self.pos, self.text
        pos = start + 1
        while pos < len(text) and text[pos] != '"':
            pos += 2 if text[pos] == "\\" else 1
        if pos >= len(text):
            raise self.fail("unclosed string", start)
        self.pos = pos + 1
        try:
            return Node(start, self.pos, orjson.loads(text[start : self.pos]))
        except orjson.JSONDecodeError:
            raise self.fail("invalid string", start) from None

    def scalar(self) -> Node:
        start, text = self.pos, self.text
        while self.pos < len(text) and text[self.pos] not in ",]}/ \t\r\n":
            self.pos += 1
        try:
            return Node(start, self.pos, orjson.loads(text[start : self.pos]))
        except orjson.JSONDecodeError:
            raise self.fail(f"unexpected {text[start : self.pos] or text[start]!r}", start) from None

    def container(self, closer: str) -> Node:
        node = Node(self.pos, self.pos, {} if closer == "}" else [])
        self.pos += 1
        while True:
            self.skip()
            if self.text.startswith(closer, self.pos):
                break
            if closer == "}":
                key = self.value() if self.text.startswith('"', self.pos) else None
                if key is None or not isinstance(key.value, str):
                    raise self.fail("expected a quoted key")
                self.skip()
                if not self.text.startswith(":", self.pos):
                    raise self.fail("expected ':'")
                self.pos += 1
                child = self.value()
                node.members.append(Member(key.value, key.start, child))
                node.value[key.value] = child.value
            else:
                node.value.append(self.value().value)
            self.skip()
            if self.text.startswith(",", self.pos):
                self.pos += 1  # a trailing comma before the closer is JSONC
            elif not self.text.startswith(closer, self.pos):
                raise self.fail(f"expected ',' or {closer!r}")
        self.pos += 1
        node.end = self.pos
        return node


def parse(text: str) -> Node:
    """The document's root node; JsoncError when it is not JSON(C)."""
    parser = _Parser(text)
    root = parser.value()
    parser.skip()
    if parser.pos != len(text):
        raise parser.fail("unexpected text after the document")
    return root


def member(node: Node, key: str) -> Member | None:
    """The object's member by that key; JsoncError when the key appears twice (which one wins differs by client)."""
    found = [m for m in node.members if m.key == key]
    if len(found) > 1:
        raise JsoncError(f"the key {key!r} appears {len(found)} times; keep one")
    return found[0] if found else None


def unique_keys(node: Node) -> None:
    """JsoncError when the object names a key twice."""
    for m in node.members:
        member(node, m.key)


def indent_unit(text: str) -> str:
    """The file's indentation step: the leading whitespace of its first indented key."""
    for line in text.splitlines():
        stripped = line.lstrip(" \t")
        if stripped.startswith('"') and len(stripped) < len(line):
            return line[: len(line) - len(stripped)]
    return "  "


def render(value: Any, depth: int, unit: str) -> str:
    """``value`` as JSON whose inner lines sit ``depth + 1`` steps in: an object a member a line, a
    list of plain values on one line (``"args": ["serve"]``, as people write it)."""
    if isinstance(value, dict) and value:
        inner = unit * (depth + 1)
        members = [f"{inner}{orjson.dumps(k).decode()}: {render(v, depth + 1, unit)}" for k, v in value.items()]
        return "{\n" + ",\n".join(members) + "\n" + unit * depth + "}"
    if isinstance(value, list) and any(isinstance(item, dict | list) for item in value):
        inner = unit * (depth + 1)
        return "[\n" + ",\n".join(inner + render(item, depth + 1, unit) for item in value) + "\n" + unit * depth + "]"
    if isinstance(value, list):
        return "[" + ", ".join(orjson.dumps(item).decode() for item in value) + "]"
    return orjson.dumps(value).decode()


def set_path(text: str, keys: tuple[str, str], value: Any) -> str:
    """``text`` with ``root[keys[0]][keys[1]] = value``, creating the outer object when absent."""
    root, unit = parse(text), indent_unit(text)
    outer = member(root, keys[0])
    if outer is None:
        return _insert(text, root, keys[0], {keys[1]: value}, 0, unit)
    inner = member(outer.node, keys[1])
    if inner is None:
        return _insert(text, outer.node, keys[1], value, 1, unit)
    node = inner.node
    return text[: node.start] + render(value, 2, unit) + text[node.end :]


def remove_path(text: str, keys: tuple[str, str]) -> str:
    """``text`` without ``root[keys[0]][keys[1]]`` (unchanged when it is absent)."""
    outer = member(parse(text), keys[0])
    if outer is None or member(outer.node, keys[1]) is None:
        return text
    members = outer.node.members
    index = next(i for i, m in enumerate(members) if m.key == keys[1])
    gone = members[index]
    line_start = text.rfind("\n", 0, gone.key_start) + 1
    start = line_start if not text[line_start : gone.key_start].strip() else gone.key_start
    end = _past_blanks(text, gone.node.end)
    comma = text.startswith(",", end)
    if comma:
        end = _past_blanks(text, end + 1)
    if start == line_start and text.startswith("\n", end):
        end += 1
    text = text[:start] + text[end:]
    if not comma and index > 0:  # the last member went: the comma before it must go too
        before = _comma_after(text, members[index - 1].node.end)
        if before is not None:
            text = text[:before] + text[before + 1 :]
    return _emptied(text, keys[0]) if len(members) == 1 else text  # the only member went


def _emptied(text: str, key: str) -> str:
    """An object left with only blanks between its braces written ``{}`` (its comments kept)."""
    obj = member(parse(text), key)
    if obj is None or obj.node.members or text[obj.node.start + 1 : obj.node.end - 1].strip():
        return text
    return text[: obj.node.start] + "{}" + text[obj.node.end :]


def _insert(text: str, obj: Node, key: str, value: Any, depth: int, unit: str) -> str:
    """Add ``"key": value`` as the object's last member, after any comments that close it."""
    close = obj.end - 1
    at = len(text[:close].rstrip())
    tail = text[at:close] if "\n" in text[at:close] else "\n" + unit * depth
    entry = "\n" + unit * (depth + 1) + orjson.dumps(key).decode() + ": " + render(value, depth + 1, unit)
    text = text[:at] + entry + tail + text[close:]
    if obj.members and _comma_after(text, obj.members[-1].node.end) is None:
        last = obj.members[-1].node.end
        text = text[:last] + "," + text[last:]
    return text


def _past_blanks(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t":
        pos += 1
    return pos


def _comma_after(text: str, pos: int) -> int | None:
    """Where the comma after a value is, past whitespace and comments; None when none follows."""
    parser = _Parser(text)
    parser.pos = pos
    parser.skip()
    return parser.pos if text.startswith(",", parser.pos) else None

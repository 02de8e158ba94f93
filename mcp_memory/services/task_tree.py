"""Task tree rules: one root, unique node ids, no cycles; edits apply all-or-nothing."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from mcp_memory.core.errors import InvalidInputError, LimitExceededError
from mcp_memory.core.task_model import NodeStatus, TaskEdit, TaskHead, TaskNode
from mcp_memory.core.text import one_line

MARK: dict[NodeStatus, str] = {
    "pending": "[ ]",
    "in_progress": "[>]",
    "done": "[x]",
    "blocked": "[!]",
    "abandoned": "[-]",
}

MAX_TITLE_CHARS = 500  # a title is a line of the resume packet's outline: its budget cannot shrink it


def walk(node: TaskNode, parent: TaskNode | None = None) -> Iterator[tuple[TaskNode, TaskNode | None]]:
    yield node, parent
    for child in node.children:
        yield from walk(child, node)


def depth(tree: TaskNode | None) -> int:
    """Levels from the root to the deepest leaf (0 for no tree), without recursion."""
    deepest, stack = 0, [(tree, 1)] if tree is not None else []
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in node.children)
    return deepest


def validate(tree: TaskNode | None, field: str, max_depth: int) -> None:
    if tree is None:
        return
    levels = depth(tree)
    if levels > max_depth:
        raise LimitExceededError(field, f"is {levels} levels deep", limit_name="limits.max_tree_depth", limit=max_depth)
    seen: set[str] = set()
    for node, _ in walk(tree):
        if not node.id.strip() or len(node.id) > 200:
            raise InvalidInputError(f"{field}", f"node id {node.id!r} must be 1 to 200 characters")
        if node.id in seen:
            raise InvalidInputError(f"{field}", f"node id {node.id!r} appears twice; node ids must be unique")
        if not node.title.strip():
            raise InvalidInputError(f"{field}", f"node {node.id!r} has a blank title; give every node a title in words")
        if len(node.title) > MAX_TITLE_CHARS:
            raise InvalidInputError(
                f"{field}",
                f"node {node.id!r} has a title of {len(node.title):,} characters; keep a title to "
                f"{MAX_TITLE_CHARS} and put the details in the node's notes",
            )
        seen.add(node.id)


def find(tree: TaskNode | None, node_id: str) -> tuple[TaskNode, TaskNode | None] | None:
    if tree is None:
        return None
    for node, parent in walk(tree):
        if node.id == node_id:
            return node, parent
    return None


def _require(tree: TaskNode | None, node_id: str | None, field: str) -> tuple[TaskNode, TaskNode | None]:
    if node_id is None:
        raise InvalidInputError(field, "is required for this edit")
    found = find(tree, node_id)
    if found is None:
        raise InvalidInputError(field, f"no node {node_id!r} in this task's tree")
    return found


def _insert(parent: TaskNode, node: TaskNode, position: int | None) -> None:
    index = len(parent.children) if position is None else min(position, len(parent.children))
    parent.children.insert(index, node)


def apply_edits(head: TaskHead, edits: Sequence[TaskEdit], max_depth: int) -> TaskHead:
    """A new head with every edit applied, or InvalidInputError naming the first bad edit (head untouched)."""
    new = head.model_copy(deep=True)
    for i, edit in enumerate(edits):
        where = f"edits[{i}]"
        if edit.op == "add":
            _add(new, edit, where, max_depth)
        elif edit.op == "move":
            _move(new, edit, where)
        elif edit.op == "set":
            node, _ = _require(new.tree, edit.node_id, f"{where}.node_id")
            _set(node, edit, where)
        else:  # set_current
            node, _ = _require(new.tree, edit.node_id, f"{where}.node_id")
            new.current_node = node.id
    if new.current_node is not None and find(new.tree, new.current_node) is None:
        raise InvalidInputError("current_node", f"no node {new.current_node!r} in this task's tree")
    validate(new.tree, "edits", max_depth)  # a move can deepen the tree too
    return new


def _add(head: TaskHead, edit: TaskEdit, where: str, max_depth: int) -> None:
    if edit.node is None:
        raise InvalidInputError(f"{where}.node", "is required to add a node")
    if edit.parent_id is None:
        if head.tree is not None:
            raise InvalidInputError(
                f"{where}.parent_id", f"the task already has a root ({head.tree.id!r}); a tree has one root"
            )
        head.tree = edit.node.model_copy(deep=True)
    else:
        parent, _ = _require(head.tree, edit.parent_id, f"{where}.parent_id")
        for added, _ in walk(edit.node):
            if find(head.tree, added.id) is not None:
                raise InvalidInputError(f"{where}.node", f"node id {added.id!r} already exists")
        _insert(parent, edit.node.model_copy(deep=True), edit.position)
    validate(head.tree, f"{where}.node", max_depth)


def _move(head: TaskHead, edit: TaskEdit, where: str) -> None:
    node, old_parent = _require(head.tree, edit.node_id, f"{where}.node_id")
    if old_parent is None:
        raise InvalidInputError(f"{where}.node_id", f"{node.id!r} is the root; the root cannot move")
    target, _ = _require(head.tree, edit.parent_id, f"{where}.parent_id")
    if find(node, target.id) is not None:
        raise InvalidInputError(f"{where}.parent_id", f"moving {node.id!r} under {target.id!r} would make a cycle")
    old_parent.children.remove(node)
    _insert(target, node, edit.position)


def _set(node: TaskNode, edit: TaskEdit, where: str) -> None:
    if all(value is None for value in (edit.title, edit.notes, edit.status, edit.blocked_reason)):
        raise InvalidInputError(where, f"sets nothing on {node.id!r}; give status, title, notes or blocked_reason")
    if edit.title is not None:
        node.title = edit.title
    if edit.notes is not None:
        node.notes = edit.notes
    if edit.status is not None:
        node.status = edit.status
        if edit.status != "blocked" and edit.blocked_reason is None:
            node.blocked_reason = None
    if edit.blocked_reason is not None:
        node.blocked_reason = edit.blocked_reason
    if node.status == "blocked" and not node.blocked_reason:
        raise InvalidInputError(f"{where}.blocked_reason", "a blocked node needs a reason")


def outline(tree: TaskNode | None, current: str | None, max_lines: int | None = None) -> str:
    """The tree as an indented checklist, a line per node (a line break in an id, title or blocked
    reason is shown as ``↵``); finished subtrees fold first when lines are short, and the current
    node's line and its ancestors' stay whatever is cut."""
    if tree is None:
        return "(no tree yet)"

    def lines(node: TaskNode, depth: int, fold: bool) -> list[tuple[str, str | None]]:
        mark = " <- current" if node.id == current else ""
        reason = f" (blocked: {one_line(node.blocked_reason)})" if node.blocked_reason else ""
        out: list[tuple[str, str | None]] = [
            (f"{'  ' * depth}- {MARK[node.status]} {one_line(node.id)}: {one_line(node.title)}{reason}{mark}", node.id)
        ]
        finished = node.status in ("done", "abandoned") and not any(n.id == current for n, _ in walk(node))
        if fold and finished and node.children:
            out.append((f"{'  ' * (depth + 1)}({sum(1 for _ in walk(node)) - 1} finished steps folded)", None))
            return out
        for child in node.children:
            out.extend(lines(child, depth + 1, fold))
        return out

    full = lines(tree, 0, fold=False)
    if max_lines is None or len(full) <= max_lines:
        return "\n".join(text for text, _ in full)
    folded = lines(tree, 0, fold=True)
    if len(folded) <= max_lines:
        return "\n".join(text for text, _ in folded)
    return "\n".join(_cut(folded, _path(tree, current), max_lines))


def _path(tree: TaskNode, node_id: str | None) -> set[str]:
    """``node_id`` and its ancestors (nothing when it is not in the tree)."""
    parents = {node.id: parent.id if parent else None for node, parent in walk(tree)}
    path: set[str] = set()
    at = node_id if node_id in parents else None
    while at is not None:
        path.add(at)
        at = parents[at]
    return path


def _cut(entries: list[tuple[str, str | None]], keep: set[str], max_lines: int) -> list[str]:
    """The first lines that fit beside those of ``keep``, with a mark where lines are left out."""
    must = {i for i, (_, node_id) in enumerate(entries) if node_id in keep}
    room = max(max_lines - len(must) - 2, 0)  # two lines for the marks
    out: list[str] = []
    last = -1
    for i in sorted(set(range(min(room, len(entries)))) | must):
        if i > last + 1:
            out.append(f"... {_lines(i - last - 1)} left out")
        out.append(entries[i][0])
        last = i
    if last < len(entries) - 1:
        out.append(f"... {_lines(len(entries) - last - 1, 'more ')} in the full checkpoint")
    return out


def _lines(n: int, more: str = "") -> str:
    return f"{n} {more}line" + ("" if n == 1 else "s")

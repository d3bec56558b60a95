"""Todo lists: from a todo tool's calls in the transcript, or from a ``--todos`` file."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ..errors import UsageError
from ..model import Record, ToolCall
from ..paths import read_side_file
from .calls import decode_args, squash
from .seen import Kind, Seen, scan


@dataclass(slots=True)
class Todo:
    content: str
    status: str = "pending"  # pending | in_progress | completed (as the todo tool spelled it)


_COMPLETED = {"completed", "complete", "done", "finished", "cancelled", "canceled"}

# Tool names compared without case, "_" or "-": TodoWrite, todo_write, todowrite, update_plan, write_todos…
_TODO_TOOLS = {"todowrite", "updateplan", "writetodos", "todoupdate", "updatetodos", "settodos", "todos",
               "todo", "plan", "manageplan", "todolistwrite"}


def _todo_from_item(item: Any) -> Todo | None:
    if isinstance(item, str):
        return Todo(item.strip(), "pending") if item.strip() else None
    if not isinstance(item, dict):
        return None
    content = None
    for key in ("content", "text", "step", "title", "task", "description", "activeForm"):
        v = item.get(key)
        if isinstance(v, str) and v.strip():
            content = v.strip()
            break
    if content is None:
        return None
    status = item.get("status") or item.get("state")
    if not isinstance(status, str) or not status.strip():
        status = "completed" if item.get("done") is True or item.get("checked") is True else "pending"
    return Todo(content, status.strip())


def todo_list_from_call(call: ToolCall) -> list[Todo] | None:
    """The full todo list a todo-tool call writes (every status), or None when it is not one."""
    if squash(call.name) not in _TODO_TOOLS:
        return None
    args = decode_args(call)
    items: Any = None
    if isinstance(args, dict):
        for key in ("todos", "plan", "items", "tasks", "steps"):
            if isinstance(args.get(key), list):
                items = args[key]
                break
    elif isinstance(args, list):
        items = args
    if items is None:
        return None
    return [t for t in (_todo_from_item(i) for i in items) if t is not None]


def latest_todo_list(records: Iterable[Record]) -> list[Todo] | None:
    """The list written by the last todo-tool call that carries one (all statuses); None if there is none."""
    return scan(TodoScan(), records)


class TodoScan:
    """:func:`latest_todo_list` read record by record."""

    def __init__(self) -> None:
        self.found: list[Todo] | None = None

    @staticmethod
    def reads(kind: Kind) -> bool:
        return kind.calls

    def feed(self, rec: Seen) -> None:
        for call in rec.calls:
            todos = todo_list_from_call(call)
            if todos is not None:
                self.found = todos

    def result(self) -> list[Todo] | None:
        return self.found


def is_open(todo: Todo) -> bool:
    return todo.status.strip().lower().replace(" ", "_") not in _COMPLETED


def open_todos(records: Iterable[Record]) -> list[Todo]:
    """Items of the last todo-tool call (TodoWrite, todo_write, update_plan, write_todos…) not completed."""
    return [t for t in latest_todo_list(records) or [] if is_open(t)]


_CHECKBOX = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+\[([ xX~/\-])\]\s+(.+?)\s*$")


def load_todos_file(path: str | Path) -> list[Todo]:
    """Open todo items from a ``--todos`` file: a JSON list of ``{content, status}`` (or an object with a
    ``todos`` list), or a Markdown checklist (``- [ ] open``, ``- [x] done``, ``- [~]`` in progress).
    Raises UsageError when the file cannot be read, is not a regular file, is larger than
    ``paths.SIDE_FILE_LIMIT`` or holds no todo list."""
    try:
        raw = read_side_file(path, f"--todos {path}")
    except OSError as e:
        raise UsageError(f"--todos {path}: cannot read: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise UsageError(f"--todos {path}: not UTF-8 text") from None
    if not text.strip():
        return []
    stripped = text.lstrip()
    if stripped[:1] in "[{":
        try:
            data = orjson.loads(stripped.encode())
        except orjson.JSONDecodeError as e:
            raise UsageError(f"--todos {path}: invalid JSON: {e}") from None
        items = data.get("todos") if isinstance(data, dict) else data
        if not isinstance(items, list):
            raise UsageError(f"--todos {path}: expected a JSON list of {{content, status}} items")
        todos = [t for t in (_todo_from_item(i) for i in items) if t is not None]
        return [t for t in todos if is_open(t)]
    todos = []
    for line in text.splitlines():
        m = _CHECKBOX.match(line)
        if m:
            mark = m.group(1)
            status = "completed" if mark in "xX" else "pending" if mark == " " else "in_progress"
            todos.append(Todo(m.group(2), status))
    if not todos:
        raise UsageError(f"--todos {path}: no JSON todo list and no Markdown checklist (- [ ] item) found")
    return [t for t in todos if is_open(t)]



"""Reading tool calls: their decoded arguments, the shell command they run, calls by id."""

from __future__ import annotations

import re
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar, Token
from functools import lru_cache
from typing import Any, TypeVar

import orjson

from ..model import Record, ToolCall

_T = TypeVar("_T")
_O = TypeVar("_O")
_NOT_ALNUM = re.compile(r"[^a-z0-9]")


@lru_cache(maxsize=512)
def squash(s: str) -> str:
    """A tool name lowercased, letters and digits only (``run_shell`` → ``runshell``); the names are few."""
    return _NOT_ALNUM.sub("", s.lower())


# What is read from one tool call (its command, its paths) or record (what a person typed in it), by its id,
# while a block of :func:`once_per_call` runs: the passes of facts.gather each ask it of every call.
Memo = dict[tuple[str, int], tuple[Any, Any]]
_PER_CALL: ContextVar[Memo | None] = ContextVar("ctxcompact_per_call", default=None)


class once_per_call:
    """Within the block, :func:`per_call` works out each call's value once (the records, so the calls, stay
    alive for the block: a call's id is its identity; the value is kept with the call and checked).
    ``memo``: the one to work in (a caller that keeps values across blocks, facts.gather.FactFeed), else a
    new one. A class, not a generator: it is entered for every record a compaction reads."""

    __slots__ = ("memo", "token")
    token: Token[Memo | None] | None

    def __init__(self, memo: Memo | None = None) -> None:
        self.memo = memo

    def __enter__(self) -> None:
        # already in one: the outer block's memo serves
        if _PER_CALL.get() is not None:
            self.token = None
        else:
            self.token = _PER_CALL.set({} if self.memo is None else self.memo)

    def __exit__(self, *exc: object) -> None:
        if self.token is not None:
            _PER_CALL.reset(self.token)


def per_call(kind: str, call: _O, compute: Callable[[_O], _T]) -> _T:
    """``compute(call)``, once per call (or record) inside :func:`once_per_call` (every time outside it)."""
    memo = _PER_CALL.get()
    if memo is None:
        return compute(call)
    key = (kind, id(call))
    hit = memo.get(key)
    if hit is not None and hit[0] is call:
        value: _T = hit[1]
        return value
    value = compute(call)
    memo[key] = (call, value)
    return value


SHELL_TOOLS = {"bash", "shell", "sh", "zsh", "runcommand", "runterminalcmd", "executecommand", "execcommand",
                "terminal", "runshellcommand", "localshell", "shellcommand", "command", "exec", "powershell",
                "runinterminal", "execute", "runbash"}
# Tools whose output is file or search content: a "KeyError:" inside it is code, not a failure.
_CONTENT_TOOL_WORDS = ("read", "view", "grep", "search", "glob", "list", "find", "fetch", "open", "cat", "ls")


def decode_args(call: ToolCall) -> Any:
    value: Any = call.input
    if value is None and call.arguments:
        try:
            value = orjson.loads(call.arguments)
        except orjson.JSONDecodeError:
            return None
    # Real logs hold double-encoded arguments (a JSON string whose value is the JSON object).
    if isinstance(value, str):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            return None
    return value



def call_index(records: Iterable[Record]) -> dict[str, ToolCall]:
    """Tool calls by id (the last one wins for a duplicated id)."""
    calls: dict[str, ToolCall] = {}
    for rec in records:
        if rec.message is not None:
            for call in rec.message.tool_calls():
                calls[call.id] = call
    return calls


class Hashes:
    """A set of strings kept as 64-bit hashes (``hash``), 8 bytes each: a sorted array looked up by bisection
    and the latest few in a set, merged into it in place once they are a 32nd of it. A collision answers
    "seen" for a string that was not: :class:`CallsSoFar` then says it is not exact, and the caller reads
    the file held (the same output, more memory); it never says "not seen" for a string that was.

    (The set costs ~70 bytes a hash, its int objects and its table: merged at a quarter, by a merge that
    built a second array beside the first, a hash held ~35 bytes at the peak, the fact feed's largest
    growth on a tool loop's many small records; now ~11.)"""

    __slots__ = ("new", "old")

    #: the set is merged once it holds more than this many, or a 32nd of the array
    FLOOR = 1024
    #: the most items a merge copies at once (what it holds beside the array while shifting it)
    STEP = 1 << 14

    def __init__(self) -> None:
        self.old, self.new = array("q"), set[int]()

    def __contains__(self, key: str) -> bool:
        return self.has_hash(hash(key))

    def has_hash(self, h: int) -> bool:
        if h in self.new:
            return True
        i = bisect_left(self.old, h)
        return i < len(self.old) and self.old[i] == h

    def add(self, key: str) -> None:
        self.add_hash(hash(key))

    def add_hash(self, h: int) -> None:
        self.new.add(h)
        if len(self.new) > self.FLOOR + len(self.old) // 32:
            self._merge()

    def _merge(self) -> None:
        """The set's hashes into the sorted array, in place: the array grown by them, then, from its end,
        each run of its items moved up past the new hashes below it (a piece of at most :attr:`STEP` items
        copied at a time) and each new hash put in the gap. Linear in the array (moves, in C) plus a
        bisection a new hash: no second array, no object per item."""
        old, new = self.old, sorted(self.new)
        self.new = set()
        n = len(old)
        where = [bisect_right(old, h) for h in new]  # (in the array as it was)
        old.extend(new)  # (room at the end: overwritten below)
        end = n  # the items at and past ``end`` are moved already
        for j in range(len(new) - 1, -1, -1):
            at, by = where[j], j + 1
            while end > at:  # old[at:end] moves up by ``by`` (from its end: no item overwritten unread)
                lo = max(at, end - self.STEP)
                old[lo + by:end + by] = old[lo:end]
                end = lo
            old[at + j] = new[j]

class CallsSoFar(Mapping[str, ToolCall]):
    """:func:`call_index` of the records fed so far (``add`` each record before its results are read). A
    lookup answers as over the whole list unless a later record gives the id a call (a result read before
    its call, or an id used again after a result looked it up): ``exact`` says none did."""

    def __init__(self, forget: bool = False) -> None:
        self.calls: dict[str, ToolCall] = {}
        self.asked = Hashes()  # every id looked up: a record's only growth here, 8 bytes each
        self.exact = True
        #: ``forget``: a call answered is dropped after its record (``answered``), so what is held is the
        #: calls not yet answered; a later lookup of it makes the index inexact
        self.forget = forget
        self.just_asked: list[str] = []

    def add(self, calls: Iterable[ToolCall]) -> None:
        """A record's tool calls (``seen.Seen.calls``: its message's, walked once for every scan)."""
        for call in calls:
            if call.id in self.asked:
                self.exact = False
            self.calls[call.id] = call

    def answered(self) -> None:
        """After a record: forget the calls its results looked up (with ``forget``)."""
        if self.forget:
            for key in self.just_asked:
                self.calls.pop(key, None)
        self.just_asked.clear()

    def _ask(self, key: str) -> None:
        if self.forget:
            if key in self.asked and key not in self.just_asked:
                self.exact = False  # asked again after its call was forgotten
            self.just_asked.append(key)
        self.asked.add(key)

    def __getitem__(self, key: str) -> ToolCall:
        self._ask(key)
        return self.calls[key]

    def get(self, key: str, default: Any = None) -> Any:
        self._ask(key)
        return self.calls.get(key, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self.calls)

    def __len__(self) -> int:
        return len(self.calls)


def strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


def all_strings(value: Any) -> list[str]:
    """Every string in a decoded tool-call argument, however deeply nested."""
    if isinstance(value, dict):
        return [s for v in value.values() for s in all_strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in all_strings(v)]
    return strings(value)


_SHELLS = {"bash", "sh", "zsh", "/bin/bash", "/bin/sh", "/bin/zsh", "powershell", "pwsh", "cmd"}


def command_of(call: ToolCall) -> str | None:
    """The shell command a call runs (``command``/``cmd`` argument), or None. A Codex-style argv
    ``["bash", "-lc", "pytest -q"]`` gives the script; another argv is joined by spaces."""
    return per_call("command", call, _command_of)


def _command_of(call: ToolCall) -> str | None:
    args = decode_args(call)
    if not isinstance(args, dict):
        return None
    value = args.get("command", args.get("cmd"))
    if value is None and squash(call.name) in SHELL_TOOLS:
        value = args.get("script") or args.get("input")
    if isinstance(value, str):
        return value.strip() or None
    argv = strings(value)
    if not argv:
        return None
    if len(argv) >= 3 and argv[0] in _SHELLS and argv[1] in ("-c", "-lc", "-l", "/c", "-Command"):
        return argv[-1].strip() or None
    return " ".join(argv)



def is_shell_call(call: ToolCall) -> bool:
    return command_of(call) is not None



@lru_cache(maxsize=512)
def is_content_tool(name: str) -> bool:
    # (per tool name, as squash: the names are few, and every result of a call asks)
    n = name.lower()
    return any(w in n for w in _CONTENT_TOOL_WORDS) and squash(name) not in SHELL_TOOLS


# Tools that change files (a success on a file resolves any tool's earlier error on it).
_WRITE_TOOL_WORDS = ("edit", "write", "patch", "create", "replace", "insert")


def writes_files(call: ToolCall) -> bool:
    """A call that changes files: a tool named for it (Edit, MultiEdit, Write, NotebookEdit, apply_patch,
    str_replace…) or a shell ``apply_patch`` (Codex)."""
    if _writer_name(call.name):
        return True
    cmd = command_of(call)
    return cmd is not None and cmd.lstrip().startswith("apply_patch")


@lru_cache(maxsize=512)
def _writer_name(name: str) -> bool:
    """A tool named for changing files (:func:`writes_files`), worked out once per name: the names are few,
    and several scans ask it of every call."""
    name = squash(name)
    return any(w in name for w in _WRITE_TOOL_WORDS) and name not in SHELL_TOOLS


def quoted_spans(cmd: str) -> list[tuple[int, int]]:
    """The quoted arguments of a shell command as ``(start, end)`` spans, quotes included: ``'…'`` (no
    escapes inside) and ``"…"`` (backslash escapes inside). One pass, each character read once; an
    unclosed quote ends the scan."""
    spans: list[tuple[int, int]] = []
    i, n = 0, len(cmd)
    while i < n:
        c = cmd[i]
        if c == "\\":
            i += 2
            continue
        if c == "'":
            end = cmd.find("'", i + 1)
        elif c == '"':
            end = i + 1
            while end < n and cmd[end] != '"':
                end += 2 if cmd[end] == "\\" else 1
            if end >= n:
                end = -1
        else:
            i += 1
            continue
        if end < 0:
            break
        spans.append((i, end + 1))
        i = end + 1
    return spans

"""The identifiers `eval` looks for after a compaction (docs/guides/eval.md#identifiers).

Five kinds, each read by one documented rule from the records a compaction replaced:

- ``path``: file paths: the path-like arguments of tool calls and patch headers (``facts.files``), and
  path-like tokens in what the user typed and the assistant wrote;
- ``command``: the shell commands tool calls ran (at most :data:`MAX_COMMAND_CHARS`; longer ones are scripts);
- ``error``: the telling line of each failed tool result (``facts.outcomes.error_line``);
- ``url``: ``scheme://…`` in what the user typed, the assistant wrote and tool calls sent;
- ``symbol``: code symbols: names declared by ``def``/``class``/``function``/``fn``/``func``/``struct``/
  ``interface`` in tool-call arguments (code the assistant wrote), and identifiers quoted in backticks
  (`` `parse_line` ``, `` `cli.main()` ``) by the user or the assistant.

Tool outputs contribute only their error line: a listing or a file's content holds thousands of names nobody
asked to remember. An identifier is kept when its exact string occurs in the compacted context (whitespace
runs compared as one space, since summaries reflow commands).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..facts.calls import all_strings, call_index, command_of, decode_args
from ..facts.files import path_tokens, paths_of_call
from ..facts.outcomes import call_failed, error_line, output_text
from ..facts.text import typed_text
from ..model import Record, Role, TextBlock

KINDS = ("path", "command", "error", "url", "symbol")
MAX_COMMAND_CHARS = 200

_URL = re.compile(r"\b[a-zA-Z][\w+.-]{0,63}://[^\s<>\"'`)\]]+")  # a bounded scheme: linear (facts/files)
_DECLARED = re.compile(r"\b(?:def|class|function|fn|func|struct|interface)\s+([A-Za-z_]\w{2,})")
_BACKTICKED = re.compile(r"`([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*)(?:\(\))?`")


def _looks_like_symbol(name: str) -> bool:
    """snake_case, dotted or camelCase names; a plain word in backticks (`yes`) is no code symbol."""
    return len(name) >= 3 and ("_" in name or "." in name or bool(re.search(r"[a-z][A-Z]", name)))


@dataclass(slots=True)
class Identifiers:
    """Identifiers by kind, each once, in the order they first occur."""

    by_kind: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k in KINDS})
    # what each kind holds, for O(1) membership (the list's ``in`` made a long session quadratic)
    _seen: dict[str, set[str]] = field(default_factory=lambda: {k: set() for k in KINDS})

    def add(self, kind: str, value: str) -> None:
        value = value.strip()
        if value and value not in self._seen[kind]:
            self._seen[kind].add(value)
            self.by_kind[kind].append(value)

    def total(self) -> int:
        return sum(len(v) for v in self.by_kind.values())


def _urls(text: str) -> list[str]:
    return [m.group(0).rstrip(".,:;") for m in _URL.finditer(text)]


def _prose(rec: Record) -> str | None:
    """What a person typed, or what the assistant wrote in text (not tool output)."""
    msg = rec.message
    if msg is None:
        return None
    if msg.role is Role.USER:
        return typed_text(rec)
    if msg.role is Role.ASSISTANT:
        return "\n".join(b.text for b in msg.blocks if isinstance(b, TextBlock)) or None
    return None


def extract(records: Iterable[Record], context: Iterable[Record] | None = None) -> Identifiers:
    """The identifiers in ``records`` by the rules above. ``context`` (default: ``records``) is where the
    calls of the results in ``records`` are looked up (a result's call may lie outside the part replaced)."""
    records = list(records)
    calls = call_index(context if context is not None else records)
    found = Identifiers()
    for rec in records:
        msg = rec.message
        if msg is None:
            continue
        prose = _prose(rec)
        if prose:
            for p in path_tokens(prose):
                found.add("path", p)
            for u in _urls(prose):
                found.add("url", u)
            for m in _BACKTICKED.finditer(prose):
                if _looks_like_symbol(m.group(1)):
                    found.add("symbol", m.group(1))
        for call in msg.tool_calls():
            for p in paths_of_call(call):
                found.add("path", p)
            cmd = command_of(call)
            if cmd is not None and len(cmd) <= MAX_COMMAND_CHARS:
                found.add("command", " ".join(cmd.split()))
            for s in all_strings(decode_args(call)):
                for u in _urls(s):
                    found.add("url", u)
                for m in _DECLARED.finditer(s):
                    found.add("symbol", m.group(1))
        for res in msg.tool_results():
            if res.synthetic:
                continue
            called = calls.get(res.call_id)
            if call_failed(called, res):
                line = error_line(output_text(res), max_lines=1)  # one line, as the output has it
                if line and not line.endswith("…"):  # a cut line is not a string anyone could match
                    found.add("error", line)
    return found


def squashed(text: str) -> str:
    """Whitespace runs as one space: how identifiers and the compacted context are compared."""
    return " ".join(text.split())

"""The fact store: what every summary is rendered from, kept in the state and merged at each compaction
(docs/concepts/summary.md#what-a-summary-keeps).

Each compaction sees only the records since the previous one. Instead of re-reading the previous summary's
text, the facts it was rendered from are kept (``Summary.facts`` in the state file) and merged with what the
new records say: :func:`merge` is a pure function of the old facts and the new ones, so a fact survives any
number of compactions by construction, and what leaves the store leaves by the drop rule below.

**The drop rule.** Each list has a cap (the state stays small however long the session runs). When a list
is over its cap, the oldest *finished* item goes first: a resolved error before an unresolved one, an earlier
request (a goal) before the first one (the task), the least recently touched file, the oldest command,
finding, decision, identifier, timeline step or subagent run. A user rule is never dropped, nor the latest
request.
Open todos are not capped by age: the latest todo list replaces the earlier one.

**Idempotent.** Facts read from records carry the input position of what they came from (``at``), and the
merge keys on it (or on the fact itself: a rule's text, a file's path, a command), so merging the same
records twice gives the same store as merging them once (a retried compaction adds nothing).

The JSON form (:meth:`Facts.to_json`, ``schemas/state.schema.json`` ``$defs.facts``) is what the state file
holds; :func:`Facts.from_json` reads every earlier version (version 1 had no ``at`` positions, no findings
and no identifiers) and drops anything malformed rather than trusting it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from .earlier import MAX_EARLIER_CHARS
from .outcomes import resolves

FACTS_VERSION = 2
# Caps on each list (the drop rule above).
MAX_GOALS = 30
MAX_FILES = 300
MAX_COMMANDS = 80
MAX_ERRORS = 40
MAX_TIMELINE = 80
MAX_FINDINGS = 30
MAX_DECISIONS = 40
MAX_IDENTIFIERS = 60
MAX_TODOS = 100
MAX_SUBAGENTS = 20
MAX_INSTRUCTIONS = 20


@dataclass(frozen=True, slots=True)
class FileFact:
    """A file a tool touched, with the tools that touched it (what was done to it) and when last."""

    path: str
    tools: tuple[str, ...] = ()
    at: int = -1  # input position of the last touch (-1: unknown, from an earlier version)
    changed: bool = False  # a call that changes files touched it (edited, written, patched)
    change: str | None = None  # what the last change did (facts.files.change_note)


@dataclass(frozen=True, slots=True)
class CommandFact:
    command: str
    ok: bool | None  # None: no result seen
    at: int = -1


@dataclass(frozen=True, slots=True)
class ErrorFact:
    tool: str
    command: str | None
    text: str  # the telling line(s)
    key: str  # what a later success must match to resolve it (facts.outcomes.call_key)
    resolved: bool = False
    at: int = -1


@dataclass(frozen=True, slots=True)
class TodoFact:
    content: str
    status: str = "pending"


@dataclass(frozen=True, slots=True)
class Entry:
    """A line of text read at an input position: a timeline step, a finding (the assistant's answer or
    conclusion), an identifier."""

    text: str
    at: int = -1


@dataclass(frozen=True, slots=True)
class SubagentError:
    text: str
    resolved: bool = False


@dataclass(frozen=True, slots=True)
class SubagentFact:
    task: str
    tool: str = "subagent"
    changed: tuple[str, ...] = ()
    errors: tuple[SubagentError, ...] = ()
    result: str | None = None
    at: int = -1


@dataclass(frozen=True, slots=True)
class Facts:
    """Everything a summary is rendered from. Lists are oldest first."""

    goals: tuple[str, ...] = ()  # the user's earlier requests (the latest one is ``latest_request``)
    rules: tuple[str, ...] = ()  # the user's rules, verbatim: never dropped
    files: tuple[FileFact, ...] = ()  # least recently touched first
    commands: tuple[CommandFact, ...] = ()
    errors: tuple[ErrorFact, ...] = ()
    todos: tuple[TodoFact, ...] = ()  # the latest todo list (open items and done ones)
    timeline: tuple[Entry, ...] = ()
    findings: tuple[Entry, ...] = ()  # the assistant's answers: its last text before each new request
    #: what the assistant stated in the middle of its work (facts.timeline.conclusions): decisions, findings
    decisions: tuple[Entry, ...] = ()
    identifiers: tuple[Entry, ...] = ()  # URLs and other names seen in tool output and the assistant's text
    instructions: tuple[str, ...] = ()  # instructions in force (a skill's, a slash command's), verbatim
    subagents: tuple[SubagentFact, ...] = ()
    last_action: str | None = None  # the last assistant message as it happened
    latest_request: str | None = None
    earlier: str | None = None  # the earlier summaries' text (facts.earlier), oldest first, capped

    def to_json(self) -> dict[str, Any]:
        """The plain-JSON form the state file keeps (``$defs.facts`` of the state schema)."""
        out: dict[str, Any] = {
            "version": FACTS_VERSION,
            "goals": list(self.goals),
            "rules": list(self.rules),
            "files": [{"path": f.path, "tools": list(f.tools), "changed": f.changed, "at": f.at,
                       **({"change": f.change} if f.change else {})} for f in self.files],
            "commands": [{"command": c.command, "ok": c.ok, "at": c.at} for c in self.commands],
            "errors": [{"tool": e.tool, "command": e.command, "text": e.text, "key": e.key,
                        "resolved": e.resolved, "at": e.at} for e in self.errors],
            "todos": [{"content": t.content, "status": t.status} for t in self.todos],
            "timeline": [{"text": e.text, "at": e.at} for e in self.timeline],
            "findings": [{"text": e.text, "at": e.at} for e in self.findings],
            "identifiers": [{"text": e.text, "at": e.at} for e in self.identifiers],
            "last_action": self.last_action,
            "latest_request": self.latest_request,
        }
        if self.decisions:  # the key only when there is something
            out["decisions"] = [{"text": e.text, "at": e.at} for e in self.decisions]
        if self.instructions:
            out["instructions"] = list(self.instructions)
        if self.earlier:  # the key only when there is something
            out["earlier"] = self.earlier
        if self.subagents:  # the key only when there is something
            out["subagents"] = [{"task": a.task, "tool": a.tool, "changed": list(a.changed),
                                 "errors": [{"text": e.text, "resolved": e.resolved} for e in a.errors],
                                 "result": a.result, "at": a.at} for a in self.subagents]
        return out

    @classmethod
    def from_json(cls, raw: Any) -> Facts:
        """Facts from the state, of any version, with every field checked: anything malformed is dropped,
        never trusted. ``None`` or a non-object gives empty facts."""
        if not isinstance(raw, dict):
            return cls()
        return cls(
            goals=tuple(_strs(raw.get("goals"))),
            rules=tuple(_strs(raw.get("rules"))),
            files=tuple(FileFact(f["path"], tuple(_strs(f.get("tools"))), _at(f), f.get("changed") is True,
                                 _str(f.get("change")))
                        for f in _dicts(raw.get("files")) if _str(f.get("path"))),
            commands=tuple(CommandFact(c["command"], c.get("ok") if isinstance(c.get("ok"), bool) else None,
                                       _at(c))
                           for c in _dicts(raw.get("commands")) if _str(c.get("command"))),
            errors=tuple(ErrorFact(_str(e.get("tool")) or "tool", _str(e.get("command")), e["text"],
                                   _str(e.get("key")) or e["text"], e.get("resolved") is True, _at(e))
                         for e in _dicts(raw.get("errors")) if _str(e.get("text"))),
            todos=tuple(TodoFact(t["content"], _str(t.get("status")) or "pending")
                        for t in _dicts(raw.get("todos")) if _str(t.get("content"))),
            timeline=_entries(raw.get("timeline")),
            findings=_entries(raw.get("findings")),
            decisions=_entries(raw.get("decisions")),
            identifiers=_entries(raw.get("identifiers")),
            instructions=tuple(_strs(raw.get("instructions"))),
            subagents=tuple(
                SubagentFact(a["task"], _str(a.get("tool")) or "subagent", tuple(_strs(a.get("changed"))),
                             tuple(SubagentError(e["text"], e.get("resolved") is True)
                                   for e in _dicts(a.get("errors")) if _str(e.get("text"))),
                             _str(a.get("result")), _at(a))
                for a in _dicts(raw.get("subagents")) if _str(a.get("task"))),
            last_action=_str(raw.get("last_action")),
            latest_request=_str(raw.get("latest_request")),
            earlier=_str(raw.get("earlier")),
        )


@dataclass(frozen=True, slots=True)
class NewFacts:
    """What a run's records say, before the merge: the facts, and what resolves the earlier errors."""

    facts: Facts
    todos_seen: bool = False  # the records (or --todos) hold a todo list: it replaces the earlier one
    success_keys: frozenset[str] = field(default_factory=frozenset)  # facts.outcomes.success_keys of them
    claimed_fixed: bool = False  # an assistant message says a problem is fixed


def merge(old: Facts, new: NewFacts) -> Facts:
    """The store after a compaction: ``old`` updated with ``new`` (the newer wins on conflict), each list
    capped by the drop rule (module docstring). Pure, and idempotent: ``merge(merge(a, n), n) ==
    merge(a, n)``."""
    n = new.facts
    latest = n.latest_request or old.latest_request
    goals = list(old.goals)
    have = set(goals)  # membership in a list is O(n) per goal: quadratic on a long session
    if old.latest_request and old.latest_request != latest and old.latest_request not in have:
        goals.append(old.latest_request)  # the earlier latest request is now one of the goals
        have.add(old.latest_request)
    goals += [g for g in dict.fromkeys(n.goals) if g not in have]
    goals = [g for g in goals if g != latest]
    if len(goals) > MAX_GOALS:  # the first request (the task) stays; the oldest of the others go
        goals = goals[:1] + goals[-(MAX_GOALS - 1):]

    had = set(old.rules)
    rules = [*old.rules, *(r for r in dict.fromkeys(n.rules) if r not in had)]  # never capped nor dropped
    had = set(old.instructions)
    instructions = [*old.instructions, *(i for i in dict.fromkeys(n.instructions) if i not in had)]

    errors: list[ErrorFact] = []
    keys = set(new.success_keys)
    # the records' own errors were resolved (or not) as they were read: the evidence resolves older ones
    own = {(e.key, e.text, e.at) for e in n.errors}
    for e in old.errors:
        earlier = (e.key, e.text, e.at) not in own
        if not e.resolved and earlier and (resolves(keys, e.key, e.tool) or new.claimed_fixed):
            e = replace(e, resolved=True)
        errors.append(e)
    errors = _by_key([*errors, *n.errors], lambda e: (e.key, e.text), _newer_error)

    return Facts(
        goals=tuple(goals),
        rules=tuple(rules),
        files=tuple(_by_key([*old.files, *n.files], lambda f: f.path, _union_tools)[-MAX_FILES:]),
        commands=tuple(_by_key([*old.commands, *n.commands], lambda c: c.command, _later)[-MAX_COMMANDS:]),
        errors=tuple(_cap_errors(errors)),
        todos=(n.todos if new.todos_seen else old.todos)[:MAX_TODOS],
        timeline=_entries_merged(old.timeline, n.timeline, MAX_TIMELINE),
        findings=_entries_merged(old.findings, n.findings, MAX_FINDINGS),
        decisions=_entries_merged(old.decisions, n.decisions, MAX_DECISIONS),
        identifiers=tuple(_by_key([*old.identifiers, *n.identifiers], lambda e: e.text,
                                  _later)[-MAX_IDENTIFIERS:]),
        instructions=tuple(instructions[-MAX_INSTRUCTIONS:]),
        subagents=tuple(_by_key([*old.subagents, *n.subagents], lambda a: (a.at, a.task),
                                _later)[-MAX_SUBAGENTS:]),
        last_action=n.last_action or old.last_action,
        latest_request=latest,
        earlier=_earlier_merged(old.earlier, n.earlier),
    )


def _earlier_merged(old: str | None, new: str | None) -> str | None:
    """The earlier summaries' text: the stored one, then the new one unless it is already there (idempotent),
    the newest ``MAX_EARLIER_CHARS`` kept."""
    if new and old and new in old:
        new = None
    text = "\n\n".join(t for t in (old, new) if t)
    return text[-MAX_EARLIER_CHARS:] if text else None


T = TypeVar("T")


def _by_key(items: Iterable[T], key: Callable[[T], Any], pick: Callable[[T, T], T]) -> list[T]:
    """One item per key (``pick(earlier, later)`` decides which), ordered by the position of the last
    occurrence of each key: a fact seen again moves to the end (most recent)."""
    found: dict[Any, T] = {}
    for item in items:
        k = key(item)
        old = found.pop(k, None)
        found[k] = item if old is None else pick(old, item)
    return sorted(found.values(), key=lambda x: getattr(x, "at", -1)) if _all_placed(found.values()) \
        else list(found.values())


def _all_placed(items: Iterable[Any]) -> bool:
    return all(getattr(x, "at", -1) >= 0 for x in items)


def _later(a: T, b: T) -> T:
    return b if getattr(b, "at", -1) >= getattr(a, "at", -1) else a


def _union_tools(a: FileFact, b: FileFact) -> FileFact:
    first, second = (a, b) if a.at <= b.at else (b, a)
    tools = list(first.tools) + [t for t in second.tools if t not in first.tools]
    return FileFact(a.path, tuple(tools), max(a.at, b.at), a.changed or b.changed,
                    second.change or first.change)


def _newer_error(a: ErrorFact, b: ErrorFact) -> ErrorFact:
    if a.at == b.at:  # the same failure read twice: resolved if either reading says so
        return replace(b, resolved=a.resolved or b.resolved)
    return _later(a, b)


def _cap_errors(errors: list[ErrorFact]) -> list[ErrorFact]:
    """At most MAX_ERRORS: resolved ones go first, oldest first; then the oldest unresolved."""
    drop = len(errors) - MAX_ERRORS
    if drop <= 0:
        return errors
    kept: list[ErrorFact] = []
    for e in errors:
        if drop and e.resolved:
            drop -= 1
            continue
        kept.append(e)
    return kept[drop:]


def _entries_merged(old: tuple[Entry, ...], new: tuple[Entry, ...], cap: int) -> tuple[Entry, ...]:
    """Entries of both, one per (position, text), in input order (entries of an earlier version, with no
    position, first); the oldest dropped over ``cap``."""
    seen: set[tuple[int, str]] = set()
    unplaced: list[Entry] = []
    placed: list[Entry] = []
    for e in [*old, *new]:
        if e.at < 0:
            unplaced.append(e)  # an earlier version's entry: kept in its order, before the placed ones
            continue
        if (e.at, e.text) not in seen:
            seen.add((e.at, e.text))
            placed.append(e)
    placed.sort(key=lambda e: e.at)
    return tuple([*unplaced, *placed][-cap:])


# ------------------------------------------------------------------------------------------- JSON helpers


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) and v.strip() else None


def _strs(v: Any) -> list[str]:
    return [x for x in v if _str(x)] if isinstance(v, list) else []


def _dicts(v: Any) -> list[dict[str, Any]]:
    return [x for x in v if isinstance(x, dict)] if isinstance(v, list) else []


def _at(d: dict[str, Any]) -> int:
    v = d.get("at")
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else -1


def _entries(v: Any) -> tuple[Entry, ...]:
    """Entries of any version: ``{"text", "at"}`` objects, or plain strings (version 1's timeline)."""
    if not isinstance(v, list):
        return ()
    out: list[Entry] = []
    for x in v:
        if isinstance(x, str) and x.strip():
            out.append(Entry(x))
        elif isinstance(x, dict) and _str(x.get("text")):
            out.append(Entry(x["text"], _at(x)))
    return tuple(out)

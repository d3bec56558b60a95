"""The offline, deterministic summarizer (docs/concepts/summary.md#llm-summarizers): a structured summary
built from the transcript itself.

Sections, in order, each only when it has something to say: Earlier summary (an LLM summary carried
forward), User goals and rules, Timeline, Files and commands, Subagents (what each subagent run did: the
files it changed, its errors, its result), Errors, Open todos, Last assistant action, Latest request.
Rules and the latest request are quoted verbatim: losing or paraphrasing the user's rules is the most common
complaint about compaction.

Anchored and incremental: the facts of each summary are returned in ``SummaryResult.facts`` (a JSON object
the state keeps) and merged with the facts of the next records, so rules, files, unresolved errors and todos
survive any number of compactions even though each run sees only the new records.

The text always fits ``budget_tokens`` by the chars/4 heuristic: parts are dropped in a fixed priority order
(timeline, commands, subagents, earlier summary, resolved errors, older errors, last action, older
goals, least recent files, todos, the newest error, the first goal); rules and the latest request go last,
by a hard cut that sets ``truncated``.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..facts import (
    SUMMARY_MARKER,
    commands_run,
    errors_seen,
    failure_checker,
    files_touched,
    is_open,
    last_assistant_action,
    latest_todo_list,
    resolution_evidence,
    resolves,
    shorten,
    timeline,
    user_requests,
    user_rules,
)
from ..facts.earlier import MAX_EARLIER_CHARS, carry_forward
from ..facts.subagents import subagent_runs
from ..facts.todos import Todo
from .base import Summarizer, SummaryRequest, SummaryResult, fit_summary

FACTS_VERSION = 1
#: the second line of every extractive summary (tells it apart from an LLM's text carried forward)
EXTRACTED_NOTE = ("Extracted from the transcript by ctxcompact; rules and the latest request are quoted "
                  "verbatim.")
# Caps on what the facts keep, so the state stays small however long the session runs.
MAX_GOALS = 30
MAX_RULES = 200
MAX_FILES = 300
MAX_COMMANDS = 60
MAX_ERRORS = 40
MAX_TIMELINE = 80
MAX_TODOS = 100
MAX_SUBAGENTS = 20
MAX_SUBAGENT_PATHS = 6
# Per-entry lengths in the rendered text.
STORED_GOAL_CHARS = 2000
GOAL_CHARS = 400
FIRST_GOAL_CHARS = 800
ERROR_CHARS = 240
COMMAND_CHARS = 200
PATH_CHARS = 200
TODO_CHARS = 300
TIMELINE_CHARS = 160
ACTION_CHARS = 500


def heuristic_tokens(text: str) -> int:
    """ceil(chars / 4): the estimate the budget is measured with."""
    return math.ceil(len(text) / 4)


# --------------------------------------------------------------------------------------------------------
# Facts: extraction and merging (plain JSON values so they can live in the state file)


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) and v.strip() else None


def _str_list(v: Any) -> list[str]:
    return [x for x in v if _str(x)] if isinstance(v, list) else []


def _dicts(v: Any) -> list[dict[str, Any]]:
    return [x for x in v if isinstance(x, dict)] if isinstance(v, list) else []


def empty_facts() -> dict[str, Any]:
    return {"version": FACTS_VERSION, "goals": [], "rules": [], "files": [], "commands": [], "errors": [],
            "todos": [], "timeline": [], "last_action": None, "latest_request": None}


def normalize_facts(raw: Any) -> dict[str, Any]:
    """Facts from the state, with every field checked: anything malformed is dropped, never trusted."""
    facts = empty_facts()
    if not isinstance(raw, dict):
        return facts
    facts["goals"] = _str_list(raw.get("goals"))
    facts["rules"] = _str_list(raw.get("rules"))
    facts["timeline"] = _str_list(raw.get("timeline"))
    facts["files"] = [{"path": f["path"], "tools": _str_list(f.get("tools"))}
                      for f in _dicts(raw.get("files")) if _str(f.get("path"))]
    facts["commands"] = [{"command": c["command"],
                          "ok": c.get("ok") if isinstance(c.get("ok"), bool) else None}
                         for c in _dicts(raw.get("commands")) if _str(c.get("command"))]
    facts["errors"] = [{"tool": _str(e.get("tool")) or "tool", "command": _str(e.get("command")),
                        "text": e["text"], "key": _str(e.get("key")) or e["text"],
                        "resolved": e.get("resolved") is True}
                       for e in _dicts(raw.get("errors")) if _str(e.get("text"))]
    facts["todos"] = [{"content": t["content"], "status": _str(t.get("status")) or "pending"}
                      for t in _dicts(raw.get("todos")) if _str(t.get("content"))]
    facts["last_action"] = _str(raw.get("last_action"))
    facts["latest_request"] = _str(raw.get("latest_request"))
    subagents = [{"task": a["task"], "tool": _str(a.get("tool")) or "subagent",
                           "changed": _str_list(a.get("changed")),
                           "errors": [{"text": e["text"], "resolved": e.get("resolved") is True}
                                      for e in _dicts(a.get("errors")) if _str(e.get("text"))],
                           "result": _str(a.get("result"))}
                          for a in _dicts(raw.get("subagents")) if _str(a.get("task"))]
    if subagents:  # the key only when there is something: facts without subagents stay as they were
        facts["subagents"] = subagents
    return facts


@dataclass(slots=True)
class _New:
    """What the new records say, before merging with the prior facts."""

    goals: list[str]
    rules: list[str]
    files: list[dict[str, Any]]
    commands: list[dict[str, Any]]
    errors: list[dict[str, Any]]
    todos: list[dict[str, Any]] | None  # None: the records hold no todo list
    timeline: list[str]
    last_action: str | None
    latest: str | None
    subagents: list[dict[str, Any]] = field(default_factory=list)
    success_keys: set[str] = field(default_factory=set)
    claimed_fixed: bool = False


def extract_facts(request: SummaryRequest) -> dict[str, Any]:
    """The facts of ``request``: the prior facts (from the state) merged with what its records say. The one
    extraction behind the extractive summary and the check of an LLM summary (``summarizers.check``)."""
    merged = merge_facts(normalize_facts(request.prior_facts), _extract(request))
    # the handoff's part (docs/concepts/handoff.md): earlier summaries and instructions in force, carried
    merged.update(carry_forward(request.prior_facts, request.records, request.prior_summary))
    return merged


def _extract(request: SummaryRequest) -> _New:
    records = request.records
    typed = [t for _, t in user_requests(records)]
    latest = request.latest_request or (typed[-1] if typed else None)
    goals = [_goal_text(t) for t in typed if t != latest]
    files = [{"path": f.path, "tools": list(f.tools)}
             for f in sorted(files_touched(records), key=lambda f: f.last_index)]
    failed = failure_checker()  # four passes below look at the same results
    commands = [{"command": c.command, "ok": c.ok} for c in commands_run(records, failed)]
    errors = [{"tool": e.tool, "command": e.command, "text": e.text, "key": e.key, "resolved": e.resolved}
              for e in errors_seen(records, failed)]
    todos: list[dict[str, Any]] | None
    if request.todos:
        todos = [{"content": t.content, "status": t.status} for t in request.todos if is_open(t)]
    else:
        found = latest_todo_list(records)
        todos = None if found is None else [{"content": t.content, "status": t.status}
                                            for t in found if is_open(t)]
    action = last_assistant_action(records, ACTION_CHARS)
    keys, claimed = resolution_evidence(records, failed)
    subagents = []
    for run in subagent_runs(records):  # what subagents did: their files join the list, marked as theirs
        subagents.append({"task": run.task, "tool": run.tool, "changed": run.changed,
                          "errors": [{"text": e.text, "resolved": e.resolved} for e in run.errors],
                          "result": run.result})
        for p in run.changed:
            files.append({"path": p, "tools": [f"{run.tool} subagent"]})
    return _New(goals, user_rules(records), files, commands, errors, todos,
                timeline(records, TIMELINE_CHARS, failed),
                action.render() if action else None, latest, subagents, keys, claimed)


_FENCE = re.compile(r"```.*?(?:```|\Z)", re.S)


def _goal_text(text: str) -> str:
    """A request as a goal: pasted code blocks and logs replaced by a marker, length capped."""
    return shorten(_FENCE.sub(" [code block] ", text), STORED_GOAL_CHARS)


def _dedupe_last(items: list[dict[str, Any]], key: Callable[[dict[str, Any]], Any]) -> list[dict[str, Any]]:
    """Keep the last occurrence of each key, in the order of those last occurrences."""
    last: dict[Any, int] = {}
    for i, item in enumerate(items):
        last[key(item)] = i
    return [item for i, item in enumerate(items) if last[key(item)] == i]


def merge_facts(prior: dict[str, Any], new: _New) -> dict[str, Any]:
    """The prior facts updated with the new records' (the newer wins on conflict; lists are capped)."""
    goals = list(prior["goals"])
    if prior["latest_request"] and prior["latest_request"] != new.latest:
        goals.append(prior["latest_request"])  # the earlier latest request is now one of the goals
    have = set(goals)  # membership in the list is O(n) per goal: quadratic on a long session
    for g in new.goals:
        if g not in have:
            have.add(g)
            goals.append(g)
    goals = [g for g in goals if g != new.latest]
    if len(goals) > MAX_GOALS:  # keep the first request (the task) and the most recent ones
        goals = goals[:1] + goals[-(MAX_GOALS - 1):]

    rules = list(prior["rules"])
    had = set(rules)
    rules += [r for r in dict.fromkeys(new.rules) if r not in had]
    rules = rules[-MAX_RULES:]

    files: dict[str, dict[str, Any]] = {}
    for f in [*prior["files"], *new.files]:  # least recent first: a file touched again moves to the end
        old = files.pop(f["path"], None)
        tools = list(old["tools"]) if old else []
        tools += [t for t in f["tools"] if t not in tools]
        files[f["path"]] = {"path": f["path"], "tools": tools}
    file_list = list(files.values())[-MAX_FILES:]

    commands = _dedupe_last([*prior["commands"], *new.commands], lambda c: c["command"])[-MAX_COMMANDS:]

    old_errors = []
    for e in prior["errors"]:
        e = dict(e)
        if not e["resolved"] and (resolves(new.success_keys, e["key"], e["tool"]) or new.claimed_fixed):
            e["resolved"] = True
        old_errors.append(e)
    errors = _dedupe_last([*old_errors, *new.errors], lambda e: (e["key"], e["text"]))
    if len(errors) > MAX_ERRORS:  # drop resolved ones first, oldest first
        drop = len(errors) - MAX_ERRORS
        kept: list[dict[str, Any]] = []
        for e in errors:
            if drop and e["resolved"]:
                drop -= 1
                continue
            kept.append(e)
        errors = kept[drop:]

    todos = prior["todos"] if new.todos is None else new.todos
    merged = {
        "version": FACTS_VERSION,
        "goals": goals,
        "rules": rules,
        "files": file_list,
        "commands": commands,
        "errors": errors,
        "todos": todos[:MAX_TODOS],
        "timeline": [*prior["timeline"], *new.timeline][-MAX_TIMELINE:],
        "last_action": new.last_action or prior["last_action"],
        "latest_request": new.latest or prior["latest_request"],
    }
    subagents = [*prior.get("subagents", []), *new.subagents][-MAX_SUBAGENTS:]
    if subagents:
        merged["subagents"] = subagents
    return merged


# --------------------------------------------------------------------------------------------------------
# Rendering within the budget


@dataclass(slots=True)
class _Doc:
    """What is rendered; the shrink steps remove from it."""

    earlier: str | None
    goals: list[str]
    rules: list[str]
    timeline: list[str]
    timeline_omitted: int
    files: list[dict[str, Any]]  # most recent first
    commands: list[dict[str, Any]]
    errors: list[dict[str, Any]]
    todos: list[dict[str, Any]]
    last_action: str | None
    latest: str | None
    subagents: list[dict[str, Any]] = field(default_factory=list)
    instructions: list[str] = field(default_factory=list)
    short_goals: bool = False  # the user's requests cut to GOAL_CHARS (FIRST_GOAL_CHARS for the first)


def _render(doc: _Doc) -> str:
    out = [SUMMARY_MARKER, EXTRACTED_NOTE]

    def section(title: str, lines: list[str]) -> None:
        if lines:
            out.append("")
            out.append(f"## {title}")
            out.extend(lines)

    if doc.earlier:
        section("Earlier summary", [_quoted(doc.earlier)])
    goal_lines: list[str] = []
    if doc.goals:
        goal_lines.append("Goals (the user's requests, oldest first):")
        # the user's own words whole while they fit; cut to a fixed length only when the budget asks
        caps = (FIRST_GOAL_CHARS, GOAL_CHARS) if doc.short_goals else (STORED_GOAL_CHARS, STORED_GOAL_CHARS)
        goal_lines += [f"- {shorten(g, caps[0] if i == 0 else caps[1])}" for i, g in enumerate(doc.goals)]
    if doc.rules:
        goal_lines.append("Rules and constraints (verbatim):")
        goal_lines += [f"- {r}" for r in doc.rules]
    section("User goals and rules", goal_lines)
    section("Instructions in force (from an active skill or command; not typed by the user)",
            [_quoted(t) for t in doc.instructions])
    tl = [f"- {shorten(t, TIMELINE_CHARS)}" for t in doc.timeline]
    if tl and doc.timeline_omitted:
        tl.insert(0, f"({doc.timeline_omitted} earlier steps omitted)")
    section("Timeline", tl)
    fc: list[str] = []
    if doc.files:
        fc.append("Files (most recent first):")
        fc += [f"- {shorten(f['path'], PATH_CHARS)}" + (f" ({', '.join(f['tools'])})" if f["tools"] else "")
               for f in doc.files]
    if doc.commands:
        fc.append("Commands:")
        status = {True: "ok", False: "failed", None: "no result"}
        fc += [f"- `{shorten(c['command'], COMMAND_CHARS)}` → {status[c['ok']]}" for c in doc.commands]
    section("Files and commands", fc)
    section("Subagents", [_subagent_line(a) for a in doc.subagents])
    errs = []
    for e in doc.errors:
        where = f"`{shorten(e['command'], 80)}`" if e["command"] else e["tool"]
        state = "resolved" if e["resolved"] else "UNRESOLVED"
        errs.append(f"- [{state}] {where}: {shorten(e['text'], ERROR_CHARS)}")
    section("Errors", errs)
    section("Open todos", [f"- [{t['status']}] {shorten(t['content'], TODO_CHARS)}" for t in doc.todos])
    section("Last assistant action", [doc.last_action] if doc.last_action else [])
    section("Latest request", [doc.latest] if doc.latest else [])
    return "\n".join(out) + "\n"


def _quoted(text: str) -> str:
    """A text kept verbatim as a quotation: each line behind "> ", so its own headings never read as the
    summary's sections."""
    return "\n".join(f"> {line}" if line.strip() else ">" for line in text.strip().split("\n"))


def _subagent_line(a: dict[str, Any]) -> str:
    """One subagent run: what it was asked, the files it changed, its unresolved errors, its result."""
    parts = [f"- {a['tool']} \"{shorten(a['task'], 120)}\""]
    if a["changed"]:
        more = len(a["changed"]) - MAX_SUBAGENT_PATHS
        shown = ", ".join(shorten(p, PATH_CHARS) for p in a["changed"][:MAX_SUBAGENT_PATHS])
        parts.append(f"changed {shown}" + (f" (+{more} more)" if more > 0 else ""))
    open_errors = [e["text"] for e in a["errors"] if not e["resolved"]]
    if open_errors:
        parts.append(f"{len(open_errors)} unresolved error(s), last: {shorten(open_errors[-1], 160)}")
    elif a["errors"]:
        parts.append(f"{len(a['errors'])} error(s), all resolved")
    if a["result"]:
        parts.append(f"result: {shorten(a['result'], 240)}")
    return "; ".join(parts)


def _fits(doc: _Doc, budget: int) -> bool:
    return heuristic_tokens(_render(doc)) <= budget


def _drop_front(doc: _Doc, budget: int, get: Callable[[], list[Any]],
                put: Callable[[list[Any]], None]) -> None:
    """Drop the fewest leading items of a list that make the doc fit (all of them if none does)."""
    items = list(get())
    put([])
    if not _fits(doc, budget):
        return  # even with the list empty it does not fit: the next step goes on shrinking
    lo, hi = 0, len(items)  # fewest dropped; fitting is monotonic in the number dropped
    while lo < hi:
        mid = (lo + hi) // 2
        put(items[mid:])
        if _fits(doc, budget):
            hi = mid
        else:
            lo = mid + 1
    put(items[lo:])


def _cut_text(doc: _Doc, budget: int, get: Callable[[], str | None],
              put: Callable[[str | None], None]) -> None:
    """Shorten one text field until the doc fits (dropping it if it must)."""
    text = get()
    if not text:
        return
    put(None)
    if not _fits(doc, budget):
        return
    lo, hi = 0, len(text)  # longest prefix that fits
    while lo < hi:
        mid = (lo + hi + 1) // 2
        put(text[:mid].rstrip() + "…")
        if _fits(doc, budget):
            lo = mid
        else:
            hi = mid - 1
    put(text[:lo].rstrip() + "…" if lo >= 40 else None)  # a stub under 40 chars says nothing


_EARLIER_CUT = "\n[… part of the earlier summary left out to fit the budget …]\n"


def _cut_middle(doc: _Doc, budget: int) -> None:
    """Shorten the earlier summary from its middle until the doc fits: its head (the task, the user's
    requests) and its end (the current work, the next step) matter most."""
    text = doc.earlier
    if not text:
        return
    doc.earlier = None
    if not _fits(doc, budget):
        return

    def cut(k: int) -> str:
        head = (2 * k) // 3
        return text[:head].rstrip() + _EARLIER_CUT + text[len(text) - (k - head):].lstrip()

    lo, hi = 0, len(text)  # most characters kept that fit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        doc.earlier = cut(mid)
        if _fits(doc, budget):
            lo = mid
        else:
            hi = mid - 1
    doc.earlier = cut(lo) if lo >= 80 else None


def _shrink(doc: _Doc, budget: int) -> None:
    def set_(name: str) -> Callable[[Any], None]:
        return lambda v: setattr(doc, name, v)

    total_timeline = len(doc.timeline) + doc.timeline_omitted

    def put_timeline(kept: list[Any]) -> None:
        doc.timeline = kept
        doc.timeline_omitted = total_timeline - len(kept)

    def put_older_errors(kept: list[Any]) -> None:
        doc.errors = kept + doc.errors[-1:]

    def put_later_goals(kept: list[Any]) -> None:
        doc.goals = doc.goals[:1] + kept

    steps: list[Callable[[], None]] = [
        lambda: _drop_front(doc, budget, lambda: doc.timeline, put_timeline),
        lambda: _drop_front(doc, budget, lambda: doc.commands, set_("commands")),
        lambda: _drop_front(doc, budget, lambda: doc.subagents, set_("subagents")),
        lambda: setattr(doc, "short_goals", True),
        lambda: _drop_resolved(doc, budget),
        lambda: _drop_front(doc, budget, lambda: doc.errors[:-1], put_older_errors),
        lambda: _cut_text(doc, budget, lambda: doc.last_action, set_("last_action")),
        # older goals before the first one (the task itself)
        lambda: _drop_front(doc, budget, lambda: doc.goals[1:], put_later_goals),
        lambda: _drop_tail(doc, budget, "files"),
        lambda: _drop_tail(doc, budget, "todos"),
        lambda: _drop_front(doc, budget, lambda: doc.errors, set_("errors")),
        lambda: _drop_front(doc, budget, lambda: doc.goals, set_("goals")),
        # the earlier summary and the instructions in force go after everything else read from the records:
        # an earlier summary stands for all that came before it (docs/concepts/handoff.md)
        lambda: _drop_front(doc, budget, lambda: doc.instructions, set_("instructions")),
        lambda: _cut_middle(doc, budget),
    ]
    for step in steps:
        if _fits(doc, budget):
            return
        step()


def _drop_resolved(doc: _Doc, budget: int) -> None:
    """Drop resolved errors, oldest first, only as many as needed."""
    errors = list(doc.errors)
    resolved = [i for i, e in enumerate(errors) if e["resolved"]]

    def without(k: int) -> list[dict[str, Any]]:
        gone = set(resolved[:k])
        return [e for i, e in enumerate(errors) if i not in gone]

    doc.errors = without(len(resolved))
    if not _fits(doc, budget):
        return
    lo, hi = 0, len(resolved)
    while lo < hi:
        mid = (lo + hi) // 2
        doc.errors = without(mid)
        if _fits(doc, budget):
            hi = mid
        else:
            lo = mid + 1
    doc.errors = without(lo)


def _drop_tail(doc: _Doc, budget: int, name: str) -> None:
    items: list[Any] = list(getattr(doc, name))
    lo, hi = 0, len(items)  # largest count kept from the head that fits
    setattr(doc, name, [])
    if not _fits(doc, budget):
        return
    while lo < hi:
        mid = (lo + hi + 1) // 2
        setattr(doc, name, items[:mid])
        if _fits(doc, budget):
            lo = mid
        else:
            hi = mid - 1
    setattr(doc, name, items[:lo])


def render_facts(facts: dict[str, Any], budget_tokens: int, earlier: str | None = None) -> tuple[str, bool]:
    """The summary text of ``facts`` within ``budget_tokens`` (chars/4), and whether it was cut hard."""
    doc = _Doc(
        earlier=earlier,
        goals=list(facts["goals"]),
        rules=list(facts["rules"]),
        timeline=list(facts["timeline"]),
        timeline_omitted=0,
        files=list(reversed(facts["files"])),
        commands=list(facts["commands"]),
        errors=[dict(e) for e in facts["errors"]],
        todos=list(facts["todos"]),
        last_action=facts["last_action"],
        latest=facts["latest_request"],
        subagents=list(facts.get("subagents", [])),
        instructions=list(facts.get("instructions", [])),
    )
    budget = max(0, budget_tokens)
    _shrink(doc, budget)
    text = _render(doc)
    if heuristic_tokens(text) <= budget:
        return text, False
    # Last resort: only the marker, rules and latest request are left; keep the head.
    return fit_summary(text, budget)


class ExtractiveSummarizer(Summarizer):
    """Offline and deterministic: the same request always gives the same text."""

    name = "extractive"

    def __init__(self, **options: Any) -> None:
        # Options meant for LLM summarizers (model, base_url, …) do not apply; accepted so callers can pass
        # one option set to whichever summarizer they build.
        self.options = options

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        start = time.monotonic()
        earlier = None
        if request.prior_summary and request.prior_summary.strip():
            # an LLM's summary is carried forward as text (its facts are merged too); an extractive
            # summary is not, its facts say everything it said
            body = _strip_marker(request.prior_summary)
            if request.prior_facts is None or (body and not body.startswith(EXTRACTED_NOTE)):
                earlier = body
        facts = extract_facts(request)
        # earlier summaries (kept by an earlier compaction, found in the records, an LLM's prior summary) are
        # kept in the facts too, so every later compaction carries them (docs/concepts/handoff.md)
        carried = "\n\n".join(t for t in (facts.get("earlier"), earlier) if t)
        if carried:
            facts["earlier"] = carried[-MAX_EARLIER_CHARS:]
        text, truncated = render_facts(facts, request.budget_tokens, facts.get("earlier"))
        return SummaryResult(text=text, summarizer=self.name, facts=facts, truncated=truncated,
                             duration_s=time.monotonic() - start)


def _strip_marker(text: str) -> str | None:
    lines = text.strip().splitlines()
    if lines and lines[0].strip() == SUMMARY_MARKER:
        lines = lines[1:]
    body = "\n".join(lines).strip()
    return body or None


def todos_of(facts: dict[str, Any]) -> list[Todo]:
    """The open todos the facts carry (for callers that build a continuation from them)."""
    return [Todo(t["content"], t["status"]) for t in normalize_facts(facts)["todos"]]

"""The extractive summary's text: the fact store (:class:`~ctxcompact.facts.store.Facts`) rendered within its
budget as the window counts (docs/concepts/summary.md#the-budget).

Sections, in reading order, each only when it has something to say: Earlier summary (every earlier summary
carried forward, quoted: a client's own, an LLM's, ours in a rewritten history), User goals and rules,
Findings and answers, Decisions along the way, Open todos, Errors, Files and commands, Identifiers,
Subagents, Timeline, Last assistant action, Latest request.

What a continuing agent needs most goes last when the budget is short: the parts are dropped in a fixed
order (:data:`DROP_ORDER`, oldest first within each): the timeline's tool steps, the read-only commands' line,
the done todos, commands, subagents, what each file's last change did, the rest of the timeline, the
decisions along the way beyond 240 characters, the instructions in force beyond a third of the budget
(their head is kept), findings and goals shortened, the decisions along the way, older findings, resolved
errors, older errors, identifiers, the last action, the tools named beside each file, older goals, least
recent files, todos, the newest finding, the newest error, the first goal, the instructions in force, the
long form of the note under the marker, and last the earlier summary, cut from its middle (it stands for
everything before it; under 600 characters only its end is kept: where the work stands, the next step).
The rules and the latest request are never dropped; a hard cut (``truncated``) is the last resort.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from ..facts.calls import quoted_spans
from ..facts.outcomes import is_inspection
from ..facts.store import CommandFact, Entry, ErrorFact, Facts, FileFact, SubagentFact, TodoFact
from ..facts.text import SUMMARY_MARKER, shorten
from ..facts.todos import Todo, is_open
from .base import chars_cost, fit_summary

#: the second line of every extractive summary (tells it apart from an LLM's text carried forward)
EXTRACTED_NOTE = ("Extracted from the transcript by ctxcompact; rules and the latest request are quoted "
                  "verbatim.")
#: the same note when the whole budget is a few dozen tokens (its long form alone took half of a 42-token one)
EXTRACTED_NOTE_SHORT = "Extracted by ctxcompact."
#: an earlier summary shortened to fewer characters than this keeps only its end (the current work and the
#: next step), not a head of preamble ("Analysis: Let me analyze the conversation…") and a stub of its end
EARLIER_END_ONLY_CHARS = 600
GOAL_CHARS = 400
FIRST_GOAL_CHARS = 800
FIRST_GOAL_SHORT = 240  # what the first goal is shortened to before files and todos go
ERROR_CHARS = 240
COMMAND_CHARS = 200
PATH_CHARS = 200
TODO_CHARS = 300
TIMELINE_CHARS = 160
FINDING_CHARS = 4000  # an answer is shown whole up to this
OLDER_FINDING_CHARS = 600  # what an older answer is shortened to before it is dropped
NEWEST_FINDING_SHORT = 1200  # what the newest answer is shortened to before files and todos go
DECISION_CHARS = 600  # a decision stated along the way is shown up to this
DECISION_SHORT = 240  # what the decisions are shortened to before the older ones go
MAX_SUBAGENT_PATHS = 6
#: a latest request longer than this is quoted in the continuation only, and named here (when it is there)
LONG_LATEST_CHARS = 2000
# An earlier summary stands for all that came before it: it goes last, cut from its middle
# (docs/concepts/handoff.md).
DROP_ORDER = ("timeline's tool steps", "read-only commands", "done todos", "commands", "subagents",
              "what the last change of each file did", "timeline",
              "decisions along the way beyond 240 characters",
              "instructions in force beyond a third of the budget",
              "older findings beyond 600 characters", "goals beyond 400 characters",
              "newest finding beyond 1,200 characters", "decisions along the way", "older findings",
              "resolved errors", "older errors", "identifiers", "last action",
              "the tools named beside each file", "older goals", "first goal beyond 240 characters",
              "files", "todos",
              "newest finding", "newest error", "first goal", "instructions in force",
              "the long form of the extracted note", "earlier summary (from its middle; only its end under "
              "600 characters)")


@dataclass(slots=True)
class _Doc:
    """What is rendered; the shrink steps remove from it."""

    earlier: str | None
    goals: list[str]
    rules: list[str]
    instructions: list[str]
    findings: list[str]
    decisions: list[str]  # what the assistant stated along the way, oldest first
    todos: list[TodoFact]  # the open ones
    done: list[TodoFact]  # the latest list's finished items: one line, dropped early
    errors: list[ErrorFact]
    files: list[FileFact]  # most recent first
    commands: list[list[CommandFact]]  # groups of similar commands, oldest group first
    inspections: dict[str, int]  # read-only commands that worked, by program: one line
    identifiers: list[str]
    file_changes: bool  # each changed file says what its last change did
    file_tools: bool  # each file names the tools that touched it
    subagents: list[SubagentFact]
    timeline: list[str]
    timeline_omitted: int
    last_action: str | None
    latest: str | None
    latest_note: bool = False  # the latest request is named, not quoted (it is quoted after the summary)
    short_note: bool = False  # the budget is tiny: the short form of the extracted note
    extra: dict[str, Any] = field(default_factory=dict)


_SHAPE_NUMBER = re.compile(r"\d+")


def command_shape(command: str) -> str:
    """What near-identical commands share: the command with its numbers, and its quoted text or data
    arguments, blanked (``curl -s localhost:8080/items/1`` and ``…/items/2`` have one shape; ``cat 'a.md'``
    and ``cat 'b.md'`` do not)."""
    flat = " ".join(command.split())
    parts: list[str] = []
    pos = 0
    for start, end in quoted_spans(flat):
        quoted = flat[start:end]
        if " " in quoted or any(c in quoted for c in "{[=:"):  # text or data, not a name
            parts += [flat[pos:start], "''"]
            pos = end
    parts.append(flat[pos:])
    return _SHAPE_NUMBER.sub("#", "".join(parts))


def group_commands(commands: tuple[CommandFact, ...] | list[CommandFact]) -> list[list[CommandFact]]:
    """Commands grouped by :func:`command_shape`, each group where its latest run is, oldest first."""
    groups: dict[str, list[CommandFact]] = {}
    for c in commands:
        shape = command_shape(c.command)
        group = groups.pop(shape, [])
        group.append(c)
        groups[shape] = group
    return list(groups.values())


def _indent(text: str) -> str:
    """A multi-line text as one list item: its later lines indented (a "## " inside stays no heading)."""
    lines = [ln.rstrip() for ln in text.strip().splitlines()]
    lines = [ln for i, ln in enumerate(lines) if ln or (i and lines[i - 1])]  # no runs of blank lines
    return "\n".join([lines[0], *("  " + ln if ln else "" for ln in lines[1:])]) if lines else ""


_EARLIER_CUT = "\n[… part of the earlier summary left out to fit the budget …]\n"


def _quoted(text: str) -> str:
    """A text kept verbatim as a quotation: each line behind "> ", so its own headings never read as the
    summary's sections."""
    return "\n".join(f"> {line}" if line.strip() else ">" for line in text.strip().split("\n"))


def _cap(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def render(doc: _Doc) -> str:
    out = [SUMMARY_MARKER, EXTRACTED_NOTE_SHORT if doc.short_note else EXTRACTED_NOTE]

    def section(title: str, lines: list[str]) -> None:
        if lines:
            out.extend(["", f"## {title}", *lines])

    if doc.earlier:
        section("Earlier summary", [_quoted(doc.earlier)])
    gl: list[str] = []
    if doc.goals:
        gl.append("Goals (the user's requests, oldest first):")
        gl += [f"- {_indent(g)}" for g in doc.goals]
    if doc.rules:
        gl.append("Rules and constraints (verbatim):")
        gl += [f"- {r}" for r in doc.rules]
    section("User goals and rules", gl)
    section("Instructions in force (from an active skill or command; not typed by the user)",
            [_quoted(i) for i in doc.instructions])
    section("Findings and answers", [f"- {_indent(f)}" for f in doc.findings])
    section("Decisions along the way (stated during the work, oldest first)",
            [f"- {_indent(t)}" for t in doc.decisions])
    tl_ = [f"- [{t.status}] {shorten(t.content, TODO_CHARS)}" for t in doc.todos]
    if doc.done:
        tl_.append("Done: " + "; ".join(shorten(t.content, TODO_CHARS) for t in doc.done))
    section("Open todos" if doc.todos or not doc.done else "Todos", tl_)
    errs = []
    for e in doc.errors:
        where = f"`{shorten(e.command, 80)}`" if e.command else e.tool
        status = "resolved" if e.resolved else "UNRESOLVED"
        errs.append(f"- [{status}] {where}: {shorten(e.text, ERROR_CHARS)}")
    section("Errors", errs)
    fc: list[str] = []
    if doc.files:
        fc.append("Files (changed first; most recent first):")
        fc += [f"- {shorten(f.path, PATH_CHARS)}"
               + (f" ({', '.join(f.tools)})" if f.tools and doc.file_tools else "")
               + (f"; last change: {f.change}" if f.change and doc.file_changes else "") for f in doc.files]
    if doc.commands or doc.inspections:
        fc.append("Commands (similar runs collapsed):")
        fc += [_command_line(g) for g in doc.commands]
    if doc.inspections:
        n = sum(doc.inspections.values())
        top = sorted(doc.inspections.items(), key=lambda kv: (-kv[1], kv[0]))
        fc.append(f"- and {n} read-only command{'s' if n > 1 else ''} that worked ("
                  + ", ".join(f"{p} ×{k}" if k > 1 else p for p, k in top[:8])
                  + (", …" if len(top) > 8 else "") + ")")
    section("Files and commands", fc)
    if doc.identifiers:
        section("Identifiers", ["Seen in tool output and answers: " + ", ".join(doc.identifiers)])
    section("Subagents", [_subagent_line(a) for a in doc.subagents])
    tl = [f"- {t}" for t in doc.timeline]
    if tl and doc.timeline_omitted:
        tl.insert(0, f"({doc.timeline_omitted} steps omitted)")
    section("Timeline", tl)
    section("Last assistant action", [doc.last_action] if doc.last_action else [])
    if doc.latest:
        if doc.latest_note:
            section("Latest request", [f"{shorten(doc.latest, 300)} (quoted in full in the message after "
                                       "this summary)"])
        else:
            section("Latest request", [doc.latest])
    return "\n".join(out) + "\n"


_STATUS = {True: "ok", False: "failed", None: "no result"}


def _command_line(group: list[CommandFact]) -> str:
    last = group[-1]
    line = f"- `{shorten(last.command, COMMAND_CHARS)}` → {_STATUS[last.ok]}"
    if len(group) > 1:
        failed = sum(1 for c in group if c.ok is False)
        line += f" (and {len(group) - 1} similar run{'s' if len(group) > 2 else ''} before"
        line += f", {failed} failed)" if failed else ")"
    return line


def _subagent_line(a: SubagentFact) -> str:
    """One subagent run: what it was asked, the files it changed, its unresolved errors, its result."""
    parts = [f"- {a.tool} \"{shorten(a.task, 120)}\""]
    if a.changed:
        more = len(a.changed) - MAX_SUBAGENT_PATHS
        shown = ", ".join(shorten(p, PATH_CHARS) for p in a.changed[:MAX_SUBAGENT_PATHS])
        parts.append(f"changed {shown}" + (f" (+{more} more)" if more > 0 else ""))
    open_errors = [e.text for e in a.errors if not e.resolved]
    if open_errors:
        parts.append(f"{len(open_errors)} unresolved error(s), last: {shorten(open_errors[-1], 160)}")
    elif a.errors:
        parts.append(f"{len(a.errors)} error(s), all resolved")
    if a.result:
        parts.append(f"result: {shorten(a.result, 240)}")
    return "; ".join(parts)


def _timeline(entries: tuple[Entry, ...], latest: str | None, answered: set[int]) -> list[str]:
    """The timeline's lines: the latest request and the answers (``answered``: their positions) left out,
    since their own sections quote them; runs of similar steps (the same command shape) collapsed into one
    line with a count."""
    skip = shorten("User: " + latest, TIMELINE_CHARS) if latest else None
    out: list[str] = []
    shapes: list[str] = []
    counts: list[int] = []
    for e in entries:
        if e.text == skip or (e.at in answered and e.text.startswith("Assistant: ")):
            continue
        shape = command_shape(e.text)
        if out and shape == shapes[-1] and e.text.startswith("Ran "):
            out[-1], counts[-1] = shorten(e.text, TIMELINE_CHARS), counts[-1] + 1
            continue
        out.append(shorten(e.text, TIMELINE_CHARS))
        shapes.append(shape)
        counts.append(1)
    return [t if n == 1 else f"{t} (×{n}, similar)" for t, n in zip(out, counts, strict=True)]


def _without_rules(goal: str, rules: tuple[str, ...]) -> str:
    """A goal without the rules it states (they are quoted verbatim under the rules): each said once. A goal
    that was only rules is "" (left out)."""
    found = [rule for rule in rules if rule in goal]
    if not found:
        return goal
    for rule in found:
        goal = goal.replace(rule, " ")
    return " ".join(w for w in goal.split() if w not in ("-", "*", "•"))


#: the most rules a summary quotes: the first and the newest half each (the store keeps every one); a session
#: with more has a rule-like sentence in every request, and quoting them all at every compaction made the
#: work of a long session grow with its square
MAX_RENDERED_RULES = 200


def _rendered_rules(rules: tuple[str, ...]) -> list[str]:
    """The rules a summary quotes: all of them up to :data:`MAX_RENDERED_RULES`, else the first and the newest
    with a line saying how many are left out (they stay in the state's fact store)."""
    if len(rules) <= MAX_RENDERED_RULES:
        return list(rules)
    half = MAX_RENDERED_RULES // 2
    between = f"({len(rules) - 2 * half} more rules in between, kept in the state)"
    return [*rules[:half], between, *rules[-half:]]


def _programs(commands: Iterable[str]) -> dict[str, int]:
    """How many commands ran each program (the first word of each command)."""
    out: dict[str, int] = {}
    for c in commands:
        words = c.split()
        if words:
            out[words[0]] = out.get(words[0], 0) + 1
    return out


def _flat(text: str) -> str:
    return " ".join(text.split())


def answered_after(findings: tuple[Entry, ...], answer: str | None) -> list[Entry]:
    """The findings the message after the summary quotes (the assistant's answer to the latest request, when
    it was answered): said once, there, where the agent reads what to do next
    (docs/concepts/handoff.md#the-continuation). A finding stored shortened counts by what it kept."""
    if not answer:
        return []
    quoted = _flat(answer)
    return [f for f in findings if (part := _flat(f.text).removesuffix("…").rstrip()) and part in quoted]


def _make_doc(facts: Facts, earlier: str | None, latest_quoted_after: bool,
              answer_after: str | None = None) -> _Doc:
    latest = facts.latest_request
    rules = _rendered_rules(facts.rules)
    last_action = facts.last_action
    quoted = {(f.at, f.text) for f in answered_after(facts.findings, answer_after)}
    # the assistant's answers and its subagents' reports, in the order they came: both are what was found
    reports = [(f.at, _cap(f.text, FINDING_CHARS)) for f in facts.findings if (f.at, f.text) not in quoted]
    reports += [(a.at, _cap(f'{a.tool} subagent "{shorten(a.task, 120)}" reported:\n{a.result}',
                            FINDING_CHARS)) for a in facts.subagents if a.result]
    findings = [text for _, text in sorted(reports, key=lambda r: r[0])]
    answered_at = {f.at for f in facts.findings if f.at >= 0}  # read as an answer: not also a decision
    quoted_at = answered_at | {e.at for e in facts.decisions if e.at >= 0}  # the timeline leaves them out
    answer = facts.findings[-1].text if facts.findings else None
    flat = " ".join(answer.split())[:40] if answer else None
    if last_action and flat and last_action.startswith('Said: "') and flat in last_action:
        # the last answer is quoted (above, or after the summary): the action says only what it called
        _, _, calls = last_action.partition(" — Called: ")
        if quoted:  # the message after the summary says it answered: only the calls are news
            last_action = f"Called: {calls}" if calls else None
        else:
            last_action = ("Said: its last answer (under Findings and answers)"
                           + (f" — Called: {calls}" if calls else ""))
    return _Doc(
        earlier=earlier, rules=rules,
        goals=[g for g in (_without_rules(g, tuple(rules)) for g in facts.goals) if g.strip()],
        instructions=list(facts.instructions), findings=findings,
        decisions=[_cap(e.text, DECISION_CHARS) for e in facts.decisions if e.at not in answered_at],
        todos=[t for t in facts.todos if is_open(Todo(t.content, t.status))],
        done=[t for t in facts.todos if not is_open(Todo(t.content, t.status))],
        errors=list(facts.errors),
        # changed files before those only read, each most recent first: the shrinking keeps the head
        files=[f for f in reversed(facts.files) if f.changed]
        + [f for f in reversed(facts.files) if not f.changed],
        commands=group_commands([c for c in facts.commands if not (c.ok and is_inspection(c.command))]),
        inspections=_programs(c.command for c in facts.commands if c.ok and is_inspection(c.command)),
        identifiers=[e.text for e in facts.identifiers], file_changes=True, file_tools=True,
        subagents=[replace(a, result=None) for a in facts.subagents],
        timeline=_timeline(facts.timeline, latest, quoted_at),
        timeline_omitted=0,
        last_action=last_action, latest=latest,
        latest_note=bool(latest_quoted_after and latest and len(latest) > LONG_LATEST_CHARS))


# ---------------------------------------------------------------------------------------- the shrinking


class _Shrink:
    """The drop steps of :data:`DROP_ORDER` on one doc, each removing only as much as the doc needs to fit
    (``fits`` is monotonic in what is removed, so each step is a binary search)."""

    def __init__(self, doc: _Doc, fits: Callable[[str], bool]) -> None:
        self.doc = doc
        self._fits = fits

    def fits(self) -> bool:
        return self._fits(render(self.doc))

    def drop_front(self, get: Callable[[], list[Any]], put: Callable[[list[Any]], None]) -> None:
        """Drop the fewest leading items of a list that make the doc fit (all of them if none does)."""
        items = list(get())
        put([])
        if not self.fits():
            return
        lo, hi = 0, len(items)
        while lo < hi:
            mid = (lo + hi) // 2
            put(items[mid:])
            if self.fits():
                hi = mid
            else:
                lo = mid + 1
        put(items[lo:])

    def keep_head(self, get: Callable[[], list[Any]], put: Callable[[list[Any]], None]) -> None:
        """Keep the most leading items that fit."""
        items = list(get())
        put([])
        if not self.fits():
            return
        lo, hi = 0, len(items)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            put(items[:mid])
            if self.fits():
                lo = mid
            else:
                hi = mid - 1
        put(items[:lo])

    def cut_text(self, get: Callable[[], str | None], put: Callable[[str | None], None]) -> None:
        """Shorten one text until the doc fits (dropping it if it must)."""
        text = get()
        if not text:
            return
        put(None)
        if not self.fits():
            return
        lo, hi = 0, len(text)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            put(text[:mid].rstrip() + "…")
            if self.fits():
                lo = mid
            else:
                hi = mid - 1
        put(text[:lo].rstrip() + "…" if lo >= 40 else None)  # a stub under 40 chars says nothing

    def run(self) -> None:
        d = self.doc
        total_timeline = len(d.timeline)

        def put_timeline(kept: list[Any]) -> None:
            d.timeline, d.timeline_omitted = kept, total_timeline - len(kept)

        def set_(name: str) -> Callable[[Any], None]:
            return lambda v: setattr(d, name, v)

        def put_older_findings(kept: list[Any]) -> None:
            d.findings = kept + d.findings[-1:]

        def put_older_errors(kept: list[Any]) -> None:
            d.errors = kept + d.errors[-1:]

        def put_later_goals(kept: list[Any]) -> None:
            d.goals = d.goals[:1] + kept

        def shorten_older_findings() -> None:
            d.findings = [_cap(f, OLDER_FINDING_CHARS) for f in d.findings[:-1]] + d.findings[-1:]

        def shorten_newest_finding() -> None:
            d.findings = d.findings[:-1] + [_cap(f, NEWEST_FINDING_SHORT) for f in d.findings[-1:]]

        def newest_finding() -> None:
            if d.findings:
                self.cut_text(lambda: d.findings[-1], lambda v: setattr(
                    d, "findings", d.findings[:-1] + ([v] if v else [])))

        def shorten_goals() -> None:
            d.goals = [_cap(g, FIRST_GOAL_CHARS if i == 0 else GOAL_CHARS) for i, g in enumerate(d.goals)]

        steps: list[Callable[[], None]] = [
            # the timeline's tool steps first: what was said (and what failed) stays a little longer
            lambda: self.drop_where(lambda: d.timeline, put_timeline, lambda t: t.startswith("Ran ")),
            lambda: setattr(d, "inspections", {}),
            lambda: self.drop_front(lambda: d.done, set_("done")),
            lambda: self.drop_front(lambda: d.commands, set_("commands")),
            lambda: self.drop_front(lambda: d.subagents, set_("subagents")),
            lambda: setattr(d, "file_changes", False),
            lambda: self.drop_front(lambda: d.timeline, put_timeline),
            lambda: setattr(d, "decisions", [_cap(t, DECISION_SHORT) for t in d.decisions]),
            self.cap_instructions,
            shorten_older_findings,
            shorten_goals,
            shorten_newest_finding,
            lambda: self.drop_front(lambda: d.decisions, set_("decisions")),
            lambda: self.drop_front(lambda: d.findings[:-1], put_older_findings),
            self.drop_resolved,
            lambda: self.drop_front(lambda: d.errors[:-1], put_older_errors),
            lambda: self.drop_front(lambda: d.identifiers, set_("identifiers")),
            lambda: self.cut_text(lambda: d.last_action, set_("last_action")),
            lambda: setattr(d, "file_tools", False),
            lambda: self.drop_front(lambda: d.goals[1:], put_later_goals),
            lambda: setattr(d, "goals", [shorten(g, FIRST_GOAL_SHORT) if i == 0 else g
                                         for i, g in enumerate(d.goals)]),
            lambda: self.keep_head(lambda: d.files, set_("files")),
            lambda: self.keep_head(lambda: d.todos, set_("todos")),
            newest_finding,
            lambda: self.drop_front(lambda: d.errors, set_("errors")),
            lambda: self.drop_front(lambda: d.goals, set_("goals")),
            lambda: self.drop_front(lambda: d.instructions, set_("instructions")),
            lambda: setattr(d, "short_note", True),
            self.cut_middle,
        ]
        for step in steps:
            if self.fits():
                return
            step()

    def budget_chars(self) -> int:
        """The longest text that fits (``fits`` depends on a text's length only): found by halving."""
        lo, hi = 0, 1 << 24
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._fits("x" * mid):
                lo = mid
            else:
                hi = mid - 1
        return lo

    def cap_instructions(self) -> None:
        """A skill's text can be longer than the whole budget: the instructions in force keep their head, at
        most a third of the budget together (a skill states its process and rules first), so what the agent
        found is not dropped to make room for them (and they are not dropped whole at the end)."""
        d = self.doc
        if not d.instructions:
            return
        third = self.budget_chars() // 3
        share = third // len(d.instructions)
        if sum(len(i) for i in d.instructions) <= third or share < 200:
            return
        d.instructions = [_cap(i, share) for i in d.instructions]

    def cut_middle(self) -> None:
        """Shorten the earlier summary from its middle until the doc fits: its head (the task, the user's
        requests) and its end (the current work, the next step) matter most."""
        d = self.doc
        text = d.earlier
        if not text:
            return
        d.earlier = None
        if not self.fits():
            return

        def cut(k: int) -> str:
            if k < EARLIER_END_ONLY_CHARS:  # too short for both: its end says where the work stands
                return "[…]" + text[len(text) - k:].lstrip()
            head = (2 * k) // 3
            return text[:head].rstrip() + _EARLIER_CUT + text[len(text) - (k - head):].lstrip()

        lo, hi = 0, len(text)  # most characters kept that fit
        while lo < hi:
            mid = (lo + hi + 1) // 2
            d.earlier = cut(mid)
            if self.fits():
                lo = mid
            else:
                hi = mid - 1
        d.earlier = cut(lo) if lo >= 30 else None

    def drop_where(self, get: Callable[[], list[Any]], put: Callable[[list[Any]], None],
                   pick: Callable[[Any], bool]) -> None:
        """Drop the fewest of a list's items that ``pick`` selects, oldest first, that make the doc fit."""
        items = list(get())
        chosen = [i for i, x in enumerate(items) if pick(x)]

        def without(k: int) -> list[Any]:
            gone = set(chosen[:k])
            return [x for i, x in enumerate(items) if i not in gone]

        self.drop_front(lambda: list(range(len(chosen))), lambda kept: put(without(len(chosen) - len(kept))))

    def drop_resolved(self) -> None:
        """Drop resolved errors, oldest first, only as many as needed."""
        self.drop_where(lambda: self.doc.errors, lambda v: setattr(self.doc, "errors", v),
                        lambda e: e.resolved)


#: attempts at fitting by the estimated rate before the measured text decides
_ATTEMPTS = 4


def render_facts(facts: Facts, budget_tokens: int, earlier: str | None = None,
                 cost: Callable[[str], int] | None = None,
                 latest_quoted_after: bool = False, answer_after: str | None = None) -> tuple[str, bool]:
    """The summary text of ``facts`` within ``budget_tokens`` as ``cost`` counts (the window's counter and
    calibration; chars/4 without one), and whether it was cut hard. ``answer_after``: the answer the message
    after the summary quotes (:func:`answered_after`), not repeated under the findings.

    An exact counter is too slow for the many trial renders of the shrinking, so they are judged by the
    characters at the rate (tokens per character) measured on the full text; the result is then measured,
    and when it does not fit, the rate is raised by what was missing and the shrinking starts over (a few
    times at most) before the hard cut."""
    budget = max(0, budget_tokens)
    if cost is None:  # chars/4 is cheap: every trial render is measured
        doc = _make_doc(facts, earlier, latest_quoted_after, answer_after)
        _Shrink(doc, lambda t: chars_cost(t) <= budget).run()
        text = render(doc)
        return (text, False) if chars_cost(text) <= budget else fit_summary(text, budget)
    full = render(_make_doc(facts, earlier, latest_quoted_after, answer_after))
    measured = cost(full)
    if measured <= budget:
        return full, False
    rate = measured / max(1, len(full))
    text = full
    for _ in range(_ATTEMPTS):
        limit = budget / rate if rate > 0 else float(len(full))
        doc = _make_doc(facts, earlier, latest_quoted_after, answer_after)
        _Shrink(doc, lambda t, limit=limit: len(t) <= limit).run()  # type: ignore[misc]
        text = render(doc)
        measured = cost(text)
        if measured <= budget:
            return text, False
        rate = max(rate * 1.02, measured / max(1, len(text)))
    # Last resort: only the marker, rules and latest request are left; keep the head.
    return fit_summary(text, budget, cost)

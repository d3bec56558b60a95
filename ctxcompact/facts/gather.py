"""The facts a run's records say (:class:`~.store.NewFacts`), read by the rules of the other fact modules,
ready for :func:`.store.merge`: ``merge(old, gather(records, …))`` is the store after a compaction."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..model import SUBAGENT_MESSAGE, Message, Record, Role, ToolCall
from .calls import CallsSoFar, Memo, call_index, once_per_call
from .earlier import MAX_INSTRUCTION_CHARS, EarlierSummary, carried, earlier_summary
from .files import FileScan
from .goals import GOAL_CHARS, Requests, goal_text
from .handoff import InstructionScan
from .identifiers import IdentifierScan
from .outcomes import CommandScan, ErrorScan, EvidenceScan, failure_checker
from .rules import ProjectRuleScan
from .seen import Kind, Scanner, Seen, kind_of, seen
from .store import (
    MAX_COMMANDS,
    MAX_DECISIONS,
    MAX_FINDINGS,
    MAX_TIMELINE,
    CommandFact,
    Entry,
    ErrorFact,
    Facts,
    FileFact,
    NewFacts,
    SubagentError,
    SubagentFact,
    TodoFact,
)
from .subagents import subagent_runs
from .timeline import ActionScan, StatementScan, TimelineScan
from .todos import Todo, TodoScan

__all__ = ["GOAL_CHARS", "FactFeed", "gather", "goal_text"]

# Per-entry lengths kept in the store (the summary may show less; the goals': .goals.GOAL_CHARS).
FINDING_CHARS = 6000
DECISION_CHARS = 2000
TIMELINE_CHARS = 160
ACTION_CHARS = 500

def gather(records: Iterable[Record], latest_request: str | None = None,
           todos: Sequence[Todo] | None = None, prior_summary: str | None = None) -> NewFacts:
    """What ``records`` say. ``latest_request``: the last thing a person typed, when the caller knows it
    better (else the last typed message here); ``todos``: open todos from ``--todos`` (else the last todo
    list in the records, when there is one); ``prior_summary``: the state's summary, not taken again as an
    earlier summary when the log carries it (facts.earlier.carried_text)."""
    records = list(records)
    with once_per_call():  # the scans below each read every call's command and paths: work them out once
        feed = FactFeed(call_index(records))
        for rec in records:
            feed.feed(rec)
        return feed.facts(latest_request, todos, prior_summary, records)


class FactFeed:
    """:func:`gather` read record by record (docs/concepts/summary.md#what-a-summary-keeps): ``feed`` each
    record in order, then ``facts``. Each fact module's scanner reads the record as it comes (the same scans
    :func:`gather` runs, so the same rules); what is held is what the facts are made of, not the records.

    ``calls``: the tool calls by id over the whole list (:func:`.calls.call_index`), when the caller has it;
    else they are indexed as the records come, which answers as the whole list does unless a result comes
    before its call or an id is used again (``complete`` says whether ``facts`` equals :func:`gather`'s)."""

    def __init__(self, calls: Mapping[str, ToolCall] | None = None, *, bounded: bool = False) -> None:
        self.index = CallsSoFar(forget=bounded) if calls is None else None
        #: ``bounded``: what ``store.merge`` with no earlier facts would drop is dropped as the records
        #: come (the calls once answered, the oldest timeline steps, the older runs of commands), so what
        #: is held does not grow with them; the facts then equal :func:`gather`'s as merged:
        #: ``merge(Facts(), feed.facts()) == merge(Facts(), gather(records))``
        self.bounded = bounded
        self.last_at = 0  # the last input position fed: trimming needs them in order
        self.trimmed = False
        self.ordered = True
        lookup: Mapping[str, ToolCall] = calls if calls is not None else self.index  # type: ignore[assignment]
        # a result is read only in its own record: the memo is emptied after each (the ids of records
        # already dropped may be reused)
        self.failed = failure_checker()
        self.requests = Requests(bounded)  # what a person typed: its rules and goals
        self.files = FileScan()
        self.commands = CommandScan(lookup, self.failed)
        self.errors = ErrorScan(lookup, self.failed)
        self.todos = TodoScan()
        self.action = ActionScan(ACTION_CHARS)
        self.evidence = EvidenceScan(lookup, self.failed)
        self.timeline = TimelineScan(lookup, TIMELINE_CHARS, self.failed)
        self.statements = StatementScan()
        self.identifiers = IdentifierScan()
        self.project = ProjectRuleScan()
        self.instructions = InstructionScan()
        self.scans: tuple[Scanner[Any], ...] = (
            self.files, self.commands, self.errors, self.todos, self.action, self.evidence, self.timeline,
            self.statements, self.identifiers, self.project, self.instructions)
        #: what is done with a record of each kind (``Seen.kind``): the steps that read that kind, in the
        #: order above, worked out on the first record of the kind (most records are read by 4-8 of them)
        self.routes: dict[int, tuple[Callable[[Seen], None], ...]] = {}
        self.n = 0  # records fed
        self.earlier: list[EarlierSummary] = []
        self.subagent_lines = False  # a subagent's lines: their runs are read over the whole list
        #: what the scans read of each call (its command, paths, keys: ``calls.per_call``), kept from the
        #: call's record to its results' while the index holds the call (then dropped with it)
        self.memo: Memo = {}
        self.block = once_per_call(self.memo)  # (entered for every record: made once)
        if bounded:
            self.commands.ids = set()

    @property
    def complete(self) -> bool:
        """Whether :meth:`facts` without the records equals :func:`gather` of every record fed."""
        return (not self.subagent_lines and (self.index is None or self.index.exact)
                and (self.ordered or not self.trimmed))

    def feed(self, record: Record | Seen) -> None:
        """The next record (a :class:`.seen.Seen` of it when the caller has one: what the scans ask of
        it is then worked out once for the caller and them)."""
        view = seen(record)
        view.n, self.n = self.n, self.n + 1
        index = self.index
        if index is not None and view.calls:
            index.add(view.calls)
        steps = self.routes.get(view.kind)
        if steps is None:
            steps = self.routes[view.kind] = self._steps(kind_of(view.kind))
        memo = self.memo
        held = len(memo)
        with self.block:
            for step in steps:
                step(view)
        if view.results:
            self.failed.clear()
        if index is not None:
            answered = bool(index.just_asked)
            if answered:
                index.answered()
            # (a record's memo, and those of the calls answered, go)
            if memo and (answered or len(memo) != held):
                calls = index.calls
                for k in [k for k, v in memo.items()
                          if type(v[0]) is not ToolCall or calls.get(v[0].id) is not v[0]]:
                    del memo[k]  # (in place: the block above works in this one memo)
        else:
            memo.clear()
        if self.bounded:
            self._trim(view.rec.index)

    def _steps(self, kind: Kind) -> tuple[Callable[[Seen], None], ...]:
        """The steps that may take something from a record of ``kind``: the scans that read it
        (``Scanner.reads``) and the feed's own (a request, an earlier summary, a subagent's line); the others
        would do nothing with it."""
        steps: list[Callable[[Seen], None]] = []
        if kind.role is Role.USER and kind.input:  # (text.typed_text: only a person's input record)
            steps.append(self._request)
        steps += [s.feed for s in self.scans if s.reads(kind)]
        if kind.input and (kind.meta or kind.role is Role.USER):  # (earlier.earlier_summary's cases)
            steps.append(self._earlier)
        if kind.meta:
            steps.append(self._subagent)
        return tuple(steps)

    def _request(self, view: Seen) -> None:
        text = view.typed
        if text is not None:
            self.requests.add(text)

    def _earlier(self, view: Seen) -> None:
        found = earlier_summary(view.rec)
        if found is not None:
            self.earlier.append(found)

    def _subagent(self, view: Seen) -> None:
        if isinstance(view.rec.meta.get(SUBAGENT_MESSAGE), Message):
            self.subagent_lines = True

    def _trim(self, at: int) -> None:
        if at < self.last_at:  # (never below 0, where it starts)
            self.ordered = False  # merge orders by position: what was dropped may have been kept
            return
        self.last_at = at
        if not self.ordered:
            return
        if len(self.timeline.out) >= 4 * MAX_TIMELINE:
            self.trimmed |= _keep_last(self.timeline.out, MAX_TIMELINE)
        said = self.statements
        if len(said.answers) >= 4 * MAX_FINDINGS or len(said.along) >= 4 * MAX_DECISIONS:
            self.trimmed |= said.keep_last(MAX_FINDINGS, MAX_DECISIONS)
        if len(self.commands.runs) >= 4 * MAX_COMMANDS:
            self.commands.keep_last(2 * MAX_COMMANDS)
            self.trimmed = True

    def facts(self, latest_request: str | None = None, todos: Sequence[Todo] | None = None,
              prior_summary: str | None = None, records: Sequence[Record] | None = None) -> NewFacts:
        """The facts of the records fed (:func:`gather`'s arguments); ``records``: every record fed, needed
        only when a subagent's lines were among them."""
        latest = latest_request or self.requests.last
        files = [FileFact(f.path, tuple(f.tools), f.at, f.changed, f.change)
                 for f in sorted(self.files.result(), key=lambda f: f.last_index)]
        commands = tuple(CommandFact(c.command, c.ok, c.at) for c in self.commands.result())
        errors = tuple(ErrorFact(e.tool, e.command, e.text, e.key, e.resolved, e.at)
                       for e in self.errors.result())
        found = list(todos) if todos else self.todos.result()
        # the whole latest list: its open items, and what it says is done (the summary shows those while
        # it fits)
        todo_facts = tuple(TodoFact(t.content, t.status) for t in found or [])
        action = self.action.result()
        keys, claimed = self.evidence.result()
        subagents: list[SubagentFact] = []
        if self.subagent_lines and records is None:
            raise ValueError("a subagent's lines were fed: FactFeed.facts needs the records")
        runs = subagent_runs(records) if self.subagent_lines and records is not None else []
        called = _call_positions(records) if runs and records is not None else {}
        for i, run in enumerate(runs):  # their files join the list, marked as theirs
            at = called.get(run.call_id, i) if run.call_id is not None else i
            subagents.append(SubagentFact(run.task, run.tool, tuple(run.changed),
                                          tuple(SubagentError(e.text, e.resolved) for e in run.errors),
                                          run.result, at))
            files += [FileFact(p, (f"{run.tool} subagent",), at, True) for p in run.changed]
        said = self.statements.result()
        facts = Facts(
            goals=self.requests.goals(latest),
            rules=tuple(self.requests.rules),
            files=tuple(files),
            commands=commands,
            errors=errors,
            todos=todo_facts,
            timeline=tuple(Entry(t, at) for at, t in self.timeline.result()),
            findings=tuple(Entry(_finding(t), at) for at, t in said.answers),
            decisions=tuple(Entry(_finding(t, DECISION_CHARS), at) for at, t in said.conclusions),
            identifiers=tuple(Entry(t, at) for at, t in self.identifiers.result()),
            instructions=tuple(dict.fromkeys(
                t[:MAX_INSTRUCTION_CHARS] for t in [*self.project.result(), *self.instructions.result()])),
            subagents=tuple(subagents),
            last_action=action.render() if action else None,
            latest_request=latest,
            earlier=carried(self.earlier, prior_summary),
        )
        return NewFacts(facts, todos_seen=found is not None, success_keys=frozenset(keys),
                        claimed_fixed=claimed)


def _keep_last(entries: list[tuple[int, str]], cap: int) -> bool:
    """Drop the oldest of ``entries`` (in input order) that ``store.merge`` drops with no earlier facts
    (``_entries_merged``: the last ``cap`` distinct (position, text) by position): cut between two
    positions, at least ``cap`` distinct ones kept. Whether any was dropped."""
    c = len(entries) - 2 * cap
    while c > 0 and entries[c - 1][0] == entries[c][0]:
        c -= 1
    if c <= 0 or len(set(entries[c:])) < cap:
        return False
    del entries[:c]
    return True


def _finding(text: str, limit: int = FINDING_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def _call_positions(records: Sequence[Record]) -> dict[str, int]:
    """The input position of each tool call, by id."""
    return {c.id: rec.index for rec in records if rec.message is not None for c in rec.message.tool_calls()}

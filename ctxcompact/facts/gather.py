"""The facts a run's records say (:class:`~.store.NewFacts`), read by the rules of the other fact modules,
ready for :func:`.store.merge`: ``merge(old, gather(records, …))`` is the store after a compaction."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..model import Record
from .calls import once_per_call
from .earlier import MAX_INSTRUCTION_CHARS, carried_text
from .files import files_touched
from .handoff import instructions_in_force
from .identifiers import identifiers
from .outcomes import commands_run, errors_seen, failure_checker, resolution_evidence
from .rules import project_rules, rules_of
from .store import (
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
from .text import user_requests
from .timeline import answers, conclusions, last_assistant_action, timeline_entries
from .todos import Todo, latest_todo_list

# Per-entry lengths kept in the store (the summary may show less).
GOAL_CHARS = 2000
FINDING_CHARS = 6000
DECISION_CHARS = 2000
TIMELINE_CHARS = 160
ACTION_CHARS = 500

_FENCE = re.compile(r"```.*?(?:```|\Z)", re.S)


def goal_text(text: str) -> str:
    """A request as a goal, its lines as the user wrote them: pasted code blocks and logs replaced by a
    marker, length capped."""
    text = _FENCE.sub(" [code block] ", text).strip()
    return text if len(text) <= GOAL_CHARS else text[:GOAL_CHARS - 1].rstrip() + "…"


def gather(records: Sequence[Record], latest_request: str | None = None,
           todos: Sequence[Todo] | None = None, prior_summary: str | None = None) -> NewFacts:
    """What ``records`` say. ``latest_request``: the last thing a person typed, when the caller knows it
    better (else the last typed message here); ``todos``: open todos from ``--todos`` (else the last todo
    list in the records, when there is one); ``prior_summary``: the state's summary, not taken again as an
    earlier summary when the log carries it (facts.earlier.carried_text)."""
    with once_per_call():  # the passes below each read every call's command and paths: work them out once
        return _gather(list(records), latest_request, todos, prior_summary)


def _gather(records: list[Record], latest_request: str | None, todos: Sequence[Todo] | None,
            prior_summary: str | None) -> NewFacts:
    pos = [r.index for r in records]
    typed = [t for _, t in user_requests(records)]
    latest = latest_request or (typed[-1] if typed else None)
    goals = tuple(dict.fromkeys(goal_text(t) for t in typed if t != latest))
    files = [FileFact(f.path, tuple(f.tools), pos[f.last_index], f.changed, f.change)
             for f in sorted(files_touched(records), key=lambda f: f.last_index)]
    failed = failure_checker()  # several passes below look at the same results
    commands = tuple(CommandFact(c.command, c.ok, pos[c.index]) for c in commands_run(records, failed))
    errors = tuple(ErrorFact(e.tool, e.command, e.text, e.key, e.resolved, pos[e.index])
                   for e in errors_seen(records, failed))
    found = list(todos) if todos else latest_todo_list(records)
    # the whole latest list: its open items, and what it says is done (the summary shows those while it fits)
    todo_facts = tuple(TodoFact(t.content, t.status) for t in found or [])
    action = last_assistant_action(records, ACTION_CHARS)
    keys, claimed = resolution_evidence(records, failed)
    subagents: list[SubagentFact] = []
    runs = subagent_runs(records)
    called = _call_positions(records) if runs else {}
    for i, run in enumerate(runs):  # their files join the list, marked as theirs
        at = called.get(run.call_id, i) if run.call_id is not None else i
        subagents.append(SubagentFact(run.task, run.tool, tuple(run.changed),
                                      tuple(SubagentError(e.text, e.resolved) for e in run.errors),
                                      run.result, at))
        files += [FileFact(p, (f"{run.tool} subagent",), at, True) for p in run.changed]
    facts = Facts(
        goals=goals,
        rules=tuple(rules_of(typed)),
        files=tuple(files),
        commands=commands,
        errors=errors,
        todos=todo_facts,
        timeline=tuple(Entry(t, at) for at, t in timeline_entries(records, TIMELINE_CHARS, failed)),
        findings=tuple(Entry(_finding(t), at) for at, t in answers(records)),
        decisions=tuple(Entry(_finding(t, DECISION_CHARS), at) for at, t in conclusions(records)),
        identifiers=tuple(Entry(t, at) for at, t in identifiers(records)),
        instructions=tuple(dict.fromkeys(
            t[:MAX_INSTRUCTION_CHARS] for t in [*project_rules(records), *instructions_in_force(records)])),
        subagents=tuple(subagents),
        last_action=action.render() if action else None,
        latest_request=latest,
        earlier=carried_text(records, prior_summary),
    )
    return NewFacts(facts, todos_seen=found is not None, success_keys=frozenset(keys), claimed_fixed=claimed)


def _finding(text: str, limit: int = FINDING_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def _call_positions(records: Sequence[Record]) -> dict[str, int]:
    """The input position of each tool call, by id."""
    return {c.id: rec.index for rec in records if rec.message is not None for c in rec.message.tool_calls()}

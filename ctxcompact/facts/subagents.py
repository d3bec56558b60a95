"""What subagents did: the files they changed or read, their errors, their result
(docs/concepts/summary.md#errors-files-and-subagents-in-the-summary).

A subagent's lines never reach the main conversation's model (their records carry no message), so every
other fact skips them; its work is read from the records' :data:`~ctxcompact.model.SUBAGENT_MESSAGE` and
grouped by :data:`~ctxcompact.model.SUBAGENT_RUN`. A run is tied to the call that started it by
:data:`~ctxcompact.model.SUBAGENT_CALL`, else by its prompt: the first text of the run is the ``prompt``
argument of that call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..model import SUBAGENT_CALL, SUBAGENT_MESSAGE, SUBAGENT_RUN, Message, Origin, Record, Role, ToolCall
from .calls import call_index, decode_args, writes_files
from .files import paths_of_call
from .outcomes import ErrorSeen, errors_seen, output_text
from .text import shorten

RESULT_CHARS = 4000  # a subagent's report is a finding: kept whole up to this (docs/concepts/summary.md)
TASK_CHARS = 120


@dataclass(slots=True)
class SubagentRun:
    task: str  # what it was asked: the call's description, else the first line of its prompt
    tool: str  # the tool that started it (Task, Agent…), "subagent" when unknown
    changed: list[str] = field(default_factory=list)  # files it wrote or edited
    read: list[str] = field(default_factory=list)  # other files its calls named
    errors: list[ErrorSeen] = field(default_factory=list)
    result: str | None = None  # what it answered (the call's result, else its last text)
    call_id: str | None = None


def _first_text(messages: list[Message]) -> str:
    for m in messages:
        if m.role is Role.USER and m.text().strip():
            return m.text().strip()
    return ""


def subagent_runs(records: Sequence[Record]) -> list[SubagentRun]:
    """The subagent runs in ``records``, in the order they started."""
    lines: dict[str, list[Record]] = {}
    calls: dict[str, str] = {}
    for rec in records:
        msg = rec.meta.get(SUBAGENT_MESSAGE)
        if not isinstance(msg, Message):
            continue
        run = str(rec.meta.get(SUBAGENT_RUN, "run"))
        lines.setdefault(run, []).append(Record(index=rec.index, line=rec.line, raw=None, data=None,
                                                message=msg, origin=Origin.INPUT))
        if isinstance(rec.meta.get(SUBAGENT_CALL), str):
            calls[run] = rec.meta[SUBAGENT_CALL]
    if not lines:
        return []
    main_calls = call_index(records)
    by_prompt: dict[str, ToolCall] = {}
    for c in main_calls.values():
        args = decode_args(c)
        if isinstance(args, dict) and isinstance(args.get("prompt"), str):
            by_prompt[args["prompt"].strip()] = c
    results = {res.call_id: res for rec in records if rec.message is not None
               for res in rec.message.tool_results()}
    out: list[SubagentRun] = []
    for run, recs in lines.items():
        messages = [r.message for r in recs if r.message is not None]
        prompt = _first_text(messages)
        started = main_calls.get(calls.get(run, "")) or by_prompt.get(prompt)
        args = decode_args(started) if started is not None else None
        desc = args.get("description") if isinstance(args, dict) else None
        task = desc if isinstance(desc, str) and desc.strip() else " ".join(prompt.split())
        sub = SubagentRun(shorten(task, TASK_CHARS) or "(no prompt)", started.name if started else "subagent",
                          call_id=started.id if started else None)
        for r in recs:
            for c in r.message.tool_calls() if r.message is not None else []:
                target = sub.changed if writes_files(c) else sub.read
                target.extend(p for p in paths_of_call(c) if p not in target)
        sub.read = [p for p in sub.read if p not in sub.changed]
        # "Sibling tool call errored" says only that another parallel call failed, which is listed itself
        sub.errors = [e for e in errors_seen(recs) if e.text != "Sibling tool call errored"]
        answer = results.get(sub.call_id or "")
        if answer is not None and output_text(answer).strip():
            sub.result = _report(output_text(answer))
        else:
            said = [m.text().strip() for m in messages if m.role is Role.ASSISTANT and m.text().strip()]
            sub.result = _report(said[-1]) if said else None
        out.append(sub)
    return out


def _report(text: str) -> str:
    """A subagent's report as the summary keeps it: its lines as written, cut at :data:`RESULT_CHARS`."""
    text = text.strip()
    return text if len(text) <= RESULT_CHARS else text[:RESULT_CHARS - 1].rstrip() + "…"

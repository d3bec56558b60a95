"""The cleaner's rules (docs/reference/cli.md#ctxcompact-clean-file): :class:`PartCleaner` makes one part of a
transcript valid input for its target API, given what the parts before it left (:class:`Carry`), and reports
every repair; clean.py feeds it (a record at a time, or the whole transcript).

The cleaner works on the model only and asks the format nothing but its :class:`Layout`. It never mutates
the records it is given: a record it does not change is passed through as the same object (so the writer
copies its ``raw`` bytes), a record it changes is a copy with ``dirty=True``, and a record it makes comes from
:func:`ctxcompact.formats.base.new_record`. Lines that carry no message stay where they were among their
neighbours.

Repairs, in the order they are made:

1. ``duplicate_call_id``: a call reusing an earlier call's id is renamed ``<id>_2`` (``_3``…), and the
   result matched to it follows. Results are matched to calls in order: first to the earliest unanswered
   call with that id *before* the result, then (results that come before any such call) to the earliest
   unanswered one anywhere.
2. ``orphan_result``: a result whose id no call has, or a second result for an answered call, becomes text
   context ``[tool result for call <id> (no matching call)]: <content>`` where it stood (a ``tool`` message
   holding one becomes a user message). Nothing is dropped.
3. ``missing_result``: a call with no result gets the synthetic result ``Tool no response``.
4. ``moved_result`` / ``reordered_blocks``: every call message is followed directly by its results in call
   order: one ``tool`` message per result where ``layout.results_per_message``, otherwise one message of
   ``layout.result_role`` whose tool results come first (Anthropic requires it) and whose other blocks (user
   text) follow in their order.
5. For layouts that require alternation (``layout.alternate``): a system message after the leading system
   messages becomes a user message (``role_changed``: the Messages API has no system turn, and moving it to
   the front would change what it applies to), each of its texts headed by :data:`MOVED_SYSTEM`; a
   conversation whose first non-system message is not a user message gets a user message
   ``(conversation continues)`` before it (``inserted_message``); consecutive messages of one role are
   merged (``merged_messages``: blocks concatenated, the first message's fields kept, tool results first in
   a user message). Layouts without alternation (OpenAI, where system and
   developer messages are legal anywhere) keep their role order.
6. ``appended_reply``: a transcript whose last message is a tool result gets an assistant ``Understood.``;
   not in an agent's own log (``layout.agent_log``: Claude Code, Codex), which the agent resumes and where the
   next model turn is the answer: nothing the model did not say is added.

Tree layouts (``layout.tree``, Claude Code): the log is a tree by ``parentUuid``, so results stay where they
were written (steps 4 and 6 are no repairs there: order belongs to conversion, ``--to anthropic``), and the
calls of the last turn that nothing but their own results follows are the running session's live calls,
not missing results. Steps 1-3 still apply.

Cleaning is idempotent: a cleaned transcript comes back unchanged with no repairs.
"""

from __future__ import annotations

import bisect
import dataclasses
from dataclasses import dataclass, field

from .call_ids import CallIds
from .formats.base import Layout, new_record
from .model import (
    Block,
    Message,
    Origin,
    Record,
    Role,
    TextBlock,
    ToolCall,
    ToolResult,
    Transcript,
)
from .repairs import (
    CONTINUES,
    MOVED_SYSTEM,
    NO_RESPONSE,
    UNDERSTOOD,
    CleanResult,
    Repair,
    context_blocks,
    ends_on_result,
    renamed_call,
    renamed_result,
    results_first,
    user_message,
)


# The cleaner's own records of a part's calls and results (and what a part carries) are never compared: no
# generated ``__eq__`` (each costs a compile at import, ~0.5 M instructions on every call that cleans).
@dataclass(slots=True, eq=False)
class _Call:
    """A tool call the part holds, and the result that answers it once linked."""

    pos: int  # index of the record in the input
    bi: int  # index of the block in its message
    block: ToolCall
    new_id: str
    result: _Result | None = None


@dataclass(slots=True, eq=False)
class _Result:
    """A tool result the part holds, and the call it answers once linked."""

    pos: int
    bi: int
    block: ToolResult
    call: _Call | None = None
    duplicate: bool = False  # its call exists but was already answered


@dataclass(slots=True, eq=False)
class Carry:
    """What a settled part of the transcript leaves to the rest: its call ids (every call answered, no id
    repeated; :meth:`CallIds.count` of an id: how many settled calls had it) and whether the conversation
    has begun (a non-system message)."""

    calls: CallIds = field(default_factory=CallIds)
    started: bool = False


# a call of a settled part (clean.Cleaner): answered, before everything in the part being cleaned
_ANSWERED = _Call(-1, -1, ToolCall("", "", ""), "", _Result(-1, -1, ToolResult("", [])))


class PartCleaner:
    """Cleans one part of a transcript (or the whole) by the rules above; ``carry``: what the settled parts
    before it left (their answered call ids, whether the conversation has begun)."""

    def __init__(self, transcript: Transcript, layout: Layout, *, close_trailing: bool = True,
                 carry: Carry | None = None) -> None:
        self.close_trailing = close_trailing
        self.carry = carry if carry is not None else Carry()
        self.calls: list[_Call] = []
        self.t = transcript
        self.layout = layout
        self.recs = transcript.records
        self.repairs: list[Repair] = []
        # lines for the records the cleaner makes (keyed by id(): records are not hashable)
        self.made_line: dict[int, int] = {}

    # -- helpers ------------------------------------------------------------------------------------------
    def report(self, kind: str, line: int, detail: str, call_id: str | None = None) -> None:
        self.repairs.append(Repair(kind, line, detail, call_id))

    def line_of(self, rec: Record) -> int:
        return self.made_line.get(id(rec), rec.line)

    def make(self, message: Message, origin: Origin, line: int) -> Record:
        rec = new_record(message, origin)
        self.made_line[id(rec)] = line
        return rec

    def msg(self, pos: int) -> Message:
        m = self.recs[pos].message
        assert m is not None
        return m

    # -- the passes -----------------------------------------------------------------------------------------
    def run(self) -> CleanResult:
        calls, results = self.link()
        out = self.place(calls, results)
        if self.layout.alternate:
            out = self.fix_roles(out)
            out = self.merge_runs(out)
        if self.close_trailing and not (self.layout.tree or self.layout.agent_log):
            out = self.close(out)
        # a call and its result link each other: a cycle only the cyclic GC frees, so a streamed read's
        # parts stayed with their texts (~1 MB tool results) until a full collection ran
        for r in results:
            r.call = None
        return CleanResult(dataclasses.replace(self.t, records=out), self.repairs)

    def link(self) -> tuple[list[_Call], list[_Result]]:
        """Find every call and result, give repeated call ids fresh names and match results to calls."""
        calls: list[_Call] = []
        results: list[_Result] = []
        for pos, rec in enumerate(self.recs):
            if rec.message is None:
                continue
            for bi, b in enumerate(rec.message.blocks):
                if isinstance(b, ToolCall):
                    calls.append(_Call(pos, bi, b, b.id))
                elif isinstance(b, ToolResult):
                    results.append(_Result(pos, bi, b))
        self.calls = calls
        # the calls of the settled parts before: answered, so only their number matters (ids and renames);
        # looked up by the ids this part names, never copied whole (a part costs its own length)
        carried = self.carry.calls
        used = {c.block.id for c in calls} | {r.block.call_id for r in results}
        by_id: dict[str, list[_Call]] = {}
        before: dict[str, int] = {}  # carried.count of each id named here, looked up once (costly)

        def same_id(i: str) -> list[_Call]:
            got = by_id.get(i)
            if got is None:
                n = before[i] = carried.count(i)
                got = by_id[i] = [_ANSWERED] * n
            return got

        for c in calls:
            same = same_id(c.block.id)
            same.append(c)
            if len(same) > 1:
                k = len(same)
                while f"{c.block.id}_{k}" in used or carried.count(f"{c.block.id}_{k}"):
                    k += 1
                c.new_id = f"{c.block.id}_{k}"
                used.add(c.new_id)
                self.report(
                    "duplicate_call_id",
                    self.recs[c.pos].line,
                    f"call id {c.block.id!r} already used by an earlier call; renamed {c.new_id!r}",
                    c.new_id,
                )
        # First pass: a result answers the earliest unanswered call with its id that came before it. Results
        # are taken in order and always answer the earliest call, so the answered calls of an id are a prefix
        # of its list and one pointer per id finds the next (linear even when one id is reused 10,000 times).
        nxt: dict[str, int] = {}
        for r in results:
            same = same_id(r.block.call_id)
            k = nxt[r.block.call_id] if r.block.call_id in nxt else before[r.block.call_id]
            if k < len(same) and (same[k].pos, same[k].bi) < (r.pos, r.bi):
                same[k].result, r.call = r, same[k]
                nxt[r.block.call_id] = k + 1
        # Second pass: results that came before their call take the earliest call still unanswered.
        for r in results:
            if r.call is not None:
                continue
            same = same_id(r.block.call_id)
            k = nxt[r.block.call_id] if r.block.call_id in nxt else before[r.block.call_id]
            if k < len(same):
                same[k].result, r.call = r, same[k]
                nxt[r.block.call_id] = k + 1
            else:
                r.duplicate = bool(same)
        return calls, results

    def residual(self, pos: int, calls: list[_Call], results: list[_Result]) -> list[Block]:
        """(``calls`` and ``results`` are those of the message at ``pos``.)"""
        """The blocks of a message once its results are taken out (unanswerable ones become text context)
        and its renamed calls carry their new ids."""
        renamed = {c.bi: c for c in calls if c.new_id != c.block.id}
        unmatched = {r.bi: r for r in results if r.call is None}
        out: list[Block] = []
        for bi, b in enumerate(self.msg(pos).blocks):
            if isinstance(b, ToolCall):
                out.append(renamed_call(b, renamed[bi].new_id) if bi in renamed else b)
            elif isinstance(b, ToolResult):
                if bi in unmatched:
                    out.extend(
                        context_blocks(
                            b, "duplicate result" if unmatched[bi].duplicate else "no matching call"
                        )
                    )
            else:
                out.append(b)
        return out

    def place(self, calls: list[_Call], results: list[_Result]) -> list[Record]:
        """Put every call's results right after its message, in call order, the way the layout wants."""
        for r in results:
            if r.call is None:
                what = "a second result for an answered call" if r.duplicate else "no call has this id"
                self.report(
                    "orphan_result",
                    self.recs[r.pos].line,
                    f"result for call {r.block.call_id!r}: {what}; kept as text context",
                    r.block.call_id,
                )
        calls_at: dict[int, list[_Call]] = {}
        results_at: dict[int, list[_Result]] = {}
        for c in calls:
            calls_at.setdefault(c.pos, []).append(c)
        for r in results:
            results_at.setdefault(r.pos, []).append(r)
        # position -> the blocks written there (empty: the record is dropped, its results went to their call)
        residual = self.residual_in_place if self.layout.tree else self.residual
        self.blocks_at: dict[int, list[Block]] = {
            p: residual(p, calls_at.get(p, []), results_at.get(p, []))
            for p in sorted(calls_at.keys() | results_at.keys())
        }
        self.emit_after: dict[int, list[Record]] = {}
        self.reused: dict[int, Record | None] = {}  # per-message layout: position -> record written there
        msg_positions = [i for i, rec in enumerate(self.recs) if rec.message is not None]
        # Calls are answered after the turn that made them: the call's own message, or with split_turns the
        # last of the consecutive assistant lines it belongs to.
        turn_end = self.turn_ends(msg_positions)
        groups: dict[int, list[_Call]] = {}
        for c in calls:
            groups.setdefault(turn_end.get(c.pos, c.pos), []).append(c)
        if self.layout.tree:
            self.answer_missing(groups, msg_positions)
            groups = {}
        for mpos, group in groups.items():
            mline = self.recs[mpos].line
            placed: list[ToolResult] = []
            for c in group:
                if c.result is None:
                    placed.append(
                        ToolResult(
                            call_id=c.new_id,
                            content=[TextBlock(NO_RESPONSE)],
                            name=c.block.name,
                            synthetic=True,
                        )
                    )
                    self.report(
                        "missing_result",
                        mline,
                        f"call {c.new_id!r} ({c.block.name}) had no result; added {NO_RESPONSE!r}",
                        c.new_id,
                    )
                else:
                    placed.append(renamed_result(c.result.block, c.new_id))
            start = bisect.bisect_right(msg_positions, mpos)
            following = msg_positions[start : start + len(group)]
            if self.layout.results_per_message:
                self.place_each(mpos, group, placed, following)
            else:
                self.place_merged(mpos, group, placed, following[0] if following else None)

        out: list[Record] = []
        for pos, rec in enumerate(self.recs):
            if pos in self.reused:
                kept = self.reused[pos]
            elif pos in self.blocks_at:
                kept = self.rebuilt(pos, self.blocks_at[pos])
            else:
                kept = rec
            if kept is not None:
                out.append(kept)
            out.extend(self.emit_after.get(pos, ()))
        return out

    def residual_in_place(self, pos: int, calls: list[_Call], results: list[_Result]) -> list[Block]:
        """Tree layouts: the blocks of a message with its matched results left where they are (under a
        renamed call's new id), unanswerable results as text context and renamed calls under their new ids."""
        renamed = {c.bi: c for c in calls if c.new_id != c.block.id}
        by_bi = {r.bi: r for r in results}
        out: list[Block] = []
        for bi, b in enumerate(self.msg(pos).blocks):
            if isinstance(b, ToolCall):
                out.append(renamed_call(b, renamed[bi].new_id) if bi in renamed else b)
            elif isinstance(b, ToolResult):
                call = by_bi[bi].call
                if call is None:
                    why = "duplicate result" if by_bi[bi].duplicate else "no matching call"
                    out.extend(context_blocks(b, why))
                else:
                    out.append(b if call.new_id == b.call_id else renamed_result(b, call.new_id))
            else:
                out.append(b)
        return out

    def answer_missing(self, groups: dict[int, list[_Call]], msg_positions: list[int]) -> None:
        """Tree layouts: a synthetic result after the turn of each unanswered call, except the calls of the
        last turn, which nothing but their own results follows: those are the running session's live calls
        (``validate.last_turn``, the rule eval's validity uses too)."""
        from .validate import last_turn  # (here: only a tree layout's unanswered calls need it)

        last = last_turn([self.msg(p) for p in msg_positions])
        live_from = msg_positions[last] if last >= 0 else -1
        for mpos, group in groups.items():
            if mpos >= live_from:
                continue
            mline = self.recs[mpos].line
            for c in group:
                if c.result is not None:
                    continue
                placed = ToolResult(call_id=c.new_id, content=[TextBlock(NO_RESPONSE)], name=c.block.name,
                                    synthetic=True)
                self.report("missing_result", mline,
                            f"call {c.new_id!r} ({c.block.name}) had no result; added {NO_RESPONSE!r}",
                            c.new_id)
                self.emit_after.setdefault(mpos, []).append(self.new_results([placed], mline))

    def turn_ends(self, msg_positions: list[int]) -> dict[int, int]:
        """Position of each assistant line -> position of the last line of its turn (split_turns only)."""
        ends: dict[int, int] = {}
        if not self.layout.split_turns:
            return ends
        run: list[int] = []
        for pos in msg_positions:
            msg = self.msg(pos)
            if msg.role == Role.ASSISTANT and not any(isinstance(b, ToolResult) for b in msg.blocks):
                run.append(pos)
                continue
            for p in run:
                ends[p] = run[-1]
            run = []
        for p in run:
            ends[p] = run[-1]
        return ends

    def rebuilt(self, pos: int, blocks: list[Block]) -> Record | None:
        """The record at ``pos`` with ``blocks``: itself when nothing changed, None when nothing is left."""
        rec = self.recs[pos]
        msg = self.msg(pos)
        if not blocks:
            return None
        if len(blocks) == len(msg.blocks) and all(a is b for a, b in zip(blocks, msg.blocks, strict=True)):
            return rec
        if msg.role == Role.TOOL and not any(isinstance(b, ToolResult) for b in blocks):
            self.report(
                "role_changed", rec.line, "tool message left without a tool result became a user message"
            )
            new_msg = user_message(msg, blocks)
        else:
            # content_was_string stays: formats write a string only for a lone text block anyway.
            new_msg = dataclasses.replace(msg, blocks=blocks)
        return dataclasses.replace(rec, message=new_msg, dirty=True)

    def new_results(self, placed: list[ToolResult], line: int) -> Record:
        role = self.layout.result_role
        synthetic = all(p.synthetic for p in placed)
        message = Message(
            role=role, blocks=list(placed), source_role=role.value, content_was_string=synthetic
        )
        return self.make(message, Origin.SYNTHETIC if synthetic else Origin.INPUT, line)

    def place_merged(self, mpos: int, group: list[_Call], placed: list[ToolResult], host: int | None) -> None:
        """One result message right after the call: the next message when it is of the result role (and holds
        some of these results, unless the layout alternates), its other blocks kept after the results; else
        a new message."""
        mline = self.recs[mpos].line
        # With alternation a following user message would be merged with the results anyway: put them
        # into it straight away (results first) rather than make a message only to merge it.
        if host is not None and (
            self.msg(host).role != self.layout.result_role
            or not (
                self.layout.alternate or any(c.result is not None and c.result.pos == host for c in group)
            )
        ):
            host = None
        for c in group:
            r = c.result
            if r is not None and r.pos != host:
                self.report(
                    "moved_result",
                    self.recs[r.pos].line,
                    f"result for call {c.new_id!r} moved next to its call at line {mline}",
                    c.new_id,
                )
        if host is None:
            self.emit_after[mpos] = [self.new_results(placed, mline)]
            return
        known = self.blocks_at.get(host)
        rest = list(self.msg(host).blocks) if known is None else known
        blocks: list[Block] = [*placed, *rest]
        # Results out of call order, or text before them, is a reorder of the blocks the host already had.
        own = {id(c.result.block): c for c in group if c.result is not None and c.result.pos == host}
        had = {id(b) for b in self.msg(host).blocks}
        kept_ids = (own.keys() | {id(b) for b in rest}) & had
        before = [id(b) for b in self.msg(host).blocks if id(b) in kept_ids]
        after = [id(c.result.block) if c.result is not None else 0 for c in group] + [id(b) for b in rest]
        if [i for i in after if i in kept_ids] != before:
            self.report(
                "reordered_blocks",
                self.recs[host].line,
                "tool results put first, in the order of the calls at line " + str(mline),
            )
        self.blocks_at[host] = blocks

    def place_each(
        self, mpos: int, group: list[_Call], placed: list[ToolResult], following: list[int]
    ) -> None:
        """One result message per call, in call order, right after the call. A message that holds exactly
        the one result is reused; when the reused messages already follow the call in order, they stay."""
        mline = self.recs[mpos].line
        role = self.layout.result_role
        sources: list[int | None] = []
        for c in group:
            r = c.result
            if r is not None and self.msg(r.pos).role == role and len(self.msg(r.pos).blocks) == 1:
                sources.append(r.pos)
            else:
                sources.append(None)
        window = following[: len(group)]
        in_place = sources == window
        for c, src, p in zip(group, sources, placed, strict=True):
            r = c.result
            if src is None:
                rec = self.new_results([p], mline)
            else:
                rec = self.recs[src]
                if p is not rec.message.blocks[0]:  # type: ignore[union-attr]
                    rec = dataclasses.replace(
                        rec, message=dataclasses.replace(self.msg(src), blocks=[p]), dirty=True
                    )
            if in_place:
                assert src is not None
                self.reused[src] = rec
                continue
            self.emit_after.setdefault(mpos, []).append(rec)
            if src is not None:
                self.reused[src] = None
            if r is not None and r.pos not in window:
                self.report(
                    "moved_result",
                    self.recs[r.pos].line,
                    f"result for call {c.new_id!r} moved next to its call at line {mline}",
                    c.new_id,
                )
        # Results that already followed the call but in another order than the calls'.
        stayed = [c.result.pos for c in group if c.result is not None and c.result.pos in window]
        if stayed != sorted(stayed):
            self.report("reordered_blocks", mline, "tool results put in the order of their calls")

    def fix_roles(self, out: list[Record]) -> list[Record]:
        """Alternating APIs: system only at the start, and the conversation opens with a user message."""
        fixed: list[Record] = []
        at_start = not self.carry.started
        first_seen = self.carry.started
        for rec in out:
            msg = rec.message
            if msg is None:
                fixed.append(rec)
                continue
            if msg.role == Role.SYSTEM:
                if not at_start:
                    self.report(
                        "role_changed",
                        self.line_of(rec),
                        "system message after the start became a user message",
                    )
                    marked = [dataclasses.replace(b, text=f"{MOVED_SYSTEM}\n{b.text}")
                              if isinstance(b, TextBlock) else b for b in msg.blocks]
                    rec = dataclasses.replace(rec, message=user_message(msg, marked), dirty=True)
                    msg = rec.message
                    assert msg is not None
                else:
                    fixed.append(rec)
                    continue
            at_start = False
            if not first_seen:
                first_seen = True
                if msg.role != Role.USER:
                    opener = Message(
                        role=Role.USER,
                        blocks=[TextBlock(CONTINUES)],
                        source_role=Role.USER.value,
                        content_was_string=True,
                    )
                    line = self.line_of(rec)
                    fixed.append(self.make(opener, Origin.SYNTHETIC, line))
                    self.report(
                        "inserted_message",
                        line,
                        f"the first message after the system prompt was {msg.role.value}, not user; "
                        f"added a user message {CONTINUES!r} before it",
                    )
            fixed.append(rec)
        return fixed

    def merge_runs(self, out: list[Record]) -> list[Record]:
        """Alternating APIs: consecutive messages of one role become one (lines without a message between
        them do not separate them: the API never sees those). Each run is merged once, in linear time."""
        runs: dict[int, list[Record]] = {}  # index in ``out`` of a run's first record -> its records
        head: int | None = None
        for i, rec in enumerate(out):
            msg = rec.message
            if msg is None:
                continue
            first = out[head].message if head is not None else None
            if head is None or first is None or first.role != msg.role:
                head = i
                runs[head] = [rec]
            else:
                runs[head].append(rec)
        merged: list[Record] = []
        for i, rec in enumerate(out):
            if rec.message is None:
                merged.append(rec)
            elif i in runs:
                merged.append(self.merge_run(runs[i]))
        return merged

    def merge_run(self, run: list[Record]) -> Record:
        first = run[0]
        if len(run) == 1:
            return first
        fm = first.message
        assert fm is not None
        blocks = [b for rec in run if rec.message is not None for b in rec.message.blocks]
        if fm.role == self.layout.result_role:
            blocks = results_first(blocks)
        for rec in run[1:]:
            self.report(
                "merged_messages",
                self.line_of(rec),
                f"consecutive {fm.role.value} messages merged into the one at line {self.line_of(first)}",
            )
        # The latest usage is the newest report of the prompt size; a run mixing input and made records
        # holds input.
        usage = next((r.usage for r in reversed(run) if r.usage is not None), None)
        origin = first.origin if all(r.origin == first.origin for r in run) else Origin.INPUT
        new_msg = dataclasses.replace(fm, blocks=blocks, content_was_string=False)
        rec = dataclasses.replace(first, message=new_msg, dirty=True, usage=usage, origin=origin)
        if id(first) in self.made_line:
            self.made_line[id(rec)] = self.made_line[id(first)]
        return rec

    def close(self, out: list[Record]) -> list[Record]:
        """Never end on a tool result: the API expects the assistant to have answered it."""
        last = next((r for r in reversed(out) if r.message is not None), None)
        if last is None or last.message is None or not ends_on_result(last.message, self.layout):
            return out
        reply = Message(
            role=Role.ASSISTANT,
            blocks=[TextBlock(UNDERSTOOD)],
            source_role=Role.ASSISTANT.value,
            content_was_string=True,
        )
        line = self.line_of(last)
        self.report("appended_reply", line, f"transcript ended on a tool result; appended {UNDERSTOOD!r}")
        return [*out, self.make(reply, Origin.SYNTHETIC, line)]

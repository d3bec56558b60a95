"""Strategy ``sliding-window``: ADK-style compaction events kept in the state
(docs/guides/strategies.md#sliding-window).

An *invocation* is a user request and everything up to the next one, or (where the format records one, as
ADK events do) the records sharing one ``meta["invocation_id"]``. Records before the first invocation (the
system prompt, session metadata) are the *preamble* and are never compacted. An invocation is *complete*
once a later one has begun; the latest invocation is still running, so the invocation trigger never
touches it.

Invocation trigger (θ = ``--invocation-threshold``, ω = ``--overlap``): while at least θ complete
invocations end after the last compacted record, the next θ of them form a block and the window from ω
invocations before the block's first through its last is summarized into one event. With θ=3, ω=1 the
events cover invocations 1-3, 3-6, 6-9 (google/adk-python's ``_run_compaction_for_sliding_window``). A
first run on a long transcript loops, so it records the same events as runs after every invocation.

Token trigger (ρ = ``--safety-ratio``): when the context is over ``ρ × window`` (or the threshold, if lower)
after that, one more event covers the uncompacted records up to a split point; the kept tail shrinks one
pair-safe split point at a time until the estimate fits, down to the latest request. If even that does not
fit, the outcome carries ``exit_code`` 5 and a warning.

Context rule (:func:`apply_events`): an event whose range lies inside a later event's range is hidden
(a roll-up replaced it). Every input record inside a visible event's range is dropped; each visible event's
summary is placed where its range begins, in order of start; everything else stays verbatim. So a record
appears at most once and every record is either verbatim or inside the range of a summary shown.

Summaries stay bounded: all visible summaries together get ``summary_budget`` tokens; when the room left
for a new event falls under a quarter of it, the new event becomes a roll-up that starts where the first
visible event starts and carries the summaries it replaces as prior context.
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import itertools
import math
from dataclasses import dataclass, field
from typing import Any

from ..budget import Budget
from ..clean import clean
from ..errors import ExitCode, UsageError
from ..facts.text import SUMMARY_MARKER, continuation_text, latest_request, typed_text
from ..facts.todos import load_todos_file, open_todos
from ..formats import get_format
from ..formats.base import new_record
from ..model import Origin, Record, Role, ToolCall, ToolResult, Transcript
from ..options import Options
from ..progress import progress
from ..state import Event, MaskedResult, State, make_fingerprint, reset_calibration
from ..summarizers.base import SummaryRequest, SummaryResult
from ..summarizers.fallback import summarize
from ..tokens import heuristic
from ..tokens.counts import count_records, text_cost
from .base import Outcome, StrategyInput, Written
from .mask import merge_masking
from .ranges import union_points, visible_events
from .tail import trim_in_place

NAME = "sliding-window"

#: meta key on the summary records this module writes; holds the records its events dropped
META_KEY = "sliding_window"
ACK_TEXT = "Understood."


# --------------------------------------------------------------------------------------------------
# Invocations and split points


@dataclass(slots=True)
class Invocation:
    number: int  # 1-based; 0 is the preamble
    start: int  # input index of its first record
    end: int  # input index after its last record (exclusive)
    id: str | None = None
    timestamp_start: Any = None
    timestamp_end: Any = None


def _anchor(rec: Record) -> bool:
    """A record read from the input at a known position (cleaning copies keep index and line)."""
    return rec.origin is Origin.INPUT and rec.index >= 0 and rec.line > 0


def _is_ours(rec: Record) -> bool:
    return rec.origin is Origin.SUMMARY and META_KEY in rec.meta


def _starts_invocation(rec: Record, uses_ids: bool, current_id: str | None) -> bool:
    if uses_ids:
        inv = rec.meta.get("invocation_id")
        return bool(inv) and inv != current_id
    return typed_text(rec) is not None


def invocations(records: list[Record]) -> list[Invocation]:
    """The invocations of ``records`` (input records in index order), preamble (number 0) first if any."""
    anchors = [r for r in records if _anchor(r)]
    if not anchors:
        return []
    uses_ids = any(r.meta.get("invocation_id") for r in anchors)
    out: list[Invocation] = []
    current: Invocation | None = None
    numbered = 0
    for rec in anchors:
        if _starts_invocation(rec, uses_ids, current.id if current is not None else None):
            numbered += 1
            current = Invocation(number=numbered, start=rec.index,
                                 end=rec.index + 1, id=rec.meta.get("invocation_id") if uses_ids else None)
            out.append(current)
        elif current is None:
            current = Invocation(number=0, start=rec.index, end=rec.index + 1)
            out.append(current)
        current.end = rec.index + 1
        ts = rec.meta.get("timestamp")
        if isinstance(ts, (int, float, str)) and not isinstance(ts, bool):
            if current.timestamp_start is None:
                current.timestamp_start = ts
            current.timestamp_end = ts
    return out


def _owner_index(records: list[Record]) -> list[int]:
    """Each record's input index; records made by cleaning belong to the input record before them."""
    out: list[int] = []
    last = -1
    for rec in records:
        if _anchor(rec):
            last = rec.index
        out.append(last)
    return out


def unsafe_splits(records: list[Record]) -> set[int]:
    """Split points p (compact indexes < p, keep >= p) that would separate a tool call from its result.

    Parallel calls are covered pair by pair. A call with no result in the input never blocks a split:
    cleaning answers it (a synthetic result travels with the call), so it can be compacted with it."""
    owners = _owner_index(records)
    calls: dict[str, int] = {}
    results: dict[str, int] = {}
    for rec, owner in zip(records, owners, strict=True):
        if rec.message is None or owner < 0:
            continue
        for b in rec.message.blocks:
            if isinstance(b, ToolCall):
                calls.setdefault(b.id, owner)
            elif isinstance(b, ToolResult) and not b.synthetic:
                results.setdefault(b.call_id, owner)
    spans: list[tuple[int, int]] = []
    for cid, ci in calls.items():
        ri = results.get(cid)
        if ri is None or ri == ci:
            continue
        spans.append((min(ci, ri) + 1, max(ci, ri) + 1))
    return union_points(spans)


def _safe_point(p: int, lo: int, hi: int, bad: set[int] | frozenset[int]) -> int:
    """The nearest safe split point to ``p`` within (lo, hi]: backward first, then forward."""
    q = p
    while q > lo and q in bad:
        q -= 1
    if q > lo:
        return q
    q = p
    while q <= hi and q in bad:
        q += 1
    return q if q <= hi else p


# --------------------------------------------------------------------------------------------------
# Planning


@dataclass(slots=True)
class Window:
    start: int
    end: int  # exclusive
    first: int  # first invocation number in the window
    last: int  # last invocation number (the window may end inside it for the token trigger)
    new_first: int  # first new invocation (start of the block)
    trigger: str  # "invocations" or "tokens"
    ids: list[str] = field(default_factory=list)
    timestamp_start: Any = None
    timestamp_end: Any = None

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"start": self.start, "end": self.end, "records": self.end - self.start,
                             "first_invocation": self.first, "last_invocation": self.last,
                             "invocations": self.last - self.first + 1, "trigger": self.trigger}
        if self.ids:
            d["invocation_ids"] = list(self.ids)
        return d


def _window(invs: list[Invocation], first_new: Invocation, end: int, last_no: int, omega: int,
            trigger: str) -> Window:
    # invocations are numbered 1, 2, … in order after the preamble: a number is its place in ``numbered``
    numbered = invs[1:] if invs and invs[0].number == 0 else invs
    pos = first_new.number - 1
    first = numbered[max(0, pos - omega)]
    inside = numbered[first.number - 1:last_no]
    return Window(start=first.start, end=end, first=first.number, last=last_no, new_first=first_new.number,
                  trigger=trigger, ids=[i.id for i in inside if i.id],
                  timestamp_start=inside[0].timestamp_start if inside else None,
                  timestamp_end=inside[-1].timestamp_end if inside else None)


def plan_invocation_windows(invs: list[Invocation], covered_end: int, theta: int, omega: int,
                            bad: set[int] | frozenset[int] = frozenset()) -> list[Window]:
    """Every event the invocation trigger makes now, oldest first (see the module docstring)."""
    numbered = [i for i in invs if i.number > 0]
    complete = numbered[:-1]
    out: list[Window] = []
    new = [i for i in complete if i.end > covered_end]
    at = 0  # new[at:] are the invocations not yet in a window (one pass, not a new list per window)
    while len(new) - at >= theta:
        block = new[at:at + theta]
        end = block[-1].end
        if end in bad:  # a call answered after the next request began: keep the pair together
            end = _safe_point(end, max(covered_end, block[0].start), numbered[-1].start, bad)
        w = _window(invs, block[0], end, block[-1].number, omega, "invocations")
        out.append(w)
        covered_end = w.end
        at += theta
        while at < len(new) and new[at].end <= covered_end:
            at += 1
    return out


def _validate(opts: Options) -> None:
    if opts.invocation_threshold < 1:
        raise UsageError("--invocation-threshold must be 1 or more")
    if opts.overlap < 0:
        raise UsageError("--overlap must be 0 or more")
    if not 0 < opts.safety_ratio <= 1:
        raise UsageError("--safety-ratio must be more than 0 and at most 1")


def token_limit(budget: Budget, ratio: float) -> int:
    """Where the token trigger fires: ρ × window, or the threshold when that is lower."""
    limit = math.floor(ratio * budget.window)
    if budget.threshold:
        limit = min(limit, budget.threshold)
    return limit


# --------------------------------------------------------------------------------------------------
# The context: events applied


def apply_events(records: list[Record], state: State, fmt_name: str) -> list[Record]:
    """Replace each visible event's range by its summary (the rule in the module docstring).

    Events whose range ends at or before the watermark are covered by the threshold summary instead. The
    records dropped are kept on the summary records' meta, so the strategy can summarize an overlap
    again without re-reading the input."""
    events = state.events
    order = [i for i in visible_events(events) if events[i].end > state.watermark]
    if not order:
        return records
    fmt = get_format(fmt_name)
    dropped: list[Record] = []
    out: list[Record] = []
    pending = collections.deque(order)
    # the visible ranges merged: whether an index is covered is one bisect (not a scan of every event)
    merged: list[list[int]] = []
    for i in order:  # ordered by start
        e = events[i]
        if merged and e.start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e.end)
        elif e.start < e.end:
            merged.append([e.start, e.end])
    merged_starts = [m[0] for m in merged]
    last_dropped = False
    for rec in records:
        if _is_ours(rec):
            continue  # an earlier rendering; regenerated below
        if _anchor(rec):
            while pending and events[pending[0]].start <= rec.index:
                out.extend(_summary_records(fmt, events[pending.popleft()], [], dropped))
            k = bisect.bisect_right(merged_starts, rec.index) - 1
            covered = k >= 0 and rec.index < merged[k][1]
            last_dropped = covered and (rec.message is None or rec.message.role is not Role.SYSTEM)
            if last_dropped:
                dropped.append(rec)
                continue
        elif last_dropped and rec.origin is Origin.SYNTHETIC:
            continue  # cleaning's answer to a call that is now summarized
        out.append(rec)
    for i in pending:
        out.extend(_summary_records(fmt, events[i], [], dropped))
    if fmt.layout.alternate:
        out = _alternate(out, fmt)
    return out


def _summary_records(fmt: Any, event: Event, _rest: list[int], dropped: list[Record]) -> list[Record]:
    text = event.summary if event.summary.startswith(SUMMARY_MARKER) else f"{SUMMARY_MARKER}\n{event.summary}"
    # "covers": the input records it stands for, which a format writing events needs (ADK's time range)
    meta = {META_KEY: {"start": event.start, "end": event.end, "dropped": dropped},
            "covers": (event.start, event.end)}
    if fmt.layout.agent_log:
        # an agent's own log (Claude Code, Codex) gets the summary as the threshold output writes it: the
        # agent's own opening, the summary, the closing continuation
        made = fmt.summary_records(text, continuation_text(None))
        return [dataclasses.replace(r, meta={**r.meta, **meta}) for r in made]
    return [new_record(fmt.make_message(Role.USER, text), Origin.SUMMARY, meta)]


def _alternate(records: list[Record], fmt: Any) -> list[Record]:
    """Alternating layouts: an assistant acknowledgement after a summary that a user message follows, so
    cleaning never merges a summary into the user's next request."""
    out: list[Record] = []
    nxt_at: list[Record | None] = [None] * len(records)  # the next record with a message, from the right
    following: Record | None = None
    for i in range(len(records) - 1, -1, -1):
        nxt_at[i] = following
        if records[i].message is not None:
            following = records[i]
    for i, rec in enumerate(records):
        out.append(rec)
        if not _is_ours(rec) or rec.message is None or rec.message.role is not Role.USER:
            continue
        nxt = nxt_at[i]
        if nxt is not None and nxt.message is not None and nxt.message.role is Role.USER:
            out.append(new_record(fmt.make_message(Role.ASSISTANT, ACK_TEXT), Origin.SUMMARY,
                                  {META_KEY: {"ack": True}}))
    return out


def _view(records: list[Record]) -> list[Record]:
    """Every input record known: the context's and those the events dropped, in input order."""
    by_index: dict[int, Record] = {}
    for rec in records:
        if _is_ours(rec):
            for d in rec.meta[META_KEY].get("dropped", []):
                by_index.setdefault(d.index, d)
    out: list[Record] = []
    extra = sorted(by_index.values(), key=lambda r: r.index)
    j = 0
    for rec in records:
        if _is_ours(rec) or rec.origin in (Origin.SUMMARY, Origin.CONTINUATION):
            continue
        if _anchor(rec):
            while j < len(extra) and extra[j].index < rec.index:
                out.append(extra[j])
                j += 1
            while j < len(extra) and extra[j].index == rec.index:
                j += 1
        out.append(rec)
    out.extend(extra[j:])
    return out


# --------------------------------------------------------------------------------------------------
# apply


def _commit(state: State, written: Written, new_events: list[Event], end: int, end_offset: int,
            end_length: int) -> None:
    """Append the new events and fingerprint the input through the last event's end."""
    state.events.extend(new_events)
    if state.watermark == 0 and end_offset >= 0:
        data = written.data
        nl = data.find(b"\n", end_offset + end_length)
        nbytes = len(data) if nl < 0 else nl + 1
        ctx = written.ctx
        state.fingerprint = make_fingerprint(
            data, records=end, nbytes=nbytes, format=ctx.input_format,
            lines=data.count(b"\n", 0, nbytes) + (0 if nl >= 0 else 1),
            system_lines=[(o, n) for o, n in ctx.system_spans if o + n <= nbytes])
    # the factor measured on the large request must not scale the compacted one
    reset_calibration(state)


def _summarize(si: StrategyInput, records: list[Record], budget_tokens: int, prior: str | None,
               prior_facts: dict[str, Any] | None) -> SummaryResult:
    opts = si.opts
    body = [r for r in records if r.origin not in (Origin.SUMMARY, Origin.CONTINUATION)
            and not (r.message is not None and r.message.role is Role.SYSTEM)]
    request = SummaryRequest(records=body, budget_tokens=budget_tokens, prior_summary=prior,
                             prior_facts=prior_facts, latest_request=latest_request(body),
                             todos=load_todos_file(opts.todos_file) if opts.todos_file else open_todos(body),
                             instructions=opts.instructions, cost=text_cost(opts, si.report.calibrated))
    return summarize(request, opts, si.warn)


class _Planner:
    """Makes the events of one run, keeping the visible summaries within their shared budget."""

    def __init__(self, si: StrategyInput, view: list[Record]) -> None:
        self.si = si
        self.view = view
        self.events: list[Event] = list(si.state.events) if si.state is not None else []
        # the visible events, kept as events are added (a new event hides those it contains; a hidden one
        # never shows again): recomputing them at every window made a long first run quadratic
        self.visible: list[Event] = [self.events[i] for i in visible_events(self.events)]
        self.new: list[Event] = []
        self.summaries: list[SummaryResult] = []
        self.windows: list[Window] = []
        self.cap = max(1, si.budget.summary_budget)
        self.cost = text_cost(si.opts, si.report.calibrated)  # as the window counts (the summaries' fit)
        self._costs: dict[str, int] = {}  # each visible summary counted once, not at every window
        owners = _owner_index(view)
        # owners never decrease along the view (input order): a window's records are one bisected slice
        self.owners = owners if all(a <= b for a, b in itertools.pairwise(owners)) else None
        self._prefix: list[int] | None = None
        self.rollup_facts: dict[int, dict[str, Any]] = {}  # the facts of each roll-up made in this run
        self.trimmed: list[MaskedResult] = []  # in-flight results trimmed to fit (_trim_in_flight)

    def _cost_of(self, summary: str) -> int:
        if summary not in self._costs:
            self._costs[summary] = self.cost(summary)
        return self._costs[summary]

    def _between(self, start: int, end: int) -> list[Record]:
        """The view's records owned by input indexes ``start`` ≤ owner < ``end``."""
        owners = self.owners
        if owners is None:
            return [r for r, o in zip(self.view, _owner_index(self.view), strict=True) if start <= o < end]
        return self.view[bisect.bisect_left(owners, start):bisect.bisect_left(owners, end)]

    def _tokens_between(self, start: int, end: int) -> int:
        """The heuristic tokens of the view's records owned by ``start`` ≤ owner < ``end`` (prefix sums,
        built once: a roll-up's range reaches back to the first event)."""
        if self.owners is None:
            return sum(heuristic.message_tokens(r.message) for r in self._between(start, end)
                       if r.message is not None)
        if self._prefix is None:
            self._prefix = list(itertools.accumulate(
                (heuristic.message_tokens(r.message) if r.message is not None else 0 for r in self.view),
                initial=0))
        lo, hi = bisect.bisect_left(self.owners, start), bisect.bisect_left(self.owners, end)
        return self._prefix[hi] - self._prefix[lo]

    def make(self, w: Window) -> None:
        vis = [e for e in self.visible if e.end > self.si.ctx.covered]
        used = sum(self._cost_of(e.summary) for e in vis)
        room = self.cap - used
        prior: str | None = None
        start = w.start
        read_from = w.start
        facts = None
        if room < self.cap / 4 and vis:
            # roll-up: one event from the first visible one's start, carrying the summaries it replaces
            start = min(w.start, min(e.start for e in vis))
            prior = "\n\n".join(e.summary for e in vis if e.start >= start)
            room = self.cap
            read_from = start
            facts = self.si.state.summary.facts if self.si.state and self.si.state.summary else None
            first = min(vis, key=lambda e: (e.start, -e.end))
            carried = self.rollup_facts.get(id(first))
            if first.start == start and carried is not None:
                # a roll-up of this run starts there: its facts hold what it covered, so only the records
                # after it are read again (re-reading from the first event at every roll-up made a long
                # session's first run quadratic)
                read_from, facts = first.end, carried
        records = self._between(read_from, w.end)
        summary = _summarize(self.si, records, room, prior, facts)
        original = self._tokens_between(start, w.end)
        compacted = heuristic.text_tokens(summary.text)
        ev = Event(start=start, end=w.end, invocations=w.last - w.first + 1,
                   records=w.end - start, original_tokens=original, compacted_tokens=compacted,
                   ratio=round(original / compacted, 3) if compacted else 0.0, summary=summary.text,
                   summarizer=summary.summarizer, fallback=summary.fallback,
                   start_timestamp=w.timestamp_start, end_timestamp=w.timestamp_end, model=summary.model,
                   first_invocation=w.first, last_invocation=w.last, invocation_ids=list(w.ids) or None)
        w.start = start
        if prior is not None and summary.facts is not None:
            self.rollup_facts[id(ev)] = summary.facts
        self.events.append(ev)
        shown = [e for e in self.visible if not (ev.start <= e.start and e.end <= ev.end)]
        self.visible = sorted([*shown, ev], key=lambda e: (e.start, e.end))
        self.new.append(ev)
        self.summaries.append(summary)
        self.windows.append(w)


def _render(si: StrategyInput, events: list[Event]) -> Transcript:
    ctx = si.ctx
    shadow = State(watermark=ctx.covered, events=events)
    recs = apply_events(list(ctx.transcript.records), shadow, ctx.transcript.format)
    t = Transcript(format=ctx.transcript.format, records=recs, source=ctx.transcript.source)
    return clean(t).transcript


def _estimate(si: StrategyInput, t: Transcript) -> tuple[int, list[int]]:
    """Tokens of a compacted context as the provider will count it (``Calibrated.project``)."""
    counts = count_records(t.records, si.opts)
    return si.report.calibrated.project(sum(counts.base)), counts.base


def _state_of(si: StrategyInput) -> tuple[list[Record], list[Invocation], int, set[int]]:
    view = _view(si.ctx.transcript.records)
    invs = invocations(view)
    events = si.state.events if si.state is not None else []
    covered_end = max([e.end for e in events] + [si.ctx.covered])
    return view, invs, covered_end, unsafe_splits(view)


def apply(si: StrategyInput) -> Outcome | None:
    """Make the events that are due; None when nothing is (the transcript passes through)."""
    _validate(si.opts)
    if si.budget.threshold is None:
        return None  # --threshold 0 disables compaction
    view, invs, covered_end, bad = _state_of(si)
    planner = _Planner(si, view)
    with progress(f"summarizing with {si.opts.summarizer}"):
        theta, omega = si.opts.invocation_threshold, si.opts.overlap
        for w in plan_invocation_windows(invs, covered_end, theta, omega, bad):
            planner.make(w)
        limit = token_limit(si.budget, si.opts.safety_ratio)
        active = si.report.calibrated.tokens
        t = si.ctx.transcript
        if planner.new:
            t = _render(si, planner.events)
            active, _ = _estimate(si, t)
        warnings: list[str] = []
        code = ExitCode.OK
        if active > limit:
            t, code, warnings = _token_event(si, planner, invs, bad, t, limit)
    if not planner.new:
        if code is ExitCode.OK:
            return None
        t = si.ctx.transcript
    last = max(planner.events, key=lambda e: e.end) if planner.events else None
    end_rec = _record_at(view, last.end - 1) if last is not None else None
    known = end_rec is not None and end_rec.raw is not None
    end = last.end if last is not None else 0
    end_offset = end_rec.offset if known and end_rec is not None else -1
    end_length = len(end_rec.raw) if known and end_rec is not None and end_rec.raw is not None else 0
    new_events = planner.new
    summary = planner.summaries[-1] if planner.summaries else None
    durations = [x.duration_s for x in planner.summaries]

    def commit(state: State, written: Written, trimmed: list[MaskedResult] = planner.trimmed) -> None:
        _commit(state, written, new_events, end, end_offset, end_length)
        if trimmed:  # the work in flight's trimmed results stay trimmed (every strategy reapplies masking)
            state.masking = merge_masking(state.masking, trimmed, input_records=trimmed[0].index,
                                          thinking_before=0)

    return Outcome(strategy=NAME, transcript=t, compacted=bool(new_events), commit=commit, summary=summary,
                   covered=sum(e.records for e in new_events), fallback=any(e.fallback for e in new_events),
                   duration_s=sum(durations), exit_code=code, warnings=warnings)


def _record_at(view: list[Record], index: int) -> Record | None:
    for rec in view:
        if _anchor(rec) and rec.index == index:
            return rec
    return None


def _token_event(si: StrategyInput, planner: _Planner, invs: list[Invocation], bad: set[int], t: Transcript,
                 limit: int) -> tuple[Transcript, ExitCode, list[str]]:
    """Compact the uncompacted records up to the first split point at which the rest fits."""
    numbered = [i for i in invs if i.number > 0]
    covered_end = max([e.end for e in planner.events] + [si.ctx.covered])
    if not numbered:
        return t, _fits_window(si, t), [_over(limit, "no user request to keep; nothing can be compacted")]
    latest = numbered[-1]
    if latest.start <= covered_end:
        return t, _fits_window(si, t), [_over(limit, "only the latest request remains verbatim")]
    anchors = sorted({r.index for r in planner.view if _anchor(r) and covered_end < r.index <= latest.start})
    candidates = [p for p in anchors if p not in bad]
    if latest.start not in candidates:
        candidates.append(latest.start)
    first_new = next(i for i in numbered if i.end > covered_end)
    # the new summary costs at most its budget; everything kept from p on costs what it costs now
    tail_cost = _tail_costs(si, t)
    fixed = sum(c for idx, c in tail_cost if idx < 0)
    # what is kept from each split point on: suffix sums over the owners, one bisect per candidate
    owned = sorted((idx, c) for idx, c in tail_cost if idx >= 0)
    owned_at = [idx for idx, _ in owned]
    suffix = list(itertools.accumulate(reversed([c for _, c in owned]), initial=0))[::-1]
    chosen = candidates[-1]
    for p in candidates:
        kept = suffix[bisect.bisect_left(owned_at, p)]
        if si.report.calibrated.project(fixed + kept + si.budget.summary_budget) <= limit:
            chosen = p
            break
    before = bisect.bisect_left([i.start for i in numbered], chosen)  # invocations that start before it
    if not before:
        # the first split point that fits is the first request itself: there is nothing to compact yet
        return t, _fits_window(si, t), [_over(limit, "no complete invocation before the split point")]
    last_no = numbered[before - 1].number
    w = _window(invs, first_new, chosen, last_no, si.opts.overlap, "tokens")
    planner.make(w)
    t = _render(si, planner.events)
    tokens, _ = _estimate(si, t)
    if tokens <= limit:
        return t, ExitCode.OK, []
    t, tokens = _trim_in_flight(si, planner, t, tokens)
    if tokens <= limit:
        return t, ExitCode.OK, []
    if tokens > si.budget.window:
        return t, ExitCode.DOES_NOT_FIT, [
            f"the context is still {tokens:,} tokens after compacting everything before the latest request, "
            f"more than the {si.budget.window:,}-token window: the latest request and what followed it "
            "are too large to keep"]
    return t, ExitCode.OK, [_over(limit, f"the context is still {tokens:,} tokens, kept down to the latest "
                                         "request")]


def _trim_in_flight(si: StrategyInput, planner: _Planner, t: Transcript, n: int) -> tuple[Transcript, int]:
    """Still over with all before the latest request compacted: the work in flight's results are trimmed as
    the threshold strategy trims its tail (``tail.trim_in_place``); the state's masking keeps them so."""
    records, trimmed = trim_in_place(t.records, si.budget, si.ctx.transcript.source)
    planner.trimmed.extend(trimmed)
    return (t, n) if not trimmed else (t := dataclasses.replace(t, records=records), _estimate(si, t)[0])


def _over(limit: int, why: str) -> str:
    return f"sliding-window: over the token trigger of {limit:,} tokens; {why}"


def _fits_window(si: StrategyInput, t: Transcript) -> ExitCode:
    return ExitCode.DOES_NOT_FIT if si.report.calibrated.tokens > si.budget.window else ExitCode.OK


def _tail_costs(si: StrategyInput, t: Transcript) -> list[tuple[int, int]]:
    """(owner input index, tokens) per record of the context; -1 for what no split can remove (system
    records, the preamble's records and the summaries)."""
    counts = count_records(t.records, si.opts).base
    out: list[tuple[int, int]] = []
    owners = _owner_index(t.records)
    for rec, owner, c in zip(t.records, owners, counts, strict=True):
        if rec.origin in (Origin.SUMMARY, Origin.CONTINUATION) or owner < 0 or (
                rec.message is not None and rec.message.role is Role.SYSTEM):
            out.append((-1, c))
        else:
            out.append((owner, c))
    return out


# --------------------------------------------------------------------------------------------------
# describe (estimate --json)


def describe(si: StrategyInput) -> dict[str, Any]:
    """What the strategy would do now: the next event's range and the token trigger's state."""
    _validate(si.opts)
    _, invs, covered_end, bad = _state_of(si)
    numbered = [i for i in invs if i.number > 0]
    theta, omega = si.opts.invocation_threshold, si.opts.overlap
    windows = plan_invocation_windows(invs, covered_end, theta, omega, bad)
    new = [i for i in numbered[:-1] if i.end > covered_end]
    nxt: dict[str, Any] | None
    if windows:
        nxt = {"due": True, **windows[0].to_json()}
    else:
        first_new = next((i for i in numbered if i.end > covered_end), None)
        if first_new is None:
            nxt = None
        else:
            w = _window(invs, first_new, first_new.end, first_new.number, omega, "invocations")
            nxt = {"due": False, "start": w.start, "end": None, "first_invocation": w.first,
                   "last_invocation": first_new.number + theta - 1,
                   "invocations_needed": theta - len(new)}
    limit = token_limit(si.budget, si.opts.safety_ratio)
    events = si.state.events if si.state is not None else []
    fires = si.budget.threshold is not None and si.report.calibrated.tokens > limit
    return {"would_compact": si.budget.threshold is not None and (bool(windows) or fires), "sliding_window": {
        "invocation_threshold": theta,
        "overlap": omega,
        "safety_ratio": si.opts.safety_ratio,
        "invocations": len(numbered),
        "complete_invocations": max(0, len(numbered) - 1),
        "new_invocations": len(new),
        "events": len(events),
        "covered_through": covered_end,
        "events_due": [w.to_json() for w in windows],
        "next_event": nxt,
        "token_trigger": {"limit": limit, "tokens": si.report.calibrated.tokens, "fires": fires},
    }}


class SlidingWindowStrategy:
    name = NAME
    state_layer = 1  # events first: masking applies to the records they keep

    def reapply(self, records: list[Record], state: State, fmt_name: str) -> list[Record]:
        return apply_events(records, state, fmt_name) if state.events else records

    def describe(self, si: StrategyInput) -> dict[str, Any]:
        return describe(si)

    def estimate_needs_context(self, opts: Options) -> bool:
        return True

    def apply(self, si: StrategyInput) -> Outcome | None:
        return apply(si)


STRATEGY = SlidingWindowStrategy()

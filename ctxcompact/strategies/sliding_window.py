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


import bisect
import dataclasses
import itertools
import math
from collections.abc import Callable
from typing import Any

from ..budget import Budget
from ..errors import ExitCode
from ..facts.text import latest_request
from ..facts.todos import load_todos_file, open_todos
from ..formats import get_format
from ..model import Origin, Record, Role
from ..options import Options, check_options
from ..progress import progress
from ..state import State, line_end, make_fingerprint, reset_calibration
from ..summarizers.base import SummaryRequest, SummaryResult
from ..tokens import heuristic
from ..tokens.counts import text_cost
from .base import Outcome, StrategyInput, Written
from .events import apply_events, events_each
from .invocations import (
    Invocation,
    Window,
    make_window,
    plan_invocation_windows,
)
from .mask import merge_masking
from .masking_state import MaskedResult, Masking
from .ranges import visible_events
from .sliding_window_input import HeldInput, Quiet, Rendered, WindowInput, window_input
from .sliding_window_state import Event, WindowEvents
from .tail import trim_in_place

NAME = "sliding-window"


def _validate(opts: Options) -> None:
    """Its options' ranges, declared with them (the one rule, also for callers the engine does not check)."""
    check_options(opts)


def token_limit(budget: Budget, ratio: float) -> int:
    """Where the token trigger fires: ρ × window, or the threshold when that is lower."""
    limit = math.floor(ratio * budget.window)
    if budget.threshold:
        limit = min(limit, budget.threshold)
    return limit



# --------------------------------------------------------------------------------------------------
# apply


def _commit(state: State, written: Written, new_events: list[Event], end: int, end_offset: int,
            end_length: int, end_line: int) -> None:
    """Append the new events and fingerprint the input through the last event's end: the line of its last
    record (``end_offset``, ``end_length``, its physical line ``end_line``), in the input held or the file
    a streamed run read (``state.line_end`` finds the line's end either way)."""
    own = state.section(WindowEvents) or WindowEvents()
    own.events.extend(new_events)
    state.set_section(own)
    if state.watermark == 0 and end_offset >= 0:
        nbytes = line_end(written.data, end_offset + end_length)
        ctx = written.ctx
        # (a record's raw is one line without its ending: the lines through it are its own line number)
        state.fingerprint = make_fingerprint(
            written.data, records=end, nbytes=nbytes, format=ctx.input_format, lines=end_line,
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
                             instructions=opts.instructions, cost=text_cost(opts, si.report.calibrated),
                             client_files=get_format(opts.to or si.ctx.transcript.format).client_files)
    # imported here: every run loads this module to re-apply the state's events (strategies.reapply_all), and
    # a run below the threshold must not load the summarizers (tests/cli/test_startup_imports.py)
    from ..summarizers.fallback import summarize

    return summarize(request, opts, si.warn)


class _Planner:
    """Makes the events of one run, keeping the visible summaries within their shared budget."""

    def __init__(self, si: StrategyInput, inp: WindowInput) -> None:
        self.si = si
        self.inp = inp
        self.events: list[Event] = list(_events(si.state))
        # the visible events, kept as events are added (a new event hides those it contains; a hidden one
        # never shows again): recomputing them at every window made a long first run quadratic
        self.visible: list[Event] = [self.events[i] for i in visible_events(self.events)]
        self.new: list[Event] = []
        # the newest summary and every summary's duration: a summary holds the facts of all it covers, and
        # keeping each one made a long first run's memory grow with events × facts
        self.last_summary: SummaryResult | None = None
        self.durations: list[float] = []
        self.windows: list[Window] = []
        self.cap = max(1, si.budget.summary_budget)
        self.cost = text_cost(si.opts, si.report.calibrated)  # as the window counts (the summaries' fit)
        self._costs: dict[str, int] = {}  # each visible summary counted once, not at every window
        # the facts of the visible roll-ups made in this run (a hidden one is never carried again)
        self.rollup_facts: dict[int, dict[str, Any]] = {}
        self.trimmed: list[MaskedResult] = []  # in-flight results trimmed to fit (_trim_in_flight)

    def _cost_of(self, summary: str) -> int:
        if summary not in self._costs:
            self._costs[summary] = self.cost(summary)
        return self._costs[summary]

    def make(self, w: Window, inside_latest: bool = False) -> None:
        """Summarize ``w`` into a new event. ``inside_latest``: ``w`` is the older part of the latest
        request's own records (the request itself stays before it): never a roll-up, which would take the
        request in; it replaces the events inside its range and has at least a quarter of the budget."""
        vis = [e for e in self.visible if e.end > self.si.ctx.covered]
        if inside_latest:
            vis = [e for e in vis if not (w.start <= e.start and e.end <= w.end)]
        used = sum(self._cost_of(e.summary) for e in vis)
        room = self.cap - used
        prior: str | None = None
        start = w.start
        read_from = w.start
        facts = None
        if inside_latest:
            room = max(room, self.cap // 4)
        elif room < self.cap / 4 and vis:
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
        records = self.inp.between(read_from, w.end)
        summary = _summarize(self.si, records, room, prior, facts)
        original = self.inp.tokens_between(start, w.end)
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
        kept = self.rollup_facts
        self.rollup_facts = {id(e): kept[id(e)] for e in self.visible if id(e) in kept}
        self.new.append(ev)
        self.last_summary = summary
        self.durations.append(summary.duration_s)
        self.windows.append(w)


def _events(state: State | None) -> list[Event]:
    """The events earlier runs made (the state's :class:`WindowEvents`), oldest first."""
    own = state.section(WindowEvents) if state is not None else None
    return own.events if own is not None else []


def _covered_end(si: StrategyInput) -> int:
    """Where the records no event or summary covers begin."""
    return max([e.end for e in _events(si.state)] + [si.ctx.covered])


def apply(si: StrategyInput) -> Outcome | None:
    """Make the events that are due; None when nothing is (the transcript passes through)."""
    _validate(si.opts)
    if si.budget.threshold is None:
        return None  # --threshold 0 disables compaction
    inp = window_input(si)
    invs, covered_end, bad = inp.invocations, _covered_end(si), inp.unsafe
    planner = _Planner(si, inp)
    with progress(f"summarizing with {si.opts.summarizer}"):
        theta, omega = si.opts.invocation_threshold, si.opts.overlap
        for w in plan_invocation_windows(invs, covered_end, theta, omega, bad):
            planner.make(w)
        limit = token_limit(si.budget, si.opts.safety_ratio)
        active = si.report.calibrated.tokens
        r: Rendered | None = None  # (None: the context as read, rendered only when read)
        if planner.new:
            r = inp.render(planner.events)
            active = r.tokens
        warnings: list[str] = []
        code = ExitCode.OK
        if active > limit:
            r, code, warnings = _token_event(si, planner, invs, bad, r or inp.context(), limit)
    if not planner.new and not planner.trimmed:  # trimming the work in flight alone is a compaction too
        if code is ExitCode.OK:
            return None
        r = inp.context()
    assert r is not None
    t = r.transcript
    last = max(planner.events, key=lambda e: e.end) if planner.events else None
    end_rec = inp.record_at(last.end - 1) if last is not None else None
    known = end_rec is not None and end_rec.raw is not None
    end = last.end if last is not None else 0
    end_offset = end_rec.offset if known and end_rec is not None else -1
    end_length = len(end_rec.raw) if known and end_rec is not None and end_rec.raw is not None else 0
    end_line = end_rec.line if known and end_rec is not None else 0
    new_events = planner.new
    summary = planner.last_summary
    durations = planner.durations

    def commit(state: State, written: Written, trimmed: list[MaskedResult] = planner.trimmed) -> None:
        _commit(state, written, new_events, end, end_offset, end_length, end_line)
        if trimmed:  # the work in flight's trimmed results stay trimmed (every strategy reapplies masking)
            state.set_section(merge_masking(state.section(Masking), trimmed, input_records=trimmed[0].index,
                                            thinking_before=0))

    return Outcome(strategy=NAME, transcript=t, compacted=bool(new_events or planner.trimmed), commit=commit,
                   summary=summary,
                   covered=sum(e.records for e in new_events), fallback=any(e.fallback for e in new_events),
                   duration_s=sum(durations), exit_code=code, warnings=warnings)


def _token_event(si: StrategyInput, planner: _Planner, invs: list[Invocation], bad: set[int], r: Rendered,
                 limit: int) -> tuple[Rendered, ExitCode, list[str]]:
    """Compact the uncompacted records up to the first split point at which the rest fits."""
    numbered = [i for i in invs if i.number > 0]
    covered_end = max([e.end for e in planner.events] + [si.ctx.covered])
    if not numbered:
        return r, _fits_window(si), [_over(limit, "no user request to keep; nothing can be compacted")]
    latest = numbered[-1]
    if latest.start <= covered_end:
        return _inside_or_over(si, planner, latest, bad, r, limit, "only the latest request remains verbatim")
    candidates = [p for p in planner.inp.anchors(covered_end, latest.start) if p not in bad]
    if latest.start not in candidates:
        candidates.append(latest.start)
    first_new = next(i for i in numbered if i.end > covered_end)
    # the new summary costs at most its budget; everything kept from p on costs what it costs now
    tail_cost = r.costs()
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
        # the first split point that fits is the first request itself: nothing before it to compact
        return _inside_or_over(si, planner, latest, bad, r, limit,
                               "no complete invocation before the split point")
    last_no = numbered[before - 1].number
    w = make_window(invs, first_new, chosen, last_no, si.opts.overlap, "tokens")
    planner.make(w)
    r = planner.inp.render(planner.events)
    tokens = r.tokens
    if tokens <= limit:
        return r, ExitCode.OK, []
    return _inside_latest_then_trim(si, planner, latest, bad, r, tokens, limit)


def _inside_or_over(si: StrategyInput, planner: _Planner, latest: Invocation, bad: set[int], r: Rendered,
                    limit: int, why: str) -> tuple[Rendered, ExitCode, list[str]]:
    """Nothing before the latest request is left to compact: compact the older part of its own records
    (:func:`_inside_latest`) and trim the work in flight, or say why the context stays over the trigger."""
    tokens = r.tokens
    made = _inside_latest(si, planner, latest, bad, r, tokens, limit)
    out = _inside_latest_then_trim(si, planner, latest, bad, r, tokens, limit, compacted=True)
    if made is None and not planner.trimmed:
        return r, _fits_window(si), [_over(limit, why)]
    return out


def _inside_latest_then_trim(si: StrategyInput, planner: _Planner, latest: Invocation, bad: set[int],
                             r: Rendered, tokens: int, limit: int,
                             compacted: bool = False) -> tuple[Rendered, ExitCode, list[str]]:
    """Over the trigger with everything before the latest request compacted: the older part of its own
    records is summarized (:func:`_inside_latest`), then the work in flight's results are trimmed."""
    if not compacted and tokens > limit:
        _inside_latest(si, planner, latest, bad, r, tokens, limit)
    if planner.new:
        r = planner.inp.render(planner.events)
        tokens = r.tokens
    if tokens <= limit:
        return r, ExitCode.OK, []
    r, tokens = _trim_in_flight(si, planner, r, tokens)
    if tokens <= limit:
        return r, ExitCode.OK, []
    if tokens > si.budget.window:
        return r, ExitCode.DOES_NOT_FIT, [
            f"the context is still {tokens:,} tokens after compacting everything before the latest request, "
            f"more than the {si.budget.window:,}-token window: the latest request and what followed it "
            "are too large to keep"]
    return r, ExitCode.OK, [_over(limit, f"the context is still {tokens:,} tokens, kept down to the latest "
                                         "request")]


def _inside_latest(si: StrategyInput, planner: _Planner, latest: Invocation, bad: set[int], r: Rendered,
                   tokens: int, limit: int) -> Event | None:
    """The latest request's invocation alone is over the trigger (a Codex session can be one request and
    hours of tool calls): one event summarizes its records after the request up to a split point, the fewest
    that make the rest fit (all it may take if none does), so the request stays verbatim before the summary
    and the work in flight (the last assistant turn and its results, :func:`~..facts.handoff.in_flight_start`;
    else the last record) after it. A split point never separates a tool call from its result. None when
    there is nothing to take (docs/guides/strategies.md#sliding-window)."""
    inp = planner.inp
    after = inp.anchors(latest.start, None)
    if len(after) < 2 or after[0] in bad:
        return None
    at = inp.in_flight()
    stop = at if at is not None else after[-1]
    candidates = [p for p in after if after[0] < p <= stop and p not in bad]
    if not candidates:
        return None
    first = after[0]
    costs = r.costs()
    fixed = sum(c for idx, c in costs if idx < first)  # system, summaries, everything up to the request
    owned = sorted((idx, c) for idx, c in costs if idx >= first)
    owned_at = [idx for idx, _ in owned]
    suffix = list(itertools.accumulate(reversed([c for _, c in owned]), initial=0))[::-1]
    room = max(planner.cap // 4, 1)
    chosen = next((p for p in candidates
                   if si.report.calibrated.project(fixed + suffix[bisect.bisect_left(owned_at, p)] + room)
                   <= limit * 3 // 4), candidates[-1])
    w = Window(start=first, end=chosen, first=latest.number, last=latest.number, new_first=latest.number,
               trigger="tokens", ids=[latest.id] if latest.id else [],
               timestamp_start=_timestamp(inp.record_at(first)),
               timestamp_end=_timestamp(inp.record_at(chosen - 1)))
    planner.make(w, inside_latest=True)
    return planner.new[-1]


def _timestamp(rec: Record | None) -> float | str | None:
    ts = rec.meta.get("timestamp") if rec is not None else None
    return ts if isinstance(ts, (int, float, str)) and not isinstance(ts, bool) else None


def _trim_in_flight(si: StrategyInput, planner: _Planner, r: Rendered, n: int) -> tuple[Rendered, int]:
    """Still over with all before the latest request compacted: the work in flight's results are trimmed as
    the threshold strategy trims its tail (``tail.trim_in_place``); the state's masking keeps them so."""
    records, trimmed = trim_in_place(r.transcript.records, si.budget, si.ctx.transcript.source,
                                     si.report.calibrated, si.tokens)
    planner.trimmed.extend(trimmed)
    if not trimmed:
        return r, n
    r = Rendered(si, dataclasses.replace(r.transcript, records=records))
    return r, r.tokens


def _over(limit: int, why: str) -> str:
    return f"sliding-window: over the token trigger of {limit:,} tokens; {why}"


def _fits_window(si: StrategyInput) -> ExitCode:
    return ExitCode.DOES_NOT_FIT if si.report.calibrated.tokens > si.budget.window else ExitCode.OK


# --------------------------------------------------------------------------------------------------
# describe (estimate --json)


def describe(si: StrategyInput) -> dict[str, Any]:
    """What the strategy would do now: the next event's range and the token trigger's state."""
    _validate(si.opts)
    inp = HeldInput(si)
    return described(si.opts, si.budget, si.state, si.ctx.covered, si.report.calibrated.tokens,
                     inp.invocations, inp.unsafe)


def described(opts: Options, budget: Budget, state: State | None, covered: int, tokens: int,
              invs: list[Invocation], bad: set[int]) -> dict[str, Any]:
    """:func:`describe` from what it reads: the records the context covers (``Context.covered``), its
    tokens, the invocations and split points (:class:`~.invocations.Gathered`'s, so a streamed reading
    answers too). Its ``would_compact`` is whether an event is due by invocations or the context is over the
    token trigger: when False, :func:`apply` returns None (the context passes through)."""
    numbered = [i for i in invs if i.number > 0]
    theta, omega = opts.invocation_threshold, opts.overlap
    covered_end = max([e.end for e in _events(state)] + [covered])
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
            w = make_window(invs, first_new, first_new.end, first_new.number, omega, "invocations")
            nxt = {"due": False, "start": w.start, "end": None, "first_invocation": w.first,
                   "last_invocation": first_new.number + theta - 1,
                   "invocations_needed": theta - len(new)}
    limit = token_limit(budget, opts.safety_ratio)
    events = _events(state)
    fires = budget.threshold is not None and tokens > limit
    return {"would_compact": budget.threshold is not None and (bool(windows) or fires), "sliding_window": {
        "invocation_threshold": theta,
        "overlap": omega,
        "safety_ratio": opts.safety_ratio,
        "invocations": len(numbered),
        "complete_invocations": max(0, len(numbered) - 1),
        "new_invocations": len(new),
        "events": len(events),
        "covered_through": covered_end,
        "events_due": [w.to_json() for w in windows],
        "next_event": nxt,
        "token_trigger": {"limit": limit, "tokens": tokens, "fires": fires},
    }}


def quiet(counted: Any, opts: Options, state: State | None) -> dict[str, Any] | None:
    """:func:`describe`'s keys from what a streamed ``run``'s pass 1 gathered (``streaming.Counted``, its
    :class:`Quiet`) when no event is due: :func:`apply` would return None, the context passes through. None
    when the held route must decide (an event due, the context over a trigger or the threshold)."""
    _validate(opts)
    found = counted.gathered[0] if counted.gathered is not None else None
    if not isinstance(found, Quiet) or found.broken:
        return None
    g = found.folded()
    covered = counted.covered.records if counted.covered is not None else 0
    extras = described(opts, counted.report.budget, state, covered, counted.report.calibrated.tokens,
                       g.invocations(), g.unsafe_splits())
    would = bool(extras.pop("would_compact"))
    if would or counted.report.over_threshold:
        # (an event is due: a streamed run that makes it reports what describe says, as the held route)
        counted.report.would_compact, counted.report.extras = would, extras
        return None
    return extras


def _same(rec: Record) -> Record:
    return rec


class SlidingWindowStrategy:
    name = NAME
    state_layer = 1  # events first: masking applies to the records they keep
    state_section = WindowEvents

    def reapply(self, records: list[Record], state: State, fmt_name: str) -> list[Record]:
        return apply_events(records, state, fmt_name) if _events(state) else records

    def reapply_each(self, state: State, fmt_name: str) -> Callable[[Record], Any]:
        """:meth:`reapply` as the records come (``strategies.reapply_each``): :class:`.events.EventsEach`,
        without keeping the records it drops (the reading that applies it only counts and writes)."""
        each = events_each(state, fmt_name, keep_dropped=False) if _events(state) else None
        return each if each is not None else _same

    def describe(self, si: StrategyInput) -> dict[str, Any]:
        return describe(si)

    def gathering(self, state: State | None) -> Any:
        """``run``'s pass 1 gathers what its rule decides by (plugins.RUN_GATHERS): a :class:`Quiet` for
        the format read (``streaming.count_file``'s ``gather``)."""
        return lambda fmt, covered, reading: (Quiet(state, fmt, reading),)

    def quiet(self, counted: Any, opts: Options, state: State | None) -> dict[str, Any] | None:
        return quiet(counted, opts, state)

    def apply(self, si: StrategyInput) -> Outcome | None:
        return apply(si)


STRATEGY = SlidingWindowStrategy()


"""``run`` of the input held (the held route, docs/DESIGN.md "The flow of `run`"): the effective context built
whole (:mod:`.context`), counted and decided (:mod:`.pipeline`), the strategy applied and judged, the output
and the state written. Every other route falls back to it where it cannot give exactly what it gives."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from .budget import Budget
from .context import Context, Reread, build_context
from .errors import Unstreamable
from .formats import get_format
from .formats.base import Format
from .formats.jsonl import compaction_output
from .options import Options
from .pipeline import (
    budget_from_transcript,
    calibrate_context,
    count_and_decide,
    counter,
    describe,
    ignored_usage_warning,
    make_estimate_report,
)
from .progress import progress
from .report import EstimateReport
from .result import RunResult, Warn, judge_fit, output_format
from .run_setup import check_summarizer, count_cache, proven
from .run_write import update_state, write_both
from .source import InputData
from .state import State, load_state, new_state
from .state.cache import cache_path, save_counts
from .strategies import get_strategy, reapply_all
from .stream_totals import Totals
from .streaming import Counted
from .tokens.cache import CountCache
from .tokens.counts import Counts, count_key

if TYPE_CHECKING:  # (imported where a strategy is applied or described: a call that passes through does
    # neither, and the module's classes cost every call ~2 ms to make)
    from .strategies.base import StrategyInput


def run_locked(inp: InputData, opts: Options, budget: Budget, state_path: Path | None,
               output: Path | BinaryIO | None, dry_run: bool, warn: Warn, *, held: State | None = None,
               counts: CountCache | Path | None = None, as_log: bool = True, loaded: bool = False,
               counted: Counted | None = None, reread: Reread | None = None) -> RunResult:
    state: State | None = held
    if not loaded:  # (``loaded``: ``held`` is the state as read under the lock, the summarizer checked)
        if state_path is not None and not opts.reset_state:
            state = load_state(state_path)
        if not dry_run:
            check_summarizer(opts)
    covered = state.fingerprint.nbytes if state is not None and state.watermark > 0 else 0
    with progress("validating, cleaning and counting"):
        cache: CountCache | None
        cache_file: Path | None
        if counted is not None and counted.cache is not None and state_path is not None:
            cache, cache_file = counted.cache, cache_path(state_path)  # pass 1 took it and added its counts
            settled = None
        else:
            cache, cache_file = count_cache(counts, state_path, len(inp.data))
            settled = proven(cache, inp)
        ctx = build_context(inp, opts, state, schema=True, reapply=reapply_all, settled=settled,
                            reread=reread)
        system: int | None = None  # the context's system tokens, when counted apart
        if reread is not None and reread.read_from >= 0:  # (read on from what the last call settled)
            assert counted is None
            report, ctx_counts, budget, system = count_on(ctx, opts, state, budget, state_path, cache, reread)
        else:
            budget = budget_from_transcript(budget, opts, ctx.transcript.records)
            if cache is not None and cache is not (counted.cache if counted is not None else None):
                cache.use(count_key(opts, ctx.input_format))
            report, ctx_counts = count_and_decide(ctx, opts, state, budget, state_path, cache,
                                                  counted.counts if counted is not None else None)
    ignored = ignored_usage_warning(report.calibrated)
    if ignored is not None:
        warn(ignored)
    from .strategies.base import StrategyInput

    si = StrategyInput(ctx, opts, budget, state, report, warn, counter(ctx, ctx_counts, opts, cache))
    describe(report, si)
    result = RunResult(
        transcript=ctx.transcript, output_format=opts.to or ctx.input_format, compacted=False,
        tokens_before=report.calibrated.tokens, tokens_after=report.calibrated.tokens, estimate=report,
        repairs=ctx.repairs, problems=ctx.problems, state=state or new_state(ctx.input_format),
        state_path=state_path, context=ctx.transcript)
    out_counts = apply_strategy(si, result, dry_run, system=system)
    fmt = get_format(ctx.input_format)
    if as_log and written_as_log(result, fmt):
        written = compaction_output(fmt, inp.data, result.transcript.records, result.tokens_before,
                                 result.tokens_after)
        if written is not result.transcript.records and fmt.compaction_note:
            warn(fmt.compaction_note)
        result.transcript = dataclasses.replace(result.transcript, records=written)
    if dry_run:
        return result
    assert result.state is not None
    update_state(result.state, inp.path, inp.data, ctx, result, out_counts)
    write_both(result, output, state_path)
    if cache is not None:
        # what the next call may take as read (docs/concepts/state.md#the-settled-prefix)
        cache.settle_read(inp.data, covered=covered, good=not ctx.problems and not ctx.dropped)
    if cache_file is not None and cache is not None:
        # after the state, under its lock (docs/concepts/state.md#the-count-cache)
        save_counts(cache_file, cache)
    return result


def count_on(ctx: Context, opts: Options, state: State | None, budget: Budget, state_path: Path | None,
             cache: CountCache | None, reread: Reread) -> tuple[EstimateReport, Counts, Budget, int]:
    """:func:`pipeline.count_and_decide` of a context read on from ``reread`` (``context._read_on``: the
    cleaned records it kept, then those read after them), the budget the records' window decides and the
    system records' tokens. What the kept records count (counts, usage, system tokens, window, statistics)
    is what the last call counted of them (``reread.tally``); only the rest is counted, by the same
    :class:`stream_totals.Totals` the streamed route counts its parts with (``count_records`` with the
    count cache, ``context_stats``, ``usage_points``, ``recorded_window``); what the records settled now
    count is kept for the next call. Counted whole (and kept anew) where the tally is not of these records:
    another counter or encoding, or a call that failed after its read (the tally is of another offset)."""
    records = ctx.transcript.records
    key = count_key(opts, ctx.input_format)
    if cache is not None:
        cache.use(key)
    tally = reread.tally
    if tally is None or tally["key"] != key or tally["at"] != reread.read_from:
        tally = None
    total = Totals(ctx.input_format, opts, budget, cache)
    if tally is not None:
        total.take(tally)
        if cache is not None:
            # what a whole count keeps of the records not counted again, kept as it is: their lines (a settled
            # part has no record the cleaner changed or made: clean.Cleaner settles none with a repair)
            cache.kept_below = reread.read_from
    settled = len(reread.cleaned)  # (the records the next call takes as they are: at its head)
    total.add(records[len(total.heuristic):settled])
    total.flush()
    reread.tally = {**total.held(), "key": key, "at": reread.at}
    total.add(records[settled:])
    total.flush()
    stats = total.stats
    stats.records, stats.covered, stats.repairs = ctx.input_records, ctx.covered, len(ctx.repairs)
    counts = total.counts()
    budget = total.budget
    cal = calibrate_context(ctx, counts, opts, state, total.usage)
    report = make_estimate_report(stats, counts, cal, budget, total.system, opts, state_path)
    return report, counts, budget, total.system


def written_as_log(result: RunResult, fmt: Format) -> bool:
    """Whether the output is written as ``fmt``'s compaction (``jsonl.compaction_output``): an append-only
    log (Claude Code, Codex, ADK events) keeps its lines and records the compaction after them; an agent's
    own log records a masking that way too, so the agent's meter starts from the compacted size
    (docs/guides/claude-code-codex.md#what-the-clients-meters-show)."""
    return result.output_format == fmt.name and (
        result.summary is not None or (result.compacted and fmt.layout.agent_log))


def apply_strategy(si: StrategyInput, result: RunResult, dry_run: bool, *, held: bool = True,
                   system: int | None = None, output_system: int | None = None) -> Counts:
    """The strategy applied to ``si`` and judged: ``result`` says what to write; returns the counts of it.
    ``held=False`` (a streamed compaction, :mod:`.compaction_stream`): Unstreamable where the context itself
    would be written. ``system``: the context's system tokens, when counted already (not summed again
    where the context is what is written). ``output_system``: those of what is written, when its records
    are not held (a streamed masking's: the context's, which masking never changes)."""
    report, warn = si.report, si.warn
    outcome = get_strategy(si.opts.strategy).apply(si)
    if not held and (outcome is None or not outcome.compacted):
        raise Unstreamable("the context passes through")
    if outcome is not None:
        result.transcript, result.outcome, result.compacted = outcome.transcript, outcome, outcome.compacted
    # what we write, estimated as the next request will be: the base for the next calibration (the records
    # kept from the context are not counted again: si.count)
    out_counts = si.count(result.transcript.records)
    in_base = report.exact if report.exact is not None else report.heuristic
    dropped = result.compacted and sum(out_counts.base) >= in_base
    if dropped:
        if not held:
            raise Unstreamable("the compaction would not make the context smaller")
        # A compaction that does not shrink the context (a large system prompt over a short conversation)
        # would repeat on every call: keep the context as it was and let the size check below speak.
        warn("compaction would not make the context smaller; passing it through")
        result.transcript, result.outcome, result.compacted = si.ctx.transcript, None, False
        out_counts = si.count(result.transcript.records)
        report.would_compact, report.projected_tokens_after = False, report.calibrated.tokens
    cal = report.calibrated
    result.tokens_after = cal.project(sum(out_counts.base)) if result.compacted else cal.tokens
    if not dry_run:
        result.output_format = output_format(si.opts, result.transcript, warn)
    written = system if result.transcript is si.ctx.transcript else output_system
    judge_fit(result, out_counts, si.budget, decided_upfront=not dropped, system=written)
    return out_counts

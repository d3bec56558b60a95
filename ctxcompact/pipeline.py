"""The stages ``estimate``, ``run`` and ``eval`` share after reading
(docs/measurements/performance.md#a-hooks-call):
the effective context (:mod:`.context`: read, validate, apply the state, clean) is counted record by record
with the count cache (:func:`tokens.counts.count_records`: a record counted by an earlier call is not counted
again), calibrated (:mod:`.tokens.calibration`) and decided (:mod:`.report`); the strategy adds its own keys
(``describe``). One implementation of each stage, whatever the caller: every rule lives in the module named.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .budget import Budget, make_budget
from .context import Context
from .model import Origin, Record, Transcript
from .options import MAX_TOKENS, Options
from .plugins import PROVIDER_COUNTERS
from .progress import progress
from .report import ContextStats, EstimateReport, context_stats, make_report
from .state import State
from .strategies import get_strategy
from .tokens.cache import CountCache
from .tokens.calibration import Calibrated, calibrate, calibrate_request, default_factor
from .tokens.counts import Counts, count_records, system_tokens

if TYPE_CHECKING:
    from .strategies.base import StrategyInput
    from .tokens.measured import UsagePoint


def budget_from_transcript(budget: Budget, opts: Options, records: list[Record]) -> Budget:
    """With no --window and no --model, a window the log itself records (Codex `token_count` carries
    `model_context_window`) beats the built-in default."""
    if not window_may_be_recorded(budget, opts):
        return budget
    return budget_from_window(budget, opts, recorded_window(records))


def window_may_be_recorded(budget: Budget, opts: Options) -> bool:
    """Whether a window the log records decides the budget: no --window, no --model, the default window."""
    return opts.window is None and opts.model is None and budget.window_source == "default"


def recorded_window(records: list[Record]) -> tuple[int, int] | None:
    """The latest window the records carry, and its line: (window, line)."""
    for rec in reversed(records):
        # a window no model has (a corrupt or hostile log) is not taken: the default stays
        if rec.usage is not None and rec.usage.context_window and 0 < rec.usage.context_window <= MAX_TOKENS:
            return rec.usage.context_window, rec.line
    return None


def budget_from_window(budget: Budget, opts: Options, found: tuple[int, int] | None) -> Budget:
    """The budget of a window the log records (:func:`recorded_window`), when it decides the budget."""
    if found is None or not window_may_be_recorded(budget, opts):
        return budget
    made = make_budget(found[0], None, opts.threshold, opts.config_path)
    return dataclasses.replace(made, window_source=f"transcript (line {found[1]})")


def usage_points(records: list[Record]) -> list[UsagePoint]:
    """Every provider usage recorded in the input part of the context, in order (each request saw the
    records before it)."""
    billed = [(i, r) for i, r in enumerate(records)
              if r.usage is not None and r.origin is Origin.INPUT and r.usage.prompt_tokens > 0]
    if not billed:
        return []
    from .tokens.measured import UsagePoint  # (only a log with usage measures: tokens/measured.py)

    return [UsagePoint(position=i + r.usage.after, prompt_tokens=r.usage.prompt_tokens, line=r.line,
                       source=r.usage.source)
            for i, r in billed if r.usage is not None]


def _default(opts: Options, counts: Counts) -> float:
    return default_factor(exact_counted=counts.exact_counted, override=opts.default_factor)


def calibrate_context(ctx: Context, counts: Counts, opts: Options, state: State | None,
                      usage: list[UsagePoint] | None = None) -> Calibrated:
    """The context's tokens in the provider's space (docs/concepts/calibration.md#calibration). ``usage``:
    the context's :func:`usage_points`, when gathered as its records were counted."""
    if opts.exact in PROVIDER_COUNTERS:  # a provider's own count (check_exact: one with an endpoint)
        current = sum(counts.base)
        real = _provider_count(ctx.transcript, opts)
        return calibrate(current, real=real, last_estimate=current, default_factor=_default(opts, counts),
                         source=f"{opts.exact} count_tokens")
    if usage is None:
        usage = usage_points(ctx.transcript.records)
    return calibrate_counts(counts, usage, opts, state)


def calibrate_counts(counts: Counts, usage: list[UsagePoint], opts: Options,
                     state: State | None) -> Calibrated:
    return calibrate_request(
        counts.base, usage=usage, real_tokens=opts.real_tokens,
        stored=state.calibration if state is not None else None, estimator=counts.estimator,
        default=_default(opts, counts),
        default_source="default" if opts.default_factor is None else "--default-factor",
        compacted_away=compacted_away(state), compacted_at_line=compacted_at_line(state))


def compacted_at_line(state: State | None) -> int:
    """The input's last line when the state's latest compaction was made (0: none, or a state from before
    it was kept): usage recorded up to there was billed before that compaction."""
    last = state.compactions[-1] if state is not None and state.compactions else None
    return last.input_lines or 0 if last is not None else 0


def compacted_away(state: State | None) -> int:
    """The provider tokens the state's compactions removed from the context (what an agent that still sends
    the uncompacted context sends on top of what was written)."""
    if state is None:
        return 0
    return sum(max(0, c.tokens_before - c.tokens_after) for c in state.compactions)


def ignored_usage_warning(cal: Calibrated) -> str | None:
    """The warning for recorded usage the calibration did not learn (tokens.calibration.not_for_written)."""
    if not cal.ignored:
        return None
    lines = ", ".join(f"{line} ({real:,})" for line, real in cal.ignored[:3])
    more = f" and {len(cal.ignored) - 3} more" if len(cal.ignored) > 3 else ""
    return (f"the usage recorded at line {lines}{more} is for a larger context than the compacted one "
            "ctxcompact wrote: your agent is not sending the compacted context (or the log is a replay of "
            "the original session); not learned from it (docs/concepts/calibration.md"
            "#usage-that-is-not-for-the-written-context)")


def _provider_count(transcript: Transcript, opts: Options) -> int:
    from .tokens.provider import count_transcript_tokens

    with progress(f"counting tokens with {opts.exact}"):
        return count_transcript_tokens(transcript, opts.exact, opts.model, api_key=opts.api_key,
                                       base_url=opts.base_url, timeout=opts.timeout,
                                       max_retries=opts.max_retries)


def counter(ctx: Context, counts: Counts, opts: Options, cache: CountCache | None,
            positions: dict[int, int] | None = None) -> Callable[[list[Record]], Counts]:
    """The counter a strategy is given (``StrategyInput.count``), which the engine counts its output with too:
    the context's counts, already made, for the context and for each of its records in another list (a
    compaction's kept tail); anything else counted with the run's estimator and count cache. Each record is
    counted once per call. ``positions``: ``id(record) -> its position in the context`` for the records
    kept of a context not held (a streamed compaction's)."""
    context = ctx.transcript.records
    # id(record) -> its position in the context (records are not changed in place)
    at: dict[int, int] = positions if positions is not None else {}

    def count(records: list[Record]) -> Counts:
        if records is context:
            return counts
        if not at and positions is None:
            at.update((id(r), i) for i, r in enumerate(context))
        todo = [r for r in records if id(r) not in at]
        fresh = count_records(todo, opts, cache) if todo else None
        heur: list[int] = []
        ex: list[int] | None = [] if counts.exact is not None else None
        k = 0
        for r in records:
            i = at.get(id(r))
            if i is None:
                assert fresh is not None
                heur.append(fresh.heuristic[k])
                if ex is not None:
                    ex.append(fresh.exact[k] if fresh.exact is not None else fresh.heuristic[k])
                k += 1
            else:
                heur.append(counts.heuristic[i])
                if ex is not None:
                    ex.append(counts.exact[i])  # type: ignore[index]
        return Counts(heur, ex, counts.encoding)

    return count


def estimate_context(ctx: Context, opts: Options, state: State | None, budget: Budget,
                     state_path: Path | None, cache: CountCache | None = None) -> EstimateReport:
    """Count (with ``cache``), calibrate and decide: the report of the context."""
    return count_and_decide(ctx, opts, state, budget, state_path, cache)[0]


def count_and_decide(ctx: Context, opts: Options, state: State | None, budget: Budget,
                     state_path: Path | None, cache: CountCache | None = None,
                     counted: Counts | None = None) -> tuple[EstimateReport, Counts]:
    """:func:`estimate_context`, and the counts it made. ``counted``: the context's counts, when a pass
    over the same bytes already made them (``streaming.count_file``)."""
    records = ctx.transcript.records
    fits = counted is not None and len(counted.heuristic) == len(records)
    counts = counted if fits and counted is not None else count_records(records, opts, cache)
    stats = context_stats(records, ctx.transcript.format, ctx.input_records, ctx.covered, len(ctx.repairs))
    return make_estimate_report(stats, counts, calibrate_context(ctx, counts, opts, state), budget,
                                system_tokens(counts.base, records), opts, state_path), counts


def make_estimate_report(stats: ContextStats, counts: Counts, cal: Calibrated, budget: Budget, system: int,
                         opts: Options, state_path: Path | None) -> EstimateReport:
    return make_report(
        stats, heuristic_total=sum(counts.heuristic),
        exact_total=sum(counts.exact) if counts.exact is not None else None, encoding=counts.encoding,
        calibrated=cal, budget=budget, system_tokens=system,
        state_path=str(state_path) if state_path else None, strategy=opts.strategy)


def describe(report: EstimateReport, si: StrategyInput) -> None:
    """The strategy's own keys; a strategy that decides by its own rule (masking tiers, invocations) says
    whether ``run`` would act (``would_compact``), so ``estimate`` and ``run`` never disagree."""
    extras = get_strategy(si.opts.strategy).describe(si)
    if "would_compact" in extras:
        report.would_compact = bool(extras.pop("would_compact"))
    # what the strategy would write counts this, not a summary (mask's tier: Strategy.describe)
    projected = extras.pop("projected_tokens_after", None)
    report.extras = extras
    if "maskable_tokens" not in extras:  # what --prune would free, whatever the strategy: when asked for
        report.later = lambda: _maskable(si)
    if projected is not None:
        report.projected_tokens_after = int(projected)


def _maskable(si: StrategyInput) -> dict[str, Any]:
    from .strategies.mask import maskable  # only when the report's figure is read: a run never loads mask

    return maskable(si)

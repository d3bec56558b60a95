"""The composition of every part (docs/concepts/state.md#the-watermark): read → validate → apply the state →
clean → estimate → compact if over the threshold → write the output and the state.

``estimate`` and ``run`` build the same effective context (:mod:`.context`), count it (:mod:`.tokens`),
calibrate it and take the threshold decision (:mod:`.report`); ``run`` then hands it to the chosen strategy
(:mod:`.strategies`) and records what the strategy did in the state. This module only composes: every rule
lives in the module it names.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import io
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from .atomic import write_lines
from .budget import Budget, make_budget
from .clean import Repair
from .context import Context, build_context
from .convert import lines_in
from .errors import ExitCode, OutputError, Problem, StateError, SummarizerError, UsageError
from .formats import get_format, is_unchanged
from .model import Origin, Record, Transcript
from .options import MAX_TOKENS, Options, check_options
from .paths import check_paths, check_side_files, state_path_in
from .plugins import FAST_RUN, STRATEGIES
from .progress import progress
from .report import ContextStats, EstimateReport, context_stats, make_report
from .secrets import scrub_credentials
from .source import InputData, Source, is_file
from .state import (
    InputInfo,
    State,
    add_compaction,
    default_state_path,
    load_state,
    new_state,
    record_estimate,
    remember_measured,
    save_state,
    stage_state,
    state_lock,
)
from .state import record_real_tokens as record_in_state
from .state.cache import HeldCounts
from .strategies import get_strategy, reapply_all
from .strategies.base import Outcome, StrategyInput, Written
from .strategies.mask import maskable
from .summarizers import summarizer_for
from .summarizers.base import SummaryResult
from .tokens.calibration import (
    Calibrated,
    UsagePoint,
    calibrate,
    calibrate_request,
    default_factor,
)
from .tokens.counts import Counts, check_exact, count_records, encoding_name, system_tokens

Warn = Callable[[str], None]


def stderr_warn(message: str) -> None:
    """The default place for warnings: one ``ctxcompact: …`` line on stderr."""
    sys.stderr.write(f"ctxcompact: {scrub_credentials(message)}\n")


def resolve_state_path(source: Source, opts: Options, *, required: bool) -> Path | None:
    """Where the state lives: --state, else in --state-dir named after a file input, else beside it; stdin
    needs --state or --no-state."""
    if not opts.use_state:
        return None
    if opts.state_path is not None:
        return Path(opts.state_path)
    if is_file(source):
        path = Path(source)  # type: ignore[arg-type]
        beside = default_state_path(path)
        return beside if opts.state_dir is None else state_path_in(Path(opts.state_dir), path, beside)
    if required:
        named = " (--state-dir names a state after its input file; stdin has no name)" * bool(opts.state_dir)
        raise UsageError(f"reading stdin: give --state PATH to keep the state, or --no-state{named}")
    return None


def input_path(source: Source) -> Path | None:
    """The input as a path for the write check: a file, ``-`` for stdin, None for bytes or a stream."""
    if isinstance(source, (str, Path)):
        return Path(source)
    return None


def option_reads(opts: Options) -> list[tuple[str, Path | None]]:
    """The files the options name for reading: no command may write over them (paths.check_writes)."""
    return [("--todos file", opts.todos_file), ("config file", opts.config_path)]


def _budget(opts: Options) -> Budget:
    return make_budget(opts.window, opts.model, opts.threshold, opts.config_path)


def budget_from_transcript(budget: Budget, opts: Options, records: list[Record]) -> Budget:
    """With no --window and no --model, a window the log itself records (Codex `token_count` carries
    `model_context_window`) beats the built-in default."""
    if opts.window is not None or opts.model is not None or budget.window_source != "default":
        return budget
    for rec in reversed(records):
        # a window no model has (a corrupt or hostile log) is not taken: the default stays
        if rec.usage is not None and rec.usage.context_window and 0 < rec.usage.context_window <= MAX_TOKENS:
            found = make_budget(rec.usage.context_window, None, opts.threshold, opts.config_path)
            return dataclasses.replace(found, window_source=f"transcript (line {rec.line})")
    return budget


# --------------------------------------------------------------------------------------------------------
# Counting and calibration


def usage_points(records: list[Record]) -> list[UsagePoint]:
    """Every provider usage recorded in the input part of the context, in order (each request saw the
    records before it)."""
    return [UsagePoint(position=i + r.usage.after, prompt_tokens=r.usage.prompt_tokens, line=r.line,
                       source=r.usage.source)
            for i, r in enumerate(records)
            if r.usage is not None and r.origin is Origin.INPUT and r.usage.prompt_tokens > 0]


def _default(opts: Options, counts: Counts) -> float:
    return default_factor(exact_counted=counts.exact_counted, override=opts.default_factor)


def calibrate_context(ctx: Context, counts: Counts, opts: Options, state: State | None) -> Calibrated:
    """The context's tokens in the provider's space (docs/concepts/calibration.md#calibration)."""
    if opts.exact == "anthropic":
        current = sum(counts.base)
        real = _anthropic_count(ctx.transcript, opts)
        return calibrate(current, real=real, last_estimate=current, default_factor=_default(opts, counts),
                         source="anthropic count_tokens")
    return _calibrate(counts, usage_points(ctx.transcript.records), opts, state)


def _calibrate(counts: Counts, usage: list[UsagePoint], opts: Options, state: State | None) -> Calibrated:
    return calibrate_request(
        counts.base, usage=usage, real_tokens=opts.real_tokens,
        stored=state.calibration if state is not None else None, estimator=counts.estimator,
        default=_default(opts, counts),
        default_source="default" if opts.default_factor is None else "--default-factor",
        compacted_away=compacted_away(state))


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


def _anthropic_count(transcript: Transcript, opts: Options) -> int:
    from .tokens.provider import anthropic_count_tokens_for_transcript

    with progress("counting tokens with Anthropic"):
        return anthropic_count_tokens_for_transcript(
            transcript, model=opts.model, api_key=opts.api_key, base_url=opts.base_url, timeout=opts.timeout
        )


# --------------------------------------------------------------------------------------------------------
# estimate


def _estimate_context(ctx: Context, opts: Options, state: State | None, budget: Budget,
                      state_path: Path | None) -> EstimateReport:
    records = ctx.transcript.records
    counts = count_records(records, opts)
    stats = context_stats(records, ctx.transcript.format, ctx.input_records, ctx.covered, len(ctx.repairs))
    return _report(stats, counts, calibrate_context(ctx, counts, opts, state), budget,
                   system_tokens(counts.base, records), opts, state_path)


def _report(stats: ContextStats, counts: Counts, cal: Calibrated, budget: Budget, system: int, opts: Options,
            state_path: Path | None) -> EstimateReport:
    return make_report(
        stats, heuristic_total=sum(counts.heuristic),
        exact_total=sum(counts.exact) if counts.exact is not None else None, encoding=counts.encoding,
        calibrated=cal, budget=budget, system_tokens=system,
        state_path=str(state_path) if state_path else None, strategy=opts.strategy)


def _describe(report: EstimateReport, si: StrategyInput) -> None:
    """The strategy's own keys; a strategy that decides by its own rule (masking tiers, invocations) says
    whether ``run`` would act (``would_compact``), so ``estimate`` and ``run`` never disagree."""
    extras = get_strategy(si.opts.strategy).describe(si)
    if "maskable_tokens" not in extras:  # what --prune would free, whatever the strategy
        extras.update(maskable(si))
    if "would_compact" in extras:
        report.would_compact = bool(extras.pop("would_compact"))
    report.extras = extras
    if extras.get("tier") == "mask" and "tokens_after_mask" in extras:
        # the mask tier is enough: that, not a summary, is what run would write
        report.projected_tokens_after = int(extras["tokens_after_mask"])


#: ``estimate`` streams (counts only, in bounded memory) from this file size on; below it, it parses the
#: transcript and also reports what masking would free (``maskable_tokens``; null on the streaming path)
STREAMING_FROM_BYTES = 8 * 1024 * 1024


def fast_path_allowed(source: Source, opts: Options, state: State | None) -> bool:
    """Whether ``estimate`` may take the streaming fast path, before reading anything: a file (not stdin),
    ``--exact none`` or ``tiktoken``, a strategy whose estimate needs only counts, a format with a fast
    reader (or auto), and no state beyond a calibration (a covered prefix, masking or events need the
    state's layers)."""
    return is_file(source) and _fast_allowed(opts, state)


def _fast_allowed(opts: Options, state: State | None) -> bool:
    from .tokens.fast import has_fast_reader

    if opts.exact not in ("none", "tiktoken"):
        return False
    if get_strategy(opts.strategy).estimate_needs_context(opts) or not has_fast_reader(opts.format):
        return False
    return state is None or not (state.watermark > 0 or state.summary or state.holds_sections())


def _streaming_size(source: Source) -> bool:
    """Below :data:`STREAMING_FROM_BYTES` the full path costs little more and can say what masking would
    free; an unreadable file goes there too, which reports what is wrong with it."""
    try:
        return os.path.getsize(source) >= STREAMING_FROM_BYTES  # type: ignore[arg-type]
    except OSError:
        return False


def _fast_estimate(source: Source, opts: Options, state: State | None, budget: Budget,
                   state_path: Path | None) -> EstimateReport | None:
    """The report of the streaming fast path (``tokens.fast``), or None when only the full path can be sure
    of it: a file (not stdin), no state beyond a calibration, ``--exact none`` or ``tiktoken``, a strategy
    whose estimate needs nothing but counts, and a transcript the fast reader accepts."""
    from .tokens.fast import NotFast, count_file

    if not fast_path_allowed(source, opts, state) or not _streaming_size(source):
        return None
    encoding = encoding_name(opts) if opts.exact == "tiktoken" else None
    try:
        fc = count_file(source, opts.format, encoding)  # type: ignore[arg-type]
    except NotFast:
        return None
    counts = Counts(list(fc.heuristic), list(fc.exact) if fc.exact is not None else None, encoding)
    usage = [UsagePoint(position=at, prompt_tokens=prompt, line=line, source="usage.prompt_tokens")
             for at, line, prompt in fc.usage]
    stats = ContextStats(format=fc.format, records=fc.records, covered=0, messages=fc.messages,
                         tool_calls=fc.tool_calls, chars=fc.chars, repairs=fc.repairs)
    report = _report(stats, counts, _calibrate(counts, usage, opts, state), budget,
                     sum(counts.base[i] for i in fc.system), opts, state_path)
    report.extras = {"maskable_tokens": None, "maskable_results": None}  # needs the parsed records
    return report


def estimate(source: Source, opts: Options | None = None) -> EstimateReport:
    """Dry run on a transcript: counts, calibration, budget and the compaction decision.

    Reads the state (if any) but writes nothing."""
    opts = opts or Options()
    check_options(opts)
    check_exact(opts)
    budget = _budget(opts)
    state_path = resolve_state_path(source, opts, required=False)
    state = None if (state_path is None or opts.reset_state) else load_state(state_path)
    fast = _fast_estimate(source, opts, state, budget, state_path)
    if fast is not None:
        return fast
    inp = InputData.load(source)
    with progress("reading and counting"):  # shown only on a terminal, and only if it takes a while
        ctx = build_context(inp, opts, state, schema=True, reapply=reapply_all)
        budget = budget_from_transcript(budget, opts, ctx.transcript.records)
        report = _estimate_context(ctx, opts, state, budget, state_path)
    _describe(report, StrategyInput(ctx, opts, budget, state, report, stderr_warn))
    return report


# --------------------------------------------------------------------------------------------------------
# run


class _Deferred:
    """A ``Transcript`` field the fast run may fill with a loader instead (``RunResult.defer``): the loader
    runs (the full path's parse) the first time a caller reads the field, so the usual hook call parses
    nothing, and every caller gets a plain ``Transcript`` (``dataclasses.replace`` works on it)."""

    def __init__(self, required: bool) -> None:
        self.required = required

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = "_" + name

    def __get__(self, obj: object, owner: type | None = None) -> Transcript | None:
        if obj is None:
            if self.required:
                raise AttributeError(self.slot)  # no class-level default: the dataclass field stays required
            return None
        value = getattr(obj, self.slot)
        if callable(value):
            value = value()
            setattr(obj, self.slot, value)
        return value

    def __set__(self, obj: object, value: Transcript | Callable[[], Transcript] | None) -> None:
        setattr(obj, self.slot, value)


@dataclass
class RunResult:
    if TYPE_CHECKING:
        transcript: Transcript  # what was (or would be) written
    else:
        transcript: Transcript = _Deferred(required=True)
    output_format: str
    compacted: bool
    tokens_before: int
    tokens_after: int
    estimate: EstimateReport
    repairs: list[Repair]
    problems: list[Problem]
    outcome: Outcome | None = None  # what the strategy did, when it acted
    exit_code: ExitCode = ExitCode.OK
    warnings: list[str] = field(default_factory=list)
    state: State | None = None
    state_path: Path | None = None
    if TYPE_CHECKING:
        context: Transcript | None = None  # the effective context the strategy was given (before compacting)
    else:
        context: Transcript | None = _Deferred(required=False)
    # the fast path's output: the input, unchanged, written as it is (the transcripts are parsed if read)
    passthrough: bytes | None = None

    @property
    def summary(self) -> SummaryResult | None:
        """The summary the compaction made, or None."""
        return self.outcome.summary if self.outcome is not None else None

    def defer(self, load: Callable[[], Transcript]) -> None:
        """Both transcripts (the same one on the fast run) are made by ``load`` when first read."""
        object.__setattr__(self, "_transcript", load)
        object.__setattr__(self, "_context", load)

    def lines(self) -> Iterator[bytes]:
        if self.passthrough is not None:
            return iter(io.BytesIO(self.passthrough).readlines())  # lines end at \n only, never at a CR
        return lines_in(self.transcript, self.output_format)


def output_format(opts: Options, transcript: Transcript, warn: Warn) -> str:
    """The format to write: ``--to``, else the input's; a format that cannot be written faithfully writes its
    fallback (with a warning), unless the transcript passes through unchanged."""
    target = opts.to or transcript.format
    fmt = get_format(target)
    if not fmt.writable and not (target == transcript.format and is_unchanged(transcript)):
        fallback = fmt.fallback or "openai"
        warn(f"the {target} format cannot be written faithfully; writing {fallback} instead")
        return fallback
    return target


def run(source: Source, opts: Options | None = None, *, output: Path | BinaryIO | None = None,
        dry_run: bool = False, warn: Warn = stderr_warn) -> RunResult:
    """validate → apply the state → clean → estimate → compact if over the threshold → write output and state.

    ``output``: a path (written atomically), a binary stream, or None (nothing written; the caller can use
    ``RunResult.lines()``). With ``dry_run`` nothing is written at all, not even the state.
    """
    opts = opts or Options()
    check_options(opts)
    check_exact(opts)
    get_strategy(opts.strategy)  # an unknown name is a usage error before any work
    budget = _budget(opts)
    state_path = resolve_state_path(source, opts, required=not dry_run)
    if not dry_run:
        check_paths(input=input_path(source), output=output if isinstance(output, Path) else None,
                    state=state_path, reads=option_reads(opts))
        if state_path is not None:
            check_side_files(state_path)
    inp = InputData.load(source)
    if inp.document is not None:
        warn(f"note: the input is {inp.document}, one JSON document: read as JSONL, one record per line "
             "(line N is its record N), and written as JSONL")
    if state_path is None or dry_run:
        return _run_locked(inp, opts, budget, state_path, output, dry_run, warn)
    with state_lock(state_path, timeout=opts.lock_timeout):
        return _run_locked(inp, opts, budget, state_path, output, dry_run, warn)


def run_held(data: bytes, opts: Options, state: State | None, *, path: Path | None = None,
             counts: HeldCounts | Path | None = None, warn: Warn = stderr_warn) -> RunResult:
    """``run`` on a transcript in memory with a state the caller holds (the message-list API,
    :mod:`ctxcompact.messages`): the same pipeline, fast path included; nothing is written but the count
    cache. ``result.state`` is the state to keep; the one given is not changed, so a failure leaves the
    caller's state as it was. ``path`` names where the transcript is kept, if anywhere (the state's
    ``input.path``); ``counts`` the count cache: held in memory, or beside a state file (under its lock).
    A message list is the context itself, not an agent's append-only log: the compacted records are the
    output (no ``Format.compaction_output``)."""
    check_exact(opts)
    get_strategy(opts.strategy)
    held = copy.deepcopy(state) if state is not None and not opts.reset_state else None
    return _run_locked(InputData(data, path), opts, _budget(opts), None, None, False, warn, held=held,
                       counts=counts if counts is not None else HeldCounts(), as_log=False)


def _run_locked(inp: InputData, opts: Options, budget: Budget, state_path: Path | None,
                output: Path | BinaryIO | None, dry_run: bool, warn: Warn, *, held: State | None = None,
                counts: HeldCounts | Path | None = None, as_log: bool = True) -> RunResult:
    state: State | None = held
    if state_path is not None and not opts.reset_state:
        state = load_state(state_path)
    if opts.summarizer != "extractive" and not dry_run:
        try:
            summarizer_for(opts).check()  # a missing key is a configuration error, reported before any work
        except SummarizerError as exc:
            raise UsageError(str(exc)) from None
    if not dry_run:
        fast = _fast_run(inp, opts, budget, state, state_path, output, counts)
        if fast is not None:
            return fast
    with progress("validating, cleaning and counting"):
        ctx = build_context(inp, opts, state, schema=True, reapply=reapply_all)
        budget = budget_from_transcript(budget, opts, ctx.transcript.records)
        report = _estimate_context(ctx, opts, state, budget, state_path)
    ignored = ignored_usage_warning(report.calibrated)
    if ignored is not None:
        warn(ignored)
    si = StrategyInput(ctx, opts, budget, state, report, warn)
    _describe(report, si)
    result = RunResult(
        transcript=ctx.transcript, output_format=opts.to or ctx.input_format, compacted=False,
        tokens_before=report.calibrated.tokens, tokens_after=report.calibrated.tokens, estimate=report,
        repairs=ctx.repairs, problems=ctx.problems, state=state or new_state(ctx.input_format),
        state_path=state_path, context=ctx.transcript)
    outcome = get_strategy(opts.strategy).apply(si)
    if outcome is not None:
        result.transcript, result.outcome, result.compacted = outcome.transcript, outcome, outcome.compacted
    # what we write, estimated as the next request will be: the base for the next calibration
    out_counts = count_records(result.transcript.records, opts)
    in_base = report.exact if report.exact is not None else report.heuristic
    dropped = result.compacted and sum(out_counts.base) >= in_base
    if dropped:
        # A compaction that does not shrink the context (a large system prompt over a short conversation)
        # would repeat on every call: keep the context as it was and let the size check below speak.
        warn("compaction would not make the context smaller; passing it through")
        result.transcript, result.outcome, result.compacted = ctx.transcript, None, False
        out_counts = count_records(result.transcript.records, opts)
        report.would_compact, report.projected_tokens_after = False, report.calibrated.tokens
    cal = report.calibrated
    result.tokens_after = cal.project(sum(out_counts.base)) if result.compacted else cal.tokens
    if not dry_run:
        result.output_format = output_format(opts, result.transcript, warn)
    _judge_fit(result, out_counts, budget, decided_upfront=not dropped)
    fmt = get_format(ctx.input_format)
    if as_log and result.output_format == ctx.input_format and (
            result.summary is not None or (result.compacted and fmt.layout.agent_log)):
        # an append-only log (Claude Code, Codex, ADK events) keeps its lines and records the compaction after
        # them; an agent's own log records a masking that way too, so the agent's meter starts from the
        # compacted size (docs/guides/claude-code-codex.md#what-the-clients-meters-show)
        written = fmt.compaction_output(inp.data, result.transcript.records, result.tokens_before,
                                        result.tokens_after)
        if written is not result.transcript.records and fmt.compaction_note:
            warn(fmt.compaction_note)
        result.transcript = dataclasses.replace(result.transcript, records=written)
    if dry_run:
        return result
    assert result.state is not None
    _update_state(result.state, inp, ctx, result, out_counts)
    _write_both(result, output, state_path)
    return result


def _write_both(result: RunResult, output: Path | BinaryIO | None, state_path: Path | None) -> None:
    """The output and the state change together or not at all
    (docs/reference/safety.md#atomic-writes-output-and-state-together).

    The state is staged first (written and fsynced beside its path, not yet in place), so a full disk or a
    read-only folder fails before anything is visible. Then the output is written, then the state renamed
    into place: the state is what the next run and `calibrate` trust (its watermark, and the estimate of
    what was written that the provider's next figure is paired with), so it must never describe an output
    that was not delivered. If that last rename fails, a file output is put back as it was; a stream
    (stdout) cannot be taken back, and the message says so."""
    assert result.state is not None
    staged = stage_state(state_path, result.state) if state_path is not None else None
    try:
        written = write_lines(result.lines(), output, keep=staged is not None) if output is not None else None
    except BaseException:
        if staged is not None:
            staged.discard()
        raise
    if staged is None:
        return
    try:
        staged.commit()
    except OSError as exc:
        staged.discard()
        if written is not None:
            fate = ("the output was put back as it was" if written.undo()
                    else f"the output {written.target} could not be put back")
        elif output is not None:  # a stream or a device: what it took cannot be taken back
            fate = f"the output already went to {output if isinstance(output, Path) else 'stdout'}"
        else:
            fate = "nothing else was written"
        raise OutputError(f"cannot write the state to {state_path}: {exc.strerror or exc}; {fate}",
                          errno=exc.errno) from None
    if written is not None:
        written.forget()


def _fast_run(inp: InputData, opts: Options, budget: Budget, state: State | None, state_path: Path | None,
              output: Path | BinaryIO | None, held: HeldCounts | Path | None = None) -> RunResult | None:
    """The usual hook call, without building the model (docs/measurements/performance.md#a-hooks-call): a
    transcript the streaming walk reads as it is (nothing to repair, every line conforming, no blank line, no
    CR, no BOM), below the threshold, with no summary or masking in the state, written out unchanged. The
    walk's snapshot is kept beside the state, so the next call on the grown file reads only the appended
    bytes. None: the full path decides (it gives the same answer, and the reports, repairs and compactions the
    fast one leaves to it)."""
    from .schemacheck import conforms, load
    from .state.cache import cache_path, load_counts, save_counts
    from .tokens.fast import NotFast, walk_bytes

    data = inp.data
    if ((inp.path is None and held is None) or not STRATEGIES.has(opts.strategy, FAST_RUN) or opts.prune
            or opts.to not in (None, opts.format) or not _fast_allowed(opts, state)
            or not data.endswith(b"\n") or data.startswith(b"\xef\xbb\xbf") or b"\r" in data):
        return None
    encoding = encoding_name(opts) if opts.exact == "tiktoken" else None
    key = (opts.format, encoding)
    in_memory = held if isinstance(held, HeldCounts) else None
    at = state_path if state_path is not None else held if isinstance(held, Path) else None
    cache = cache_path(at) if at is not None else None
    snap, hasher = load_counts(cache, data, key) if cache is not None else (None, None)
    if in_memory is not None:
        snap = in_memory.load(data, key)
    try:
        fc, new_snap = walk_bytes(data, opts.format, encoding, lambda f, obj: conforms(load(f), obj), snap)
    except NotFast:
        return None
    if fc.repairs or (opts.to is not None and opts.to != fc.format):
        return None
    counts = Counts(list(fc.heuristic), list(fc.exact) if fc.exact is not None else None, encoding)
    usage = [UsagePoint(position=at, prompt_tokens=prompt, line=line, source="usage.prompt_tokens")
             for at, line, prompt in fc.usage]
    stats = ContextStats(format=fc.format, records=fc.records, covered=0, messages=fc.messages,
                         tool_calls=fc.tool_calls, chars=fc.chars, repairs=0)
    report = _report(stats, counts, _calibrate(counts, usage, opts, state), budget,
                     sum(counts.base[i] for i in fc.system), opts, state_path)
    if report.over_threshold or report.would_compact or report.calibrated.tokens > budget.window:
        return None
    state = state or new_state(fc.format)
    if inp.path is not None:
        state.input = InputInfo(path=str(inp.path), format=fc.format)
    remember_measured(state, report.calibrated.measured, counts.estimator)
    record_estimate(state, sum(counts.base), counts.estimator)

    def parse() -> list[Record]:
        # the state has nothing that changes the context here (fast_path_allowed): without it, the same
        return build_context(inp, opts, None, schema=True, reapply=reapply_all).transcript.records

    @functools.cache
    def loaded() -> Transcript:  # one parse, shared by the two fields
        return Transcript(fc.format, parse(), str(inp.path or "-"))

    result = RunResult(transcript=Transcript(fc.format, [], str(inp.path or "-")), output_format=fc.format,
                       compacted=False,
                       tokens_before=report.calibrated.tokens, tokens_after=report.calibrated.tokens,
                       estimate=report, repairs=[], problems=[], state=state, state_path=state_path,
                       passthrough=data)
    result.defer(loaded)
    _write_both(result, output, state_path)  # the same write order as the full path
    if cache is not None:
        save_counts(cache, data, key, new_snap, hasher, snap["bytes"] if snap is not None else 0)
    elif in_memory is not None:
        in_memory.save(data, key, new_snap)
    return result


def _judge_fit(result: RunResult, out_counts: Counts, budget: Budget, *, decided_upfront: bool) -> None:
    """Exit 5 with a reason when the result does not fit the window; the strategy's own warnings; why a
    context over the threshold was not compacted (report.decide)."""
    after = result.tokens_after
    report = result.estimate
    cal = report.calibrated
    fixed = cal.project(system_tokens(out_counts.base, result.transcript.records))
    left_alone = (decided_upfront and report.over_threshold and not report.would_compact
                  and result.outcome is None)
    if after > budget.window:
        result.exit_code = ExitCode.DOES_NOT_FIT
        why = f"the result is {after:,} tokens and does not fit the {budget.window:,}-token window"
        if fixed >= budget.window and not left_alone:  # else the next warning says why
            why += f": {_what_cannot_shrink(cal, fixed)}"
        result.warnings.append(why)
    if left_alone:
        why = ("even the smallest summary would not fit the window" if fixed > budget.window
               else "a summary would not make the context smaller")
        result.warnings.append(f"the context is {cal.tokens:,} tokens, over the threshold of "
                               f"{budget.threshold:,}, and it was not compacted: {why}; "
                               f"{_what_cannot_shrink(cal, fixed)}")
    outcome = result.outcome
    if outcome is not None:
        # a strategy may know better why its result cannot fit (e.g. masking alone was not enough)
        result.warnings.extend(outcome.warnings)
        result.exit_code = max(result.exit_code, outcome.exit_code)
    elif result.compacted and budget.would_compact(after):
        result.warnings.append(
            f"after compaction the context is still {after:,} tokens, over the threshold of "
            f"{budget.threshold:,} (the system prompt is large for this window)")


def _what_cannot_shrink(cal: Calibrated, fixed: int) -> str:
    # a few tokens of hidden part are the fit's rounding, not a prompt worth naming
    if cal.hidden and cal.hidden * 20 >= fixed:
        measured = f"{cal.points} request{'s' if cal.points != 1 else ''}"
        return (f"what no compaction can shrink is about {fixed:,} tokens, {cal.hidden:,} of them the hidden "
                f"prompt (the system prompt and tool definitions the log does not hold, measured from "
                f"{measured})")
    return f"the system prompt and what stays with it are about {fixed:,} tokens"


def _update_state(state: State, inp: InputData, ctx: Context, result: RunResult, out_counts: Counts) -> None:
    if inp.path is not None:
        state.input = InputInfo(path=str(inp.path), format=ctx.input_format)
    outcome = result.outcome
    if outcome is not None and outcome.compacted:
        outcome.commit(state, Written(ctx=ctx, data=inp.data, tokens_before=result.tokens_before,
                                      tokens_after=result.tokens_after, counts=out_counts))
        add_compaction(
            state, strategy=outcome.strategy, tokens_before=result.tokens_before,
            tokens_after=outcome.tokens_after if outcome.tokens_after is not None else result.tokens_after,
            records_covered=outcome.covered, watermark=state.watermark,
            summarizer=outcome.summary.summarizer if outcome.summary is not None else None,
            fallback=outcome.fallback, duration_s=outcome.duration_s, tier=outcome.tier)
    # what this run measured (the transcript's usage, --real-tokens) outlives the records that carried it
    remember_measured(state, result.estimate.calibrated.measured, out_counts.estimator)
    # the estimate of what we wrote: the next `calibrate` pairs the provider's figure with it
    record_estimate(state, sum(out_counts.base), out_counts.estimator)


# --------------------------------------------------------------------------------------------------------
# calibrate


def record_real_tokens(state_path: Path, prompt_tokens: int, lock_timeout: float = 10.0) -> State:
    """``ctxcompact calibrate``: store what the provider reported for the last request (after-model hook)."""
    if not 0 <= prompt_tokens <= MAX_TOKENS:
        raise UsageError(f"--prompt-tokens must be between 0 and {MAX_TOKENS:,}, got {prompt_tokens}")
    check_side_files(state_path)
    with state_lock(state_path, timeout=lock_timeout):
        state = load_state(state_path)
        if state is None:
            raise StateError(f"no state file at {state_path}: run `ctxcompact run` first")
        record_in_state(state, prompt_tokens)
        save_state(state_path, state)
        return state

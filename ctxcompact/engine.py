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
import hashlib
import sys
from collections.abc import Callable, Iterable
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from .atomic import Staging, write_lines
from .budget import Budget, make_budget
from .compaction_stream import gathering, input_lines, may_compact_streamed, read_conversation
from .context import Context, build_context
from .errors import InputError, OutputError, StateError, SummarizerError, Unstreamable, UsageError
from .formats import get_format
from .formats.base import Format
from .formats.jsonl import compaction_output, write_transcript
from .model import Origin, Transcript
from .options import MAX_TOKENS, Options, check_options
from .paths import (
    check_paths,
    check_side_files,
    is_fifo,
    open_input,
    spooled,
    spooled_fifo,
    state_path_in,
)
from .pipeline import (
    budget_from_transcript,
    count_and_decide,
    counter,
    describe,
    ignored_usage_warning,
)
from .plugins import OFFLINE, STRATEGIES, SUMMARIZERS
from .progress import progress
from .report import EstimateReport
from .result import RunResult, Warn, judge_fit, output_format
from .secrets import scrub_credentials
from .source import InputData, Source, is_file, is_stdin, source_name
from .state import (
    HashedFile,
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
from .state.cache import cache_path, load_counts, save_counts
from .strategies import get_strategy, reapply_all, run_gathers
from .streaming import (
    STREAMING_FROM_BYTES,
    CacheLoader,
    Counted,
    count_file,
    may_stream,
    may_write_streamed,
    staging_for,
    stream_report,
    written_lines,
)
from .tokens.cache import CountCache
from .tokens.counts import Counts, check_exact, count_key

if TYPE_CHECKING:  # (imported where a strategy is applied or described: a call that passes through does
    # neither, and the module's classes cost every call ~2 ms to make)
    from .strategies.base import StrategyInput


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


# --------------------------------------------------------------------------------------------------------
# estimate


def estimate(source: Source, opts: Options | None = None) -> EstimateReport:
    """Dry run on a transcript: counts, calibration, budget and the compaction decision.

    Reads the state (if any) but writes nothing."""
    opts = opts or Options()
    check_options(opts)
    check_exact(opts)
    budget = _budget(opts)
    state_path = resolve_state_path(source, opts, required=False)
    state = None if (state_path is None or opts.reset_state) else load_state(state_path)
    if (is_stdin(source) or _fifo(source)) and may_stream(None, opts, state):
        name = None if is_stdin(source) else Path(source)  # type: ignore[arg-type]
        # streamed from the size a file is (paths.spooled: below it, read whole as always)
        below = STREAMING_FROM_BYTES - 1
        with spooled(sys.stdin.buffer, hold_below=below) if name is None else \
                spooled_fifo(name, hold_below=below) as got:
            if isinstance(got, bytes):
                inp = _named(InputData.load(got), name)
            else:
                with progress("reading and counting"):
                    streamed = stream_report(got, opts, state, budget, state_path,
                                             _cache_loader(state_path, got), name=source_name(name))
                if streamed is not None:
                    return streamed
                inp = _named(InputData.load(got.read_bytes()), name)
        return _estimate_held(inp, opts, state, budget, state_path)
    if is_file(source) and may_stream(Path(source), opts, state):  # type: ignore[arg-type]
        with progress("reading and counting"):
            streamed = stream_report(Path(source), opts, state, budget, state_path,  # type: ignore[arg-type]
                                     _cache_loader(state_path, Path(source)))  # type: ignore[arg-type]
        if streamed is not None:
            return streamed
    return _estimate_held(InputData.load(source), opts, state, budget, state_path)


def _estimate_held(inp: InputData, opts: Options, state: State | None, budget: Budget,
                   state_path: Path | None) -> EstimateReport:
    with progress("reading and counting"):  # shown only on a terminal, and only if it takes a while
        # what earlier runs counted is looked up, never written: estimate does not take the state's lock
        cache = load_counts(cache_path(state_path), None, len(inp.data)) if state_path else None
        ctx = build_context(inp, opts, state, schema=True, reapply=reapply_all, settled=_proven(cache, inp))
        budget = budget_from_transcript(budget, opts, ctx.transcript.records)
        if cache is not None:
            cache.use(count_key(opts, ctx.input_format))
            cache.keep = False  # nothing to keep it for: no per-record memory
        report, counts = count_and_decide(ctx, opts, state, budget, state_path, cache)
    from .strategies.base import StrategyInput

    describe(report, StrategyInput(ctx, opts, budget, state, report, stderr_warn,
                                   counter(ctx, counts, opts, cache)))
    return report


def _cache_loader(state_path: Path | None, source: Path) -> CacheLoader | None:
    if state_path is None:
        return None
    return lambda key: load_counts(cache_path(state_path), key, _size(source))


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


# --------------------------------------------------------------------------------------------------------
# run


def run(source: Source, opts: Options | None = None, *, output: Path | BinaryIO | None = None,
        dry_run: bool = False, warn: Warn = stderr_warn, hold: bool = False) -> RunResult:
    """validate → apply the state → clean → estimate → compact if over the threshold → write output and state.

    ``output``: a path (written atomically), a binary stream, or None (nothing written; the caller can use
    ``RunResult.lines()``). With ``dry_run`` nothing is written at all, not even the state.

    A file is read in two passes by byte offset (:mod:`.streaming`) instead of held, when it may be: a
    context that passes through is then written without ever holding the file. ``RunResult.transcript``
    and ``.context`` are still the held route's, made from the bytes the run read when first read
    (``RunResult.held``), so a caller that reads only the figures and ``lines()`` never holds the file. The
    report's ``maskable_tokens`` is null on that route (it needs the whole context; ``estimate`` gives it).
    ``hold=True`` takes the held route whatever the input (the tests compare the two).

    Stdin (``-``) or a FIFO (a named pipe, ``<(cmd)``) with an ``output`` takes the file's route through a
    private temporary copy (``paths.spooled``), named as the held route names it (stdin: no path; a FIFO:
    its path); the copy is gone when ``run`` returns, so such a result's records are not read again
    (reading them raises InputError): with ``output=None``, the input is held as before.
    """
    opts = opts or Options()
    check_options(opts)
    check_exact(opts)
    STRATEGIES.check(opts.strategy)  # an unknown name is a usage error before any work (nothing loaded)
    budget = _budget(opts)
    state_path = resolve_state_path(source, opts, required=not dry_run)
    if not dry_run:
        check_paths(input=input_path(source), output=output if isinstance(output, Path) else None,
                    state=state_path, reads=option_reads(opts))
        if state_path is not None:
            check_side_files(state_path)
    if not hold and not dry_run and is_file(source) and Path(source).is_file():  # type: ignore[arg-type]
        path = Path(source)  # type: ignore[arg-type]
        return _run_file_locked(path, opts, budget, state_path, output, warn, path)
    if not hold and not dry_run and output is not None and (is_stdin(source) or _fifo(source)):
        name = None if is_stdin(source) else Path(source)  # type: ignore[arg-type]
        # (before the lock, as stdin and a FIFO were always read)
        with spooled(sys.stdin.buffer) if name is None else spooled_fifo(name) as got:
            if isinstance(got, bytes):
                return _run_input(_named(InputData.load(got), name), opts, budget, state_path, output, warn)
            return _gone(_run_file_locked(got, opts, budget, state_path, output, warn, name), name)
    return _run_input(InputData.load(source), opts, budget, state_path, output, warn, dry_run)


def _fifo(source: Source) -> bool:
    return is_file(source) and is_fifo(Path(source))  # type: ignore[arg-type]


def _named(inp: InputData, name: Path | None) -> InputData:
    """Spooled bytes named as the held route names their input (stdin: no path; a FIFO: its path)."""
    return inp if name is None else dataclasses.replace(inp, path=name)


def _run_file_locked(path: Path, opts: Options, budget: Budget, state_path: Path | None,
                     output: Path | BinaryIO | None, warn: Warn, name: Path | None) -> RunResult:
    if state_path is None:
        return _run_file(path, opts, budget, None, output, warn, name)
    with state_lock(state_path, timeout=opts.lock_timeout):
        return _run_file(path, opts, budget, state_path, output, warn, name)


def _gone(result: RunResult, name: Path | None) -> RunResult:
    """A result of stdin or a FIFO read through its spool file, which is removed as ``run`` returns: what
    would read it again (``lines()``, ``transcript``, ``context``, when not read yet) says so instead."""
    def gone() -> Any:
        raise InputError(f"{name or 'stdin'} was read through a temporary copy that is gone: its records "
                         "cannot be read again (run with output=None to hold them, or read a file)")

    if result.streamed is not None:
        result.streamed = gone
    if result.held is not None:
        result.held = gone
    return result


def _run_input(inp: InputData, opts: Options, budget: Budget, state_path: Path | None,
               output: Path | BinaryIO | None, warn: Warn, dry_run: bool = False) -> RunResult:
    """``run`` of the input held (the held route)."""
    if inp.document is not None:
        warn(f"note: the input is {inp.document}, one JSON document: read as JSONL, one record per line "
             "(line N is its record N), and written as JSONL")
    if state_path is None or dry_run:
        return _run_locked(inp, opts, budget, state_path, output, dry_run, warn)
    with state_lock(state_path, timeout=opts.lock_timeout):
        return _run_locked(inp, opts, budget, state_path, output, dry_run, warn)


def run_held(data: bytes, opts: Options, state: State | None, *, path: Path | None = None,
             counts: CountCache | Path | None = None, warn: Warn = stderr_warn) -> RunResult:
    """``run`` on a transcript in memory with a state the caller holds (the message-list API,
    :mod:`ctxcompact.messages`): the same pipeline, fast path included; nothing is written but the count
    cache. ``result.state`` is the state to keep; the one given is not changed, so a failure leaves the
    caller's state as it was. ``path`` names where the transcript is kept, if anywhere (the state's
    ``input.path``); ``counts`` the count cache: held in memory, or beside a state file (under its lock).
    A message list is the context itself, not an agent's append-only log: the compacted records are the
    output (no ``formats.jsonl.compaction_output``)."""
    check_options(opts)  # the same checks as every other route, before any work
    check_exact(opts)
    STRATEGIES.check(opts.strategy)
    held = copy.deepcopy(state) if state is not None and not opts.reset_state else None
    return _run_locked(InputData(data, path), opts, _budget(opts), None, None, False, warn, held=held,
                       counts=counts if counts is not None else CountCache(), as_log=False)


def _check_summarizer(opts: Options) -> None:
    if not SUMMARIZERS.has(opts.summarizer, OFFLINE):
        from .summarizers import summarizer_for  # (an offline one needs no check: a run never loads them)

        try:
            summarizer_for(opts).check()  # a missing key is a configuration error, reported before any work
        except SummarizerError as exc:
            raise UsageError(str(exc)) from None


def _run_file(path: Path, opts: Options, budget: Budget, state_path: Path | None,
              output: Path | BinaryIO | None, warn: Warn, name: Path | None) -> RunResult:
    """``run`` of a file without holding it (docs/DESIGN.md, "The flow of `run`"): pass 1 reads, validates,
    cleans, counts and decides record by record (``streaming.count_file``, after a state's covered prefix
    too); a context that passes through is written by pass 2, which reads the same bytes again
    (``streaming.written_lines``); a compaction of the default path is made in pass 2
    (``_compact_streamed``), any other reads the file held, with pass 1's counts. Whatever ``streaming``
    does not take is read held, as always. ``name``: how the state, the transcripts and the messages name
    the input, as the held route names it: ``path``; or, ``path`` being the spool file of stdin or a FIFO
    (``paths.spooled``), None (stdin: no path, ``-``) or the FIFO's path."""
    state = load_state(state_path) if state_path is not None and not opts.reset_state else None
    _check_summarizer(opts)
    counted = None
    gathers = run_gathers(opts.strategy)  # (its own rule decides, on what pass 1 gathers for it)
    streams = may_stream(path, opts, state, from_bytes=0, gathers=gathers)
    staging = staging_for(output, state_path, state) if streams else None
    try:
        if streams:
            strategy: Any = get_strategy(opts.strategy) if gathers else None  # (its gathering, quiet)
            gather = strategy.gathering(state) if strategy else gathering(path, opts, budget)
            with progress("validating, cleaning and counting"):
                counted = count_file(path, opts, state, budget, state_path, _cache_loader(state_path, path),
                                     keep=True, gather=gather, name=source_name(name), resumes=gathers,
                                     stage=staging)
            extras = strategy.quiet(counted, opts, state) if strategy and counted is not None else None
            over = counted is None or counted.report.over_threshold
            if counted is not None and (extras is not None if strategy else not over) and \
                    may_write_streamed(counted.format, opts, counted.repairs):
                return _pass_through(path, name, counted, opts, state, state_path, output, warn, extras,
                                     staging if counted.staged else None)
            if counted is not None and (over or gathers) and may_compact_streamed(counted.format, opts):
                # (a strategy deciding by its own rule: an event due)
                streamed = _compact_streamed(path, name, counted, opts, state, state_path, output, warn)
                if streamed is not None:
                    return streamed
    finally:
        if staging is not None:
            staging.discard()  # (not the output's, or staged: a no-op)
    inp = InputData.load(path) if name == path else _named(InputData.load(path.read_bytes()), name)
    if inp.document is not None:
        warn(f"note: the input is {inp.document}, one JSON document: read as JSONL, one record per line "
             "(line N is its record N), and written as JSONL")
    if counted is not None and (len(inp.data) != counted.nbytes
                                or hashlib.sha256(inp.data).digest() != counted.digest):
        counted = None  # the file changed since pass 1: count what is read now
    return _run_locked(inp, opts, budget, state_path, output, False, warn, held=state, loaded=True,
                       counted=counted)


def _pass_through(path: Path, name: Path | None, counted: Counted, opts: Options, state: State | None,
                  state_path: Path | None, output: Path | BinaryIO | None, warn: Warn,
                  extras: dict[str, Any] | None = None, staged: Staging | None = None) -> RunResult:
    """Below the threshold: the cleaned context is the output; pass 2 writes it part by part. What the held
    route does after its strategy passes the context through, on pass 1's figures (the output is the context:
    its counts are the context's). ``extras``: the strategy's report keys, from what pass 1 gathered for it
    (``strategies.run_gathers``: nothing is due by its rule). ``staged``: ``Counted.staged``'s staging."""
    report, counts = counted.report, counted.counts
    ignored = ignored_usage_warning(report.calibrated)
    if ignored is not None:
        warn(ignored)
    if extras is not None:
        report.would_compact = False
    # (maskable: needs the whole context)
    report.extras = {**(extras or {}), "maskable_tokens": None, "maskable_results": None}
    cal = report.calibrated
    result = RunResult(
        transcript=Transcript(format=counted.format, records=[], source=counted.source),
        output_format=counted.format, compacted=False, tokens_before=cal.tokens, tokens_after=cal.tokens,
        estimate=report, repairs=counted.repairs, problems=[],
        state=state or new_state(counted.format), state_path=state_path,
        streamed=lambda: written_lines(path, counted, opts, output if isinstance(output, Path) else None),
        written=(len(counts.heuristic), report.from_input),  # the context, record for record
        held=_held_view(path, name, counted, opts, state))
    judge_fit(result, counts, report.budget, decided_upfront=True, system=counted.system)
    assert result.state is not None
    _note_input(result.state, name, counted.format)
    _note_run(result.state, result, counts)
    lines = written_lines(path, counted, opts, staged.target, staged=True) if staged is not None else None
    _write_both(result, output, state_path, lines, staged)
    if state_path is not None and counted.cache is not None:
        save_counts(cache_path(state_path), counted.cache)  # after the state, under its lock
    return result


def _run_locked(inp: InputData, opts: Options, budget: Budget, state_path: Path | None,
                output: Path | BinaryIO | None, dry_run: bool, warn: Warn, *, held: State | None = None,
                counts: CountCache | Path | None = None, as_log: bool = True, loaded: bool = False,
                counted: Counted | None = None) -> RunResult:
    state: State | None = held
    if not loaded:  # (``loaded``: ``held`` is the state as read under the lock, the summarizer checked)
        if state_path is not None and not opts.reset_state:
            state = load_state(state_path)
        if not dry_run:
            _check_summarizer(opts)
    covered = state.fingerprint.nbytes if state is not None and state.watermark > 0 else 0
    with progress("validating, cleaning and counting"):
        cache: CountCache | None
        cache_file: Path | None
        if counted is not None and counted.cache is not None and state_path is not None:
            cache, cache_file = counted.cache, cache_path(state_path)  # pass 1 took it and added its counts
            settled = None
        else:
            cache, cache_file = _count_cache(counts, state_path, len(inp.data))
            settled = _proven(cache, inp)
        ctx = build_context(inp, opts, state, schema=True, reapply=reapply_all, settled=settled)
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
    out_counts = _apply_strategy(si, result, dry_run)
    fmt = get_format(ctx.input_format)
    if as_log and _as_log(result, fmt):
        written = compaction_output(fmt, inp.data, result.transcript.records, result.tokens_before,
                                 result.tokens_after)
        if written is not result.transcript.records and fmt.compaction_note:
            warn(fmt.compaction_note)
        result.transcript = dataclasses.replace(result.transcript, records=written)
    if dry_run:
        return result
    assert result.state is not None
    _update_state(result.state, inp.path, inp.data, ctx, result, out_counts)
    _write_both(result, output, state_path)
    if cache is not None:
        # what the next call may take as read (docs/concepts/state.md#the-settled-prefix)
        cache.settle_read(inp.data, covered=covered, good=not ctx.problems and not ctx.dropped)
    if cache_file is not None and cache is not None:
        # after the state, under its lock (docs/concepts/state.md#the-count-cache)
        save_counts(cache_file, cache)
    return result


def _as_log(result: RunResult, fmt: Format) -> bool:
    """Whether the output is written as ``fmt``'s compaction (``jsonl.compaction_output``): an append-only
    log (Claude Code, Codex, ADK events) keeps its lines and records the compaction after them; an agent's
    own log records a masking that way too, so the agent's meter starts from the compacted size
    (docs/guides/claude-code-codex.md#what-the-clients-meters-show)."""
    return result.output_format == fmt.name and (
        result.summary is not None or (result.compacted and fmt.layout.agent_log))


def _apply_strategy(si: StrategyInput, result: RunResult, dry_run: bool, *, held: bool = True) -> Counts:
    """The strategy applied to ``si`` and judged: ``result`` says what to write; returns the counts of it.
    ``held=False`` (a streamed compaction, :mod:`.compaction_stream`): Unstreamable where the context itself
    would be written."""
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
    judge_fit(result, out_counts, si.budget, decided_upfront=not dropped)
    return out_counts


def _compact_streamed(path: Path, name: Path | None, counted: Counted, opts: Options, state: State | None,
                      state_path: Path | None, output: Path | BinaryIO | None,
                      warn: Warn) -> RunResult | None:
    """Over the threshold: the compaction made in pass 2 without holding the file (:mod:`.compaction_stream`),
    or None where only the held route gives what it gives (nothing said or written then)."""
    report = counted.report
    fmt = get_format(counted.format)
    seen = fmt.compaction_seen()  # an append-only log: what its compaction takes of its lines
    if seen is not None and any(r.kind == "orphan_result" for r in counted.repairs):
        return None  # (a result no line's call answers is not copied: formats.jsonl.history_lines)
    if seen is not None and counted.covered is not None:
        return None  # (what an append-only log's compaction takes of its lines includes the covered prefix's)
    said: list[str] = []  # told only if this route writes: the held route says it all again otherwise
    ignored = ignored_usage_warning(report.calibrated)
    if ignored is not None:
        said.append(ignored)
    cache = counted.cache
    try:
        with progress("reading the conversation again"):
            ctx, conversation, positions = read_conversation(path, counted, opts, seen)
            from .strategies.base import StrategyInput

            si = StrategyInput(ctx, opts, report.budget, state, report, said.append,
                               counter(ctx, counted.counts, opts, cache, positions), conversation)
            result = RunResult(
                transcript=ctx.transcript, output_format=counted.format, compacted=False,
                tokens_before=report.calibrated.tokens, tokens_after=report.calibrated.tokens,
                estimate=report, repairs=counted.repairs, problems=[],
                state=state or new_state(counted.format), state_path=state_path)
            out_counts = _apply_strategy(si, result, False, held=False)
    except Unstreamable:
        return None
    view = _held_view(path, name, counted, opts, state, result)  # (the state as found: updated below)
    appended = fmt.compaction_appended(seen, result.transcript.records, result.tokens_before,
                                       result.tokens_after) if _as_log(result, fmt) else None
    if appended is not None:  # the input's lines copied, then the compaction (jsonl.compaction_output)
        if fmt.compaction_note:
            said.append(fmt.compaction_note)
        after = Transcript(counted.format, appended, counted.source)
        result.streamed = lambda: chain(input_lines(path, counted), write_transcript(after))
        # every record read is copied as the input's (formats.jsonl.history_lines), then what is appended
        result.written = (report.records + len(appended),
                          report.records + sum(r.origin is Origin.INPUT for r in appended))
    for message in said:
        warn(message)
    report.extras = {**report.extras, "maskable_tokens": None, "maskable_results": None}  # (needs the whole)
    assert result.state is not None
    # the fingerprint is of the bytes both passes read and hashed (state.HashedFile): the bytes summarized
    _update_state(result.state, name, HashedFile(path, counted.nbytes, counted.digest), ctx, result,
                  out_counts)
    _write_both(result, output, state_path)
    if state_path is not None and cache is not None:
        save_counts(cache_path(state_path), cache)  # after the state, under its lock
    result.held = view  # (after writing: lines() reads the compaction's records)
    return result


def _held_view(path: Path, name: Path | None, counted: Counted, opts: Options, state: State | None,
               compacted: RunResult | None = None) -> Callable[[], tuple[Transcript, Transcript | None]]:
    """What the held route's result holds, ``(transcript, context)``, made from the bytes both passes read
    when a caller first reads either (``RunResult.held``): the context by the held route's own
    ``build_context`` with the state as the run found it; the transcript that context (it passed through)
    or the compaction's, written as the held route writes it (``jsonl.compaction_output``)."""
    before = copy.deepcopy(state)  # (the result's state is this run's, updated after)
    made_records = compacted.transcript if compacted is not None else None

    def made() -> tuple[Transcript, Transcript | None]:
        with open_input(path) as stream:
            data = stream.read(counted.nbytes)
        if len(data) != counted.nbytes or hashlib.sha256(data).digest() != counted.digest:
            raise InputError(f"{path} changed since it was read; run again")
        ctx = build_context(InputData(data, name), opts, before, schema=True, reapply=reapply_all)
        if compacted is None or made_records is None:
            return ctx.transcript, ctx.transcript
        fmt = get_format(counted.format)
        if not _as_log(compacted, fmt):
            return made_records, ctx.transcript
        written = compaction_output(fmt, data, made_records.records, compacted.tokens_before,
                                 compacted.tokens_after)
        return dataclasses.replace(made_records, records=written), ctx.transcript

    return made


def _count_cache(counts: CountCache | Path | None, state_path: Path | None,
                 input_bytes: int) -> tuple[CountCache | None, Path | None]:
    """The count cache of this call, not yet begun (``CountCache.use`` once the format is known): held by
    the caller, or kept beside the state (``counts`` names the state file of a caller that holds the lock),
    and the file to keep it in."""
    if isinstance(counts, CountCache):
        return counts, None
    at = counts if counts is not None else state_path
    if at is None:
        return None, None  # no state: nothing to keep the counts in
    return load_counts(cache_path(at), None, input_bytes), cache_path(at)


def _proven(cache: CountCache | None, inp: InputData) -> tuple[str, int] | None:
    """The settled prefix of the last call, if the input still starts with it: (its format, its bytes)."""
    if cache is None or cache.format is None or not cache.prove(inp.data):
        return None
    return cache.format, cache.proven


def _write_both(result: RunResult, output: Path | BinaryIO | None, state_path: Path | None,
                lines: Iterable[bytes] | None = None, staging: Staging | None = None) -> None:
    """The output and the state change together or not at all
    (docs/reference/safety.md#atomic-writes-output-and-state-together).

    The state is staged first (written and fsynced beside its path, not yet in place), so a full disk or a
    read-only folder fails before anything is visible. Then the output is written, then the state renamed
    into place: the state is what the next run and `calibrate` trust (its watermark, and the estimate of
    what was written that the provider's next figure is paired with), so it must never describe an output
    that was not delivered. If that last rename fails, a file output is put back as it was; a stream
    (stdout) cannot be taken back, and the message says so. ``lines``, ``staging``: the output written on
    after what its temporary file holds (``_pass_through``)."""
    assert result.state is not None
    staged = stage_state(state_path, result.state) if state_path is not None else None
    try:
        written = write_lines(result.lines() if lines is None else lines, output, keep=staged is not None,
                              staging=staging) if output is not None else None
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


def _update_state(state: State, path: Path | None, data: bytes | Path | HashedFile, ctx: Context,
                  result: RunResult, out_counts: Counts) -> None:
    _note_input(state, path, ctx.input_format)
    outcome = result.outcome
    if outcome is not None and outcome.compacted:
        from .strategies.base import Written

        outcome.commit(state, Written(ctx=ctx, data=data, tokens_before=result.tokens_before,
                                      tokens_after=result.tokens_after, counts=out_counts))
        add_compaction(
            state, strategy=outcome.strategy, tokens_before=result.tokens_before,
            tokens_after=outcome.tokens_after if outcome.tokens_after is not None else result.tokens_after,
            records_covered=outcome.covered, watermark=state.watermark,
            summarizer=outcome.summary.summarizer if outcome.summary is not None else None,
            fallback=outcome.fallback, duration_s=outcome.duration_s, tier=outcome.tier,
            input_lines=ctx.input_lines)
    _note_run(state, result, out_counts)


def _note_input(state: State, path: Path | None, fmt: str) -> None:
    if path is not None:
        state.input = InputInfo(path=str(path), format=fmt)


def _note_run(state: State, result: RunResult, out_counts: Counts) -> None:
    """What every writing run records after what its strategy did: what it measured and the estimate of
    what it wrote."""
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

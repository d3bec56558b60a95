"""``run`` of a file without holding it (docs/DESIGN.md "The flow of `run`"): pass 1 reads, validates, cleans,
counts and decides record by record (:mod:`.streaming`); a context that passes through is written by pass 2
(:func:`pass_through`), a compaction the strategy and summarizer allow is made in pass 2
(:func:`compact_streamed`, :mod:`.compaction_stream`), anything else reads the file held (:mod:`.route_held`).
:func:`held_view` makes the held route's transcripts of such a run when a caller first reads them."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
from collections.abc import Callable
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from .atomic import Staging
from .budget import Budget
from .compaction_stream import context_of, gathering, input_lines, may_compact_streamed, read_conversation
from .context import Context, build_context
from .errors import InputError, Unstreamable
from .formats import get_format
from .formats.jsonl import compaction_output, write_transcript
from .mask_stream import StreamedMask, may_mask_streamed
from .mask_stream import gathering as mask_gathering
from .model import Origin, Transcript
from .options import Options
from .paths import open_input
from .pipeline import counter, describe, ignored_usage_warning
from .plugins import OFFLINE, SUMMARIZERS
from .progress import progress
from .result import RunResult, Warn, judge_fit
from .route_held import apply_strategy, run_locked, written_as_log
from .run_setup import cache_loader, check_summarizer, named, note_document
from .run_write import note_input, note_run, update_state, write_both
from .source import InputData, source_name
from .state import HashedFile, State, load_state, new_state
from .state.cache import cache_path, save_counts
from .strategies import get_strategy, masks_streamed, reapply_all, run_gathers
from .streaming import Counted, count_file, may_stream, may_write_streamed, staging_for, written_lines

if TYPE_CHECKING:
    from .report import EstimateReport
    from .tokens.counts import Counts


def run_file(path: Path, opts: Options, budget: Budget, state_path: Path | None,
             output: Path | BinaryIO | None, warn: Warn, name: Path | None) -> RunResult:
    """:func:`_run_file`, an LLM summary asked for once: the held route answered as the streamed compaction
    it took over was (``summarizers.base.replies_kept``). An offline summarizer asks nothing: the hook's
    usual call does not load the summarizers for it."""
    if SUMMARIZERS.has(opts.summarizer, OFFLINE):
        return _run_file(path, opts, budget, state_path, output, warn, name)
    from .summarizers.base import replies_kept

    with replies_kept():
        return _run_file(path, opts, budget, state_path, output, warn, name)


def _run_file(path: Path, opts: Options, budget: Budget, state_path: Path | None,
              output: Path | BinaryIO | None, warn: Warn, name: Path | None) -> RunResult:
    """``run`` of a file without holding it (docs/DESIGN.md, "The flow of `run`"): pass 1 reads, validates,
    cleans, counts and decides record by record (``streaming.count_file``, after a state's covered prefix
    too); a context that passes through is written by pass 2, which reads the same bytes again
    (``streaming.written_lines``); a compaction of the default path is made in pass 2
    (``compact_streamed``), any other reads the file held, with pass 1's counts. Whatever ``streaming``
    does not take is read held, as always. ``name``: how the state, the transcripts and the messages name
    the input, as the held route names it: ``path``; or, ``path`` being the spool file of stdin or a FIFO
    (``paths.spooled``), None (stdin: no path, ``-``) or the FIFO's path."""
    state = load_state(state_path) if state_path is not None and not opts.reset_state else None
    check_summarizer(opts)
    counted = None
    gathers = run_gathers(opts.strategy)  # (its own rule decides, on what pass 1 gathers for it)
    masks = not gathers and masks_streamed(opts.strategy, opts)  # (mask's keys; masked in pass 2)
    streams = may_stream(path, opts, state, from_bytes=0, gathers=gathers or masks)
    staging = staging_for(output, state_path, state) if streams else None
    try:
        if streams:
            strategy: Any = get_strategy(opts.strategy) if gathers else None  # (its gathering, quiet)
            gather = strategy.gathering(state) if strategy else \
                mask_gathering(path, opts, budget) if masks else gathering(path, opts, budget)
            with progress("validating, cleaning and counting"):
                counted = count_file(path, opts, state, budget, state_path, cache_loader(state_path, path),
                                     keep=True, gather=gather, name=source_name(name), resumes=gathers,
                                     stage=staging)
            extras = strategy.quiet(counted, opts, state) if strategy and counted is not None else \
                _mask_quiet(counted, opts, state) if masks and counted is not None else None
            over = counted is None or counted.report.over_threshold
            if counted is not None and (extras is not None if strategy or masks else not over) and \
                    may_write_streamed(counted.format, opts, counted.repairs):
                return pass_through(path, name, counted, opts, state, state_path, output, warn, extras,
                                    staging if counted.staged else None)
            if counted is not None and masks and over and may_mask_streamed(counted.format, opts, counted):
                masked = mask_streamed(path, name, counted, opts, state, state_path, output, warn)
                if masked is not None:
                    return masked
            elif counted is not None and (over or gathers) and may_compact_streamed(counted.format, opts):
                # (a strategy deciding by its own rule: an event due)
                streamed = compact_streamed(path, name, counted, opts, state, state_path, output, warn)
                if streamed is not None:
                    return streamed
    finally:
        if staging is not None:
            staging.discard()  # (not the output's, or staged: a no-op)
    inp = InputData.load(path) if name == path else named(InputData.load(path.read_bytes()), name)
    note_document(inp, warn)
    if counted is not None and (len(inp.data) != counted.nbytes
                                or hashlib.sha256(inp.data).digest() != counted.digest):
        counted = None  # the file changed since pass 1: count what is read now
    return run_locked(inp, opts, budget, state_path, output, False, warn, held=state, loaded=True,
                      counted=counted)


def pass_through(path: Path, name: Path | None, counted: Counted, opts: Options, state: State | None,
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
        held=held_view(path, name, counted, opts, state))
    judge_fit(result, counts, report.budget, decided_upfront=True, system=counted.system)
    assert result.state is not None
    note_input(result.state, name, counted.format)
    note_run(result.state, result, counts)
    lines = written_lines(path, counted, opts, staged.target, staged=True) if staged is not None else None
    write_both(result, output, state_path, lines, staged)
    if state_path is not None and counted.cache is not None:
        save_counts(cache_path(state_path), counted.cache)  # after the state, under its lock
    return result


def compact_streamed(path: Path, name: Path | None, counted: Counted, opts: Options, state: State | None,
                     state_path: Path | None, output: Path | BinaryIO | None,
                     warn: Warn) -> RunResult | None:
    """Over the threshold: the compaction made in pass 2 without holding the file (:mod:`.compaction_stream`),
    or None where only the held route gives what it gives (nothing said or written then)."""
    report = counted.report
    fmt = get_format(counted.format)
    seen = fmt.compaction_seen()  # an append-only log: what its compaction takes of its lines
    if seen is not None and any(r.kind == "orphan_result" for r in counted.repairs):
        return None  # (a result no line's call answers is not copied: formats.jsonl.history_lines)
    if seen is not None and counted.covered is not None and (state is None or not state.fingerprint.history):
        # what its compaction takes of its lines includes the covered prefix's: taken in pass 2 only where the
        # state says each of them is a line the compaction copies (compaction_stream.take_prefix)
        return None
    said = _said(report)
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
            out_counts = apply_strategy(si, result, False, held=False)
    except Unstreamable:
        return None
    view = held_view(path, name, counted, opts, state, result)  # (the state as found: updated below)
    appended = fmt.compaction_appended(seen, result.transcript.records, result.tokens_before,
                                       result.tokens_after) if written_as_log(result, fmt) else None
    if appended is not None:  # the input's lines copied, then the compaction (jsonl.compaction_output)
        if fmt.compaction_note:
            said.append(fmt.compaction_note)
        after = Transcript(counted.format, appended, counted.source)
        result.streamed = lambda: chain(input_lines(path, counted), write_transcript(after))
        # every record read is copied as the input's (formats.jsonl.history_lines), then what is appended
        result.written = (report.records + len(appended),
                          report.records + sum(r.origin is Origin.INPUT for r in appended))
    report.extras = {**report.extras, "maskable_tokens": None, "maskable_results": None}  # (needs the whole)
    return _written(result, said, warn, path, name, counted, ctx, out_counts, output, state_path, view)


def _said(report: EstimateReport) -> list[str]:
    """What a change made in pass 2 tells, told only if that route writes (the held route says it all again
    otherwise): to begin with, that the usage recorded was ignored."""
    ignored = ignored_usage_warning(report.calibrated)
    return [ignored] if ignored is not None else []


def _written(result: RunResult, said: list[str], warn: Warn, path: Path, name: Path | None, counted: Counted,
             ctx: Context, out_counts: Counts, output: Path | BinaryIO | None, state_path: Path | None,
             view: Callable[[], tuple[Transcript, Transcript | None]]) -> RunResult:
    """A change made in pass 2 (a compaction, a masking): what it says told, the state updated, the output
    and the state written, the count cache saved; ``view`` the held route's transcripts (``held_view``)."""
    for message in said:
        warn(message)
    assert result.state is not None
    # the fingerprint is of the bytes both passes read and hashed (state.HashedFile): the bytes changed
    update_state(result.state, name, HashedFile(path, counted.nbytes, counted.digest), ctx, result,
                 out_counts)
    write_both(result, output, state_path)
    if state_path is not None and counted.cache is not None:
        save_counts(cache_path(state_path), counted.cache)  # after the state, under its lock
    result.held = view  # (after writing: lines() reads the records written)
    return result


def _mask_quiet(counted: Counted, opts: Options, state: State | None) -> dict[str, Any] | None:
    from .strategies.mask import quiet  # (a run that masks loads it anyway)

    return quiet(counted, opts, state)


def mask_streamed(path: Path, name: Path | None, counted: Counted, opts: Options, state: State | None,
                  state_path: Path | None, output: Path | BinaryIO | None, warn: Warn) -> RunResult | None:
    """Over the threshold, the strategy masking first (``strategies.masks_streamed``): its ``describe`` and
    ``apply`` as on the held route, given the file read again (:class:`mask_stream.StreamedMask`) instead
    of the context's records; or None where only the held route gives what it gives (nothing said or
    written then)."""
    report = counted.report
    said = _said(report)
    cache = counted.cache
    ctx = context_of(counted, 0, 0)  # (its records and lines: once the masking read them)
    positions: dict[int, int] = {}
    masking = StreamedMask(path, counted, opts, ctx, counter(ctx, counted.counts, opts, cache, positions),
                           positions)
    from .strategies.base import StrategyInput

    given: Any = masking  # (StrategyInput.conversation: what strategies.mask.masking_of takes)
    si = masking.si = StrategyInput(ctx, opts, report.budget, state, report, said.append, masking.count,
                                    given)
    result = RunResult(
        transcript=ctx.transcript, output_format=counted.format, compacted=False,
        tokens_before=report.calibrated.tokens, tokens_after=report.calibrated.tokens, estimate=report,
        repairs=counted.repairs, problems=[], state=state or new_state(counted.format), state_path=state_path)
    try:
        with progress("masking"):
            describe(report, si)
            out_counts = apply_strategy(si, result, False, held=False, output_system=counted.system)
    except Unstreamable:
        return None
    made = held_view(path, name, counted, opts, state)  # (the state as found: updated below)

    def view() -> tuple[Transcript, Transcript | None]:
        _, context = made()
        assert context is not None
        return dataclasses.replace(context, records=list(masking.records(iter(context.records)))), context

    result.streamed = masking.lines
    result.written = (len(out_counts.heuristic), masking.from_input)
    return _written(result, said, warn, path, name, counted, ctx, out_counts, output, state_path, view)


def held_view(path: Path, name: Path | None, counted: Counted, opts: Options, state: State | None,
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
        if not written_as_log(compacted, fmt):
            return made_records, ctx.transcript
        written = compaction_output(fmt, data, made_records.records, compacted.tokens_before,
                                 compacted.tokens_after)
        return dataclasses.replace(made_records, records=written), ctx.transcript

    return made

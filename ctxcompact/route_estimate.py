"""``estimate``: a dry run on a transcript, streamed record by record from the size a file is
(``streaming.stream_report``), else held; the same stages as ``run`` (docs/DESIGN.md "The flow of `run`")."""

from __future__ import annotations

import sys
from pathlib import Path

from .budget import Budget
from .context import build_context
from .options import Options, check_options
from .paths import spooled, spooled_fifo
from .pipeline import budget_from_transcript, count_and_decide, counter, describe
from .progress import progress
from .report import EstimateReport
from .run_setup import (
    budget_for,
    cache_loader,
    is_fifo_source,
    named,
    proven,
    resolve_state_path,
    stderr_warn,
)
from .source import InputData, Source, is_file, is_stdin, source_name
from .state import State, load_state
from .state.cache import cache_path, load_counts
from .strategies import reapply_all
from .streaming import STREAMING_FROM_BYTES, may_stream, stream_report
from .tokens.counts import check_exact, count_key


def estimate(source: Source, opts: Options | None = None) -> EstimateReport:
    """Dry run on a transcript: counts, calibration, budget and the compaction decision.

    Reads the state (if any) but writes nothing."""
    opts = opts or Options()
    check_options(opts)
    check_exact(opts)
    budget = budget_for(opts)
    state_path = resolve_state_path(source, opts, required=False)
    state = None if (state_path is None or opts.reset_state) else load_state(state_path)
    if (is_stdin(source) or is_fifo_source(source)) and may_stream(None, opts, state):
        name = None if is_stdin(source) else Path(source)  # type: ignore[arg-type]
        # streamed from the size a file is (paths.spooled: below it, read whole as always)
        below = STREAMING_FROM_BYTES - 1
        with spooled(sys.stdin.buffer, hold_below=below) if name is None else \
                spooled_fifo(name, hold_below=below) as got:
            if isinstance(got, bytes):
                inp = named(InputData.load(got), name)
            else:
                with progress("reading and counting"):
                    streamed = stream_report(got, opts, state, budget, state_path,
                                             cache_loader(state_path, got), name=source_name(name))
                if streamed is not None:
                    return streamed
                inp = named(InputData.load(got.read_bytes()), name)
        return estimate_held(inp, opts, state, budget, state_path)
    if is_file(source) and may_stream(Path(source), opts, state):  # type: ignore[arg-type]
        with progress("reading and counting"):
            streamed = stream_report(Path(source), opts, state, budget, state_path,  # type: ignore[arg-type]
                                     cache_loader(state_path, Path(source)))  # type: ignore[arg-type]
        if streamed is not None:
            return streamed
    return estimate_held(InputData.load(source), opts, state, budget, state_path)


def estimate_held(inp: InputData, opts: Options, state: State | None, budget: Budget,
                  state_path: Path | None) -> EstimateReport:
    with progress("reading and counting"):  # shown only on a terminal, and only if it takes a while
        # what earlier runs counted is looked up, never written: estimate does not take the state's lock
        cache = load_counts(cache_path(state_path), None, len(inp.data)) if state_path else None
        ctx = build_context(inp, opts, state, schema=True, reapply=reapply_all, settled=proven(cache, inp))
        budget = budget_from_transcript(budget, opts, ctx.transcript.records)
        if cache is not None:
            cache.use(count_key(opts, ctx.input_format))
            cache.keep = False  # nothing to keep it for: no per-record memory
        report, counts = count_and_decide(ctx, opts, state, budget, state_path, cache)
    from .strategies.base import StrategyInput

    describe(report, StrategyInput(ctx, opts, budget, state, report, stderr_warn,
                                   counter(ctx, counts, opts, cache)))
    return report

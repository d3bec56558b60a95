"""What a writing ``run`` leaves behind, on every route: the output and the state written together
(docs/reference/safety.md#atomic-writes-output-and-state-together), and the state updated with what the
strategy did, what the run measured and the estimate of what it wrote."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

from .atomic import Staging, write_lines
from .context import Context
from .errors import OutputError
from .result import RunResult
from .state import (
    HashedFile,
    InputInfo,
    State,
    add_compaction,
    record_estimate,
    remember_measured,
    stage_state,
)
from .tokens.counts import Counts


def write_both(result: RunResult, output: Path | BinaryIO | None, state_path: Path | None,
               lines: Iterable[bytes] | None = None, staging: Staging | None = None) -> None:
    """The output and the state change together or not at all
    (docs/reference/safety.md#atomic-writes-output-and-state-together).

    The state is staged first (written and fsynced beside its path, not yet in place), so a full disk or a
    read-only folder fails before anything is visible. Then the output is written, then the state renamed
    into place: the state is what the next run and `calibrate` trust (its watermark, and the estimate of
    what was written that the provider's next figure is paired with), so it must never describe an output
    that was not delivered. If that last rename fails, a file output is put back as it was; a stream
    (stdout) cannot be taken back, and the message says so. ``lines``, ``staging``: the output written on
    after what its temporary file holds (``pass_through``)."""
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


def update_state(state: State, path: Path | None, data: bytes | Path | HashedFile, ctx: Context,
                 result: RunResult, out_counts: Counts) -> None:
    note_input(state, path, ctx.input_format)
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
    note_run(state, result, out_counts)


def note_input(state: State, path: Path | None, fmt: str) -> None:
    if path is not None:
        state.input = InputInfo(path=str(path), format=fmt)


def note_run(state: State, result: RunResult, out_counts: Counts) -> None:
    """What every writing run records after what its strategy did: what it measured and the estimate of
    what it wrote."""
    # what this run measured (the transcript's usage, --real-tokens) outlives the records that carried it
    remember_measured(state, result.estimate.calibrated.measured, out_counts.estimator)
    # the estimate of what we wrote: the next `calibrate` pairs the provider's figure with it
    record_estimate(state, sum(out_counts.base), out_counts.estimator)

"""What ``run`` returns (:class:`RunResult`: always a real ``Transcript``, on every route, the one the held
route holds), the format it writes, and the checks of the result against the window (exit 5 and its
reasons)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .budget import Budget
from .clean import Repair
from .convert import lines_in
from .errors import ExitCode, Problem
from .formats import get_format, is_unchanged
from .model import Origin, Transcript
from .options import Options
from .plugins import FORMATS
from .report import EstimateReport
from .state import State
from .tokens.calibration import Calibrated
from .tokens.counts import Counts, system_tokens

if TYPE_CHECKING:  # (strategies.base is loaded by the routes that apply a strategy, not by a pass-through)
    from .strategies.base import Outcome
    from .summarizers.base import SummaryResult

Warn = Callable[[str], None]


@dataclass
class RunResult:
    """What ``run`` did: the transcript written (or that would be), the counts before and after, the state."""

    transcript: Transcript  # what was (or would be) written
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
    context: Transcript | None = None  # the effective context the strategy was given (before compacting)
    #: the output's lines read again from the input, when the run did not hold the file (:attr:`held`)
    streamed: Callable[[], Iterator[bytes]] | None = None
    #: (records written, of them the input's own) when ``transcript`` does not hold what was written
    written: tuple[int, int] | None = None
    #: a run that did not hold the file: makes the held route's ``(transcript, context)`` when either is
    #: first read (``engine.run``); a caller that reads neither never pays for them
    held: Callable[[], tuple[Transcript, Transcript | None]] | None = field(default=None, repr=False,
                                                                          compare=False)

    @property
    def summary(self) -> SummaryResult | None:
        """The summary the compaction made, or None."""
        return self.outcome.summary if self.outcome is not None else None

    def records_written(self) -> tuple[int, int]:
        """How many records were (or would be) written, and how many of them are the input's own
        (``Origin.INPUT``): ``run --json``'s ``records_out`` and ``kept.input_records``, the same on every
        route, without reading a streamed output again."""
        if self.written is not None:
            return self.written
        records = self._output().records
        return len(records), sum(1 for r in records if r.origin is Origin.INPUT)

    def lines(self) -> Iterator[bytes]:
        if self.streamed is not None:
            return self.streamed()
        return lines_in(self._output(), self.output_format)

    def _output(self) -> Transcript:
        """What was written, when :attr:`streamed` does not read it again: without making :attr:`held`'s
        context (a streamed compaction holds its records)."""
        return self.__dict__["_transcript"]


def _made_on_read(name: str) -> property:
    """``RunResult.transcript`` and ``.context``: a plain attribute, but on a result of a run that did not
    hold the file, both are made on first read (:attr:`RunResult.held`), so they are the held route's."""
    slot = f"_{name}"

    def get(self: RunResult) -> Transcript | None:
        chosen = self.__dict__.get("_chosen", ())  # set by the caller: never made over
        if self.held is not None and slot not in chosen:
            made = self.held()  # (cleared once made: a view that cannot be made says so on every read)
            self.held = None
            for name, value in zip(("_transcript", "_context"), made, strict=True):
                if name not in chosen:
                    self.__dict__[name] = value
        return self.__dict__[slot]

    def put(self: RunResult, value: Transcript | None) -> None:
        if self.held is not None:
            self.__dict__.setdefault("_chosen", set()).add(slot)
        self.__dict__[slot] = value

    return property(get, put)


RunResult.transcript = _made_on_read("transcript")  # type: ignore[assignment]
RunResult.context = _made_on_read("context")  # type: ignore[assignment]


def output_format(opts: Options, transcript: Transcript, warn: Warn) -> str:
    """The format to write: ``--to``, else the input's; a format that cannot be written faithfully writes its
    fallback (with a warning), unless the transcript passes through unchanged."""
    target = opts.to or transcript.format
    fmt = get_format(target)
    if not fmt.writable and not (target == transcript.format and is_unchanged(transcript)):
        fallback = fmt.fallback or FORMATS.default
        warn(f"the {target} format cannot be written faithfully; writing {fallback} instead")
        return fallback
    return target


def judge_fit(result: RunResult, out_counts: Counts, budget: Budget, *, decided_upfront: bool,
              system: int | None = None) -> None:
    """Exit 5 with a reason when the result does not fit the window; the strategy's own warnings; why a
    context over the threshold was not compacted (report.decide). ``system``: the output's system tokens,
    when its records are not held."""
    after = result.tokens_after
    report = result.estimate
    cal = report.calibrated
    if system is None:
        system = system_tokens(out_counts.base, result.transcript.records)
    fixed = cal.project(system)
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

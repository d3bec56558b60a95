"""``run --strategy mask`` (and ``--prune``'s mask tier) of a file without holding it (docs/DESIGN.md, "The
flow of `run`"): pass 1 reads, validates, cleans, counts and decides record by record as for any strategy
(``streaming.count_file``); below the threshold the context passes through, written by pass 2
(``route_file.pass_through``, the strategy's report keys from ``strategies.mask.quiet``). Over it, the
masking is made of the file read again, by the code that masks a held context:

- what the choice of the results to clear reads of each record (``strategies.mask.MaskScan``: each result's
  figures, each call's brief, the latest typed turn, the work in flight) is taken in pass 1 as it counts,
  when the file will most likely be over the threshold (:func:`gathering`), else by a read of its own;
- the choice (``MaskScan.plan``), then a read that masks each record (``MaskPlan.record``) and counts
  those it changes, with the run's counter and count cache: what ``mask_transcript`` and the exact count
  of what it frees give on a held context (:class:`StreamedMask`, given to the strategy as its masking
  input: ``strategies.mask.masking_of``);
- the strategy's own ``describe`` and ``apply`` and the engine's judgement, as held
  (``route_file.mask_streamed``); then a last read writes each part masked (:meth:`StreamedMask.lines`).

The held route is taken instead, before anything is written, where the output is not the masked context
written part by part (an agent's own log records a masking as its compaction: ``route_held.written_as_log``;
a format whose records are linked across lines, after a repair; ``--to``), and where the streamed masking
cannot give what it gives (``errors.Unstreamable``): masking that is not worth it (the context is written
whole), the work in flight still over the threshold (its results trimmed), ``--prune``'s summary tier.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .budget import Budget
from .compaction_stream import GATHER_BYTES_PER_TOKEN, context_parts
from .context import Context
from .errors import Unstreamable
from .formats import get_format
from .formats.jsonl import write_transcript
from .model import Origin, Record, Transcript
from .options import Options
from .streaming import Counted, may_write_streamed
from .tokens.counts import Counts

if TYPE_CHECKING:
    from .covered import Covered
    from .strategies.base import StrategyInput
    from .strategies.mask import MaskedResult, MaskParams, MaskPlan, MaskScan


def may_mask_streamed(fmt: str, opts: Options, counted: Counted | None = None) -> bool:
    """Whether the masking of a file pass 1 read may be made without holding it: its output is the masked
    context written part by part (not an agent's own log, which records a masking as its compaction)."""
    return not get_format(fmt).layout.agent_log and may_write_streamed(
        fmt, opts, counted.repairs if counted is not None else ())


class _Scan:
    """Pass 1's :class:`~.strategies.mask.MaskScan`, told each part the cleaner settles."""

    def __init__(self) -> None:
        from .strategies.mask import MaskScan

        self.scan = MaskScan()

    def add(self, part: list[Record]) -> None:
        for rec in part:
            self.scan.add(rec)


def gathering(path: Path, opts: Options,
              budget: Budget) -> Callable[[str, Covered | None, Any], tuple[_Scan, ...]]:
    """For pass 1 (``streaming.count_file``'s ``gather``, read from the start or the covered prefix): the
    scan masking reads, when the file will most likely be over the threshold (as
    ``compaction_stream.gathering`` judges it); else none, and an over-threshold call scans in a read of
    its own."""
    try:
        size = os.path.getsize(path)
    except OSError:
        size = 0

    def make(fmt: str, covered: Covered | None, reading: Any) -> tuple[_Scan, ...]:
        threshold = budget.threshold
        read = size - (covered.at if covered is not None else 0)
        if not threshold or read < GATHER_BYTES_PER_TOKEN * threshold or not may_mask_streamed(fmt, opts):
            return ()
        return (_Scan(),)

    return make


class StreamedMask:
    """``strategies.mask.HeldMask`` for a file not held (the module docstring): ``mask``, ``freed_exactly``,
    ``trim`` and ``thinking_boundary`` over the file read again. The masked context it gives holds no
    records (:attr:`out`: the run's counter gives its counts, :meth:`lines` writes it)."""

    def __init__(self, path: Path, counted: Counted, opts: Options, ctx: Context,
                 counter: Callable[[list[Record]], Counts], positions: dict[int, int]) -> None:
        self.path, self.counted, self.opts, self.ctx = path, counted, opts, ctx
        self.base_count, self.positions = counter, positions
        self.out: list[Record] = []  # the masked context's records: none held (a list the counter knows)
        self.plan: MaskPlan | None = None
        self.made: tuple[MaskParams, tuple[Transcript, list[MaskedResult], int]] | None = None
        self.exact = 0  # tokens freed, the changed records counted again
        self.out_counts: Counts | None = None
        self.from_input = 0  # records of the masked context that are the input's own
        self.scan: MaskScan | None = None
        self.si: StrategyInput | None = None  # (the run's, once made: trim counts with its counter)

    def count(self, records: list[Record]) -> Counts:
        """The run's counter (``StrategyInput.count``): the masked context's counts, made by :meth:`mask`."""
        if records is self.out and self.out_counts is not None:
            return self.out_counts
        return self.base_count(records)

    def _scan(self) -> MaskScan:
        gathered = self.counted.gathered
        if gathered is not None and isinstance(gathered[0], _Scan):
            return gathered[0].scan
        from .strategies.mask import MaskScan

        scan = MaskScan()
        for part in context_parts(self.path, self.counted, self.opts)[1]:
            for rec in part:
                scan.add(rec)
        return scan

    def mask(self, base: Sequence[int], params: MaskParams) -> tuple[Transcript, list[MaskedResult], int]:
        """``mask_transcript`` of the context: the plan, then a read that masks each record and counts those
        it changes (as the held route counts the masked context). Made once for the run's options."""
        if self.made is not None and self.made[0] == params:
            return self.made[1]
        self.scan = self._scan()
        plan = self.plan = self.scan.plan(base, params, self.counted.format)
        heuristic: list[int] = []
        exact: list[int] | None = [] if self.counted.counts.exact is not None else None
        entries: list[MaskedResult] = []
        freed, changed, ri = 0, False, 0
        lines: list[int] = []
        reading, parts = context_parts(self.path, self.counted, self.opts, lines)
        for part in parts:
            out: list[Record] = []
            for rec in part:
                new, gained, cleared = plan.record(ri, rec, base[ri])
                if new is rec:
                    self.positions[id(rec)] = ri  # (counted: pass 1's count of it)
                changed = changed or new is not rec
                freed += gained
                entries.extend(cleared)
                ri += 1
                if new is not None:
                    out.append(new)
                    self.from_input += new.origin is Origin.INPUT
            counts = self.base_count(out)
            self.positions.clear()
            heuristic.extend(counts.heuristic)
            if exact is not None:
                exact.extend(counts.exact or counts.heuristic)
        self.ctx.input_records = reading.records
        covered = self.counted.covered
        self.ctx.input_lines = lines[0] + (covered.line - 1 if covered is not None else 0)
        self.out_counts = Counts(heuristic, exact, self.counted.counts.encoding)
        self.exact = max(0, sum(base) - sum(self.out_counts.base))
        made: tuple[Transcript, list[MaskedResult], int]
        if not entries and not changed:
            made = (self.ctx.transcript, [], 0)
        else:
            made = (Transcript(self.counted.format, self.out, self.counted.source), entries, freed)
        self.made = (params, made)
        return made

    def freed_exactly(self, base: Sequence[int], masked: Transcript) -> int:
        return self.exact

    def trim(self, masked: Transcript) -> tuple[Transcript, list[MaskedResult]]:
        """Still over the threshold: whether the work in flight (never cleared: the scan's last records, as
        the masked context holds them) has results to trim, by ``strategies.tail.fit_in_place`` on what the
        rest of the masked context counts; where it has, Unstreamable (the held route trims them)."""
        from .strategies.tail import fit_in_place, in_flight_records

        assert self.si is not None and self.scan is not None and self.out_counts is not None
        tail = in_flight_records(self.scan.flight.kept)
        if not tail or masked is self.ctx.transcript:
            return masked, []
        si = self.si
        rest = sum(self.out_counts.base) - si.tokens(tail)
        if fit_in_place(tail, rest, si.budget, si.ctx.transcript.source, si.report.calibrated, si.tokens,
                        under_threshold=True, headroom=si.budget.summary_budget) is not None:
            raise Unstreamable("the work in flight's results are trimmed")
        return masked, []

    def thinking_boundary(self, params: MaskParams) -> int:
        assert self.plan is not None
        return self.plan.thinking_before

    def records(self, records: Iterator[Record]) -> Iterator[Record]:
        """The masked context's records, ``records`` being the context's in order."""
        assert self.plan is not None
        plan = self.plan
        for ri, rec in enumerate(records):
            new = plan.record(ri, rec, 0)[0]
            if new is not None:
                yield new

    def lines(self) -> Iterator[bytes]:
        """The masked context written part by part, the file read again (as ``write_transcript`` writes the
        whole: each part's records as the held route writes them)."""
        assert self.plan is not None
        plan, ri = self.plan, 0
        fmt, source = self.counted.format, self.counted.source
        for part in context_parts(self.path, self.counted, self.opts)[1]:
            out: list[Record] = []
            for rec in part:
                new = plan.record(ri, rec, 0)[0]
                ri += 1
                if new is not None:
                    out.append(new)
            yield from write_transcript(Transcript(fmt, out, source))

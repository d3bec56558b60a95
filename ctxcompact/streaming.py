"""``estimate`` of a large file, record by record (docs/measurements/performance.md#a-hooks-call): the
same stages as every other call (``formats.jsonl.parse_record``, ``clean.Cleaner``,
``tokens.counts.count_records``, ``pipeline.calibrate_counts``, ``report.make_report``), without holding the
transcript. The cleaner hands out each part of the transcript as it settles; the part is counted and
dropped, so memory follows the largest record and the part the cleaner holds, not the file. Only small
integers per message are kept (the counts: the calibration from recorded usage needs their prefix sums).

The held route (``context.build_context``) is taken instead where the whole is needed: a small file (it
also says what masking would free), a state beyond a calibration (a covered prefix, events, masking), a
strategy whose ``describe`` needs the context, ``--exact anthropic``, a format whose reader finishes over the
whole file (``Format.finish``: Anthropic names results, Claude Code follows its tree), detection that the
first lines do not decide, and any line the reader does not take (the held route reports it, or drops it
with ``--lenient``, as always).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .budget import Budget
from .clean import Cleaner
from .context import closes_trailing
from .errors import LineError, Problem
from .formats import DETECT_LINES, detect, get_format
from .formats.base import Format
from .formats.jsonl import parse_record
from .formats.registry import decided
from .model import Record
from .options import Options
from .paths import open_input
from .pipeline import budget_from_transcript, calibrate_counts, make_estimate_report, usage_points
from .reader import decode_line, iter_lines_at
from .report import ContextStats, EstimateReport, context_stats
from .state import State
from .strategies import get_strategy
from .tokens.cache import CountCache
from .tokens.calibration import UsagePoint
from .tokens.counts import Counts, count_key, count_records, encoding_name, system_tokens

#: ``estimate`` streams from this file size on; below it, it holds the context and also says what masking
#: would free (``maskable_tokens``; null when streamed)
STREAMING_FROM_BYTES = 8 * 1024 * 1024


#: ``(count key) -> CountCache``: the counts earlier calls kept
CacheLoader = Callable[[tuple[str, str | None]], CountCache]


class _Held(Exception):
    """This file takes the held route (see the module docstring)."""


def may_stream(path: Path, opts: Options, state: State | None) -> bool:
    """Whether ``estimate`` of ``path`` may stream, before reading it."""
    if opts.exact == "anthropic" or get_strategy(opts.strategy).estimate_needs_context(opts):
        return False
    if state is not None and (state.watermark > 0 or state.summary or state.holds_sections()):
        return False
    try:
        return os.path.getsize(path) >= STREAMING_FROM_BYTES and Path(path).is_file()
    except OSError:
        return False  # the held route says what is wrong with it


class _Totals:
    """What the report needs of the parts counted so far."""

    def __init__(self, fmt: str, opts: Options, budget: Budget, cache: CountCache | None) -> None:
        self.opts, self.cache, self.base_budget = opts, cache, budget
        self.budget = budget
        self.heuristic: list[int] = []
        self.exact: list[int] | None = None if opts.exact == "none" else []
        self.usage: list[UsagePoint] = []
        self.system = 0
        self.stats = ContextStats(format=fmt, records=0, covered=0)
        self.pending: list[Record] = []
        self.pending_bytes = 0

    #: settled records are counted in batches of about this many bytes (one tiktoken call per batch: a call
    #: per settled part would pay its start-up hundreds of times)
    BATCH_BYTES = 4_000_000

    def add(self, part: list[Record]) -> None:
        self.pending.extend(part)
        self.pending_bytes += sum(len(r.raw) if r.raw is not None else 0 for r in part)
        if self.pending_bytes >= self.BATCH_BYTES:
            self.flush()

    def flush(self) -> None:
        part, self.pending, self.pending_bytes = self.pending, [], 0
        if not part:
            return
        counts = count_records(part, self.opts, self.cache)
        at = len(self.heuristic)
        self.usage.extend(dataclasses.replace(p, position=p.position + at) for p in usage_points(part))
        self.heuristic.extend(counts.heuristic)
        if self.exact is not None and counts.exact is not None:
            self.exact.extend(counts.exact)
        self.system += system_tokens(counts.base, part)
        found = budget_from_transcript(self.base_budget, self.opts, part)
        if found is not self.base_budget:  # the latest window the log records wins, as when held
            self.budget = found
        s = context_stats(part, self.stats.format, 0, 0, 0)
        for role, n in s.messages.items():
            self.stats.messages[role] = self.stats.messages.get(role, 0) + n
        self.stats.tool_calls += s.tool_calls
        self.stats.chars += s.chars


def stream_report(path: Path, opts: Options, state: State | None, budget: Budget, state_path: Path | None,
                  load_cache: CacheLoader | None = None) -> EstimateReport | None:
    """The report of ``path`` read record by record, or None when it takes the held route. ``load_cache``:
    ``(key) -> CountCache``, the counts earlier calls kept (looked up, never added to)."""
    try:
        with open_input(path) as stream:
            return _stream(path, iter_lines_at(stream), opts, state, budget, state_path, load_cache)
    except (_Held, OSError):
        return None


def _stream(path: Path, lines: Iterator[tuple[int, int, bytes]], opts: Options, state: State | None,
            budget: Budget, state_path: Path | None,
            load_cache: CacheLoader | None) -> EstimateReport:
    head: list[tuple[int, int, bytes, Any]] = []
    chosen: Format | None = None if opts.format == "auto" else get_format(opts.format)
    records = 0
    cleaner: Cleaner | None = None
    totals: _Totals | None = None
    finish: Callable[[Record], None] | None = None

    def refuse(problem: Problem) -> None:
        raise _Held(str(problem))

    def start(fmt: Format) -> tuple[Cleaner, _Totals]:
        nonlocal finish
        finish = fmt.finish_stream()
        if finish is None:
            raise _Held(f"{fmt.name} reads over the whole file")
        cache = load_cache(count_key(opts, fmt.name)) if load_cache is not None else None
        if cache is not None:
            cache.keep = False  # estimate looks up; it never writes the cache
        cleaner = Cleaner(fmt.layout, fmt.name, source=str(path), close_trailing=closes_trailing(opts))
        return cleaner, _Totals(fmt.name, opts, budget, cache)

    def feed(fmt: Format, lineno: int, offset: int, raw: bytes, obj: Any) -> None:
        nonlocal records
        rec = parse_record(fmt, obj, records, lineno, raw, offset, True, refuse)
        assert rec is not None and cleaner is not None and totals is not None and finish is not None
        finish(rec)
        records += 1
        totals.add(cleaner.feed(rec))

    for lineno, offset, raw in lines:
        try:
            obj = decode_line(raw, lineno)
        except LineError as err:
            raise _Held(err.message) from None
        if chosen is None:
            head.append((lineno, offset, raw, obj))
            if len(head) < DETECT_LINES:
                continue
            if not decided([h[3] for h in head]):
                raise _Held("the first lines do not decide the format: detection reads on")
            chosen = get_format(detect([h[3] for h in head], [h[0] for h in head]))
            cleaner, totals = start(chosen)
            for item in head:
                feed(chosen, *item)
            head = []
            continue
        if cleaner is None:
            cleaner, totals = start(chosen)
        feed(chosen, lineno, offset, raw, obj)
    if chosen is None:  # a short file: detected from every line, as when held
        if not head:
            raise _Held("empty")
        chosen = get_format(detect([h[3] for h in head], [h[0] for h in head]))
    if cleaner is None:
        cleaner, totals = start(chosen)
        for item in head:
            feed(chosen, *item)
    assert cleaner is not None and totals is not None
    if records <= 1:
        raise _Held("one record: perhaps a whole-file JSON document (reader.split_document)")
    done = cleaner.finish()
    totals.add(done.transcript.records)
    totals.flush()
    totals.stats.records, totals.stats.repairs = records, len(done.repairs)
    encoding = encoding_name(opts) if totals.exact is not None else None
    counts = Counts(totals.heuristic, totals.exact, encoding)
    cal = calibrate_counts(counts, totals.usage, opts, state)
    report = make_estimate_report(totals.stats, counts, cal, totals.budget, totals.system, opts, state_path)
    report.extras = {"maskable_tokens": None, "maskable_results": None}  # needs the whole context
    return report

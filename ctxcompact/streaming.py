"""A file read record by record, in two passes by byte offset (docs/measurements/performance.md#a-hooks-call):
the same stages as every other call (``formats.jsonl.parse_record``, ``clean.Cleaner``,
``tokens.counts.count_records``, ``pipeline.calibrate_counts``, ``report.make_report``), without holding the
transcript. The cleaner hands out each part of the transcript as it settles; the part is counted and
dropped, so memory follows the largest record and the part the cleaner holds, not the file. Only small
integers per message are kept (the counts: the calibration from recorded usage needs their prefix sums).

Pass 1 (:func:`count_file`) reads, validates, cleans, counts and decides: ``estimate`` of a large file is that
pass. ``run`` from the command line (``engine.run(hold=False)``) takes it at any size; when the context
passes through, pass 2 (:func:`written_lines`) reads the same bytes again and writes each settled part as
it comes. A compaction of the default path is made in pass 2 too (:mod:`.compaction_stream`: the records
read again into the conversation reader and the fact feed); any other reads the file held, with pass 1's
counts.

The held route (``context.build_context``) is taken instead where the whole is needed: a small file for
``estimate`` (it also says what masking would free), a state beyond a calibration (a covered prefix, events,
masking), a strategy whose ``describe`` needs the context, ``--exact anthropic``, a format whose reader
finishes over the whole file (``Format.finish``: Anthropic names results, Claude Code follows its tree),
detection that the first lines do not decide, and any line the reader does not take (the held route reports
it, or drops it with ``--lenient``, as always).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from .budget import Budget
from .clean import Cleaner, Repair
from .context import closes_trailing
from .errors import InputError, LineError, Problem
from .formats import DETECT_LINES, get_format
from .formats.base import Format
from .formats.jsonl import parse_record, write_transcript
from .formats.registry import Detector
from .model import Record, Transcript
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


def may_stream(path: Path, opts: Options, state: State | None, from_bytes: int | None = None) -> bool:
    """Whether ``estimate`` (or ``run``, at any size: ``from_bytes=0``) of ``path`` may stream, before
    reading it."""
    if opts.exact == "anthropic" or get_strategy(opts.strategy).estimate_needs_context(opts):
        return False
    if state is not None and (state.watermark > 0 or state.summary or state.holds_sections()
                              or state.fingerprint.nbytes > 0):
        return False  # a covered prefix to check and replace, or layers to apply again
    try:
        least = STREAMING_FROM_BYTES if from_bytes is None else from_bytes
        return os.path.getsize(path) >= least and Path(path).is_file()
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
        self.cache = cache

    #: settled records are counted in batches of about this many bytes or records (one tiktoken call per
    #: batch: a call per settled part would pay its start-up hundreds of times; a batch's records are what
    #: is held while counting, so tiny lines are bounded by number too)
    BATCH_BYTES = 1000000
    BATCH_RECORDS = 4096

    def add(self, part: list[Record]) -> None:
        self.pending.extend(part)
        self.pending_bytes += sum(len(r.raw) if r.raw is not None else 0 for r in part)
        if self.pending_bytes >= self.BATCH_BYTES or len(self.pending) >= self.BATCH_RECORDS:
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


@dataclass(slots=True)
class Counted:
    """Pass 1 of a file read record by record: what the decision needs, nothing per record but the counts."""

    report: EstimateReport
    counts: Counts  # of every record of the cleaned context, in order
    format: str
    repairs: list[Repair]
    nbytes: int  # the bytes pass 1 read; pass 2 reads exactly these
    digest: bytes  # their BLAKE2b: pass 2 checks it read the same bytes
    system: int  # tokens of the system records (kept verbatim by any compaction)
    cache: CountCache | None  # the count cache the counts were taken from and added to
    #: the cleaned context is the input's lines themselves, in order (nothing repaired, made or dropped):
    #: pass 2 copies them without parsing them again
    verbatim: bool = False


class _Hashing:
    """A binary stream's ``readline`` that hashes what it hands out and stops after ``limit`` bytes."""

    def __init__(self, stream: BinaryIO, limit: int | None = None) -> None:
        self.stream, self.limit, self.nbytes = stream, limit, 0
        self.hash = hashlib.blake2b(digest_size=16)

    def readline(self) -> bytes:
        if self.limit is not None:
            left = self.limit - self.nbytes
            chunk = self.stream.readline(left) if left > 0 else b""
        else:
            chunk = self.stream.readline()
        self.nbytes += len(chunk)
        self.hash.update(chunk)
        return chunk


class _Reading:
    """One reading of a file, record by record: each line parsed (``formats.jsonl.parse_record``, its schema
    checked), finished (``Format.finish_stream``) and fed to the cleaner, which hands out each part of the
    transcript once it is settled. Pass 1 counts the parts, pass 2 writes them: the same records both times.
    Raises :class:`_Held` where the held route must read the file instead (the module docstring)."""

    def __init__(self, path: Path, opts: Options, fmt: str | None = None, *, schema: bool = True,
                 remember: bool = True) -> None:
        self.path, self.opts, self.schema, self.remember = path, opts, schema, remember
        name = fmt or (opts.format if opts.format != "auto" else None)
        self.chosen: Format | None = get_format(name) if name else None
        self.records = 0
        self.repairs: list[Repair] = []
        self.started: Callable[[Format], None] = lambda fmt: None  # told the format once it is known
        self.parsed: Callable[[Record], None] | None = None  # told each record as read, before cleaning

    def parts(self, lines: Iterator[tuple[int, int, bytes]]) -> Iterator[list[Record]]:
        head: list[tuple[int, int, bytes, Any]] = []
        cleaner: Cleaner | None = None
        finish: Callable[[Record], None] | None = None

        def refuse(problem: Problem) -> None:
            raise _Held(str(problem))

        def start(fmt: Format) -> Cleaner:
            nonlocal finish
            finish = fmt.finish_stream()
            if finish is None:
                raise _Held(f"{fmt.name} reads over the whole file")
            self.started(fmt)
            return Cleaner(fmt.layout, fmt.name, source=str(self.path),
                           close_trailing=closes_trailing(self.opts))

        def feed(fmt: Format, lineno: int, offset: int, raw: bytes, obj: Any) -> list[Record]:
            rec = parse_record(fmt, obj, self.records, lineno, raw, offset, self.schema, refuse,
                               self.remember)
            assert rec is not None and cleaner is not None and finish is not None
            if self.parsed is not None:
                self.parsed(rec)
            finish(rec)
            self.records += 1
            return cleaner.feed(rec)

        # detection (formats.registry.Detector) reads on while the leaders tie: the lines are read meanwhile
        # as the format ahead, and a line that puts another ahead sends the file to the held route
        detector = Detector() if self.chosen is None else None

        def detected() -> Format:
            assert detector is not None
            try:
                return get_format(detector.best())
            except InputError as err:
                raise _Held(str(err)) from None  # the held route reports it

        for lineno, offset, raw in lines:
            try:
                obj = decode_line(raw, lineno)
            except LineError as err:
                raise _Held(err.message) from None
            if detector is not None:
                known = detector.add(obj, lineno)
                if self.chosen is not None and detector.leader() != self.chosen.name:
                    raise _Held("a later line decides the format otherwise")
                if known:
                    self.chosen = detected()
                    detector = None
            if cleaner is None:
                head.append((lineno, offset, raw, obj))
                if self.chosen is None:
                    if len(head) < DETECT_LINES:
                        continue
                    assert detector is not None
                    self.chosen = get_format(detector.leader())
                cleaner = start(self.chosen)
                for item in head:
                    yield feed(self.chosen, *item)
                head = []
                continue
            assert self.chosen is not None
            part = feed(self.chosen, lineno, offset, raw, obj)
            if part:
                yield part
        if detector is not None:  # undecided to the end (or a short file): the answer over every line
            if detector.seen == 0:
                raise _Held("empty")
            best = detected()
            if self.chosen is not None and best.name != self.chosen.name:
                raise _Held("the format is decided otherwise")
            self.chosen = best
        assert self.chosen is not None
        if cleaner is None:
            cleaner = start(self.chosen)
            for item in head:
                yield feed(self.chosen, *item)
        if self.records <= 1:
            raise _Held("one record: perhaps a whole-file JSON document (reader.split_document)")
        done = cleaner.finish()
        self.repairs = list(done.repairs)
        yield done.transcript.records


def stream_report(path: Path, opts: Options, state: State | None, budget: Budget, state_path: Path | None,
                  load_cache: CacheLoader | None = None) -> EstimateReport | None:
    """The report of ``path`` read record by record, or None when it takes the held route. ``load_cache``:
    ``(key) -> CountCache``, the counts earlier calls kept (looked up, never added to)."""
    counted = count_file(path, opts, state, budget, state_path, load_cache, keep=False)
    if counted is None:
        return None
    counted.report.extras = {"maskable_tokens": None, "maskable_results": None}  # needs the whole context
    return counted.report


def count_file(path: Path, opts: Options, state: State | None, budget: Budget, state_path: Path | None,
               load_cache: CacheLoader | None = None, *, keep: bool) -> Counted | None:
    """Pass 1: read, validate, clean, count and decide, record by record; None when the held route must
    read the file. ``keep``: add what is counted to the count cache (``run``; ``estimate`` only looks up)."""
    try:
        with open_input(path) as stream:
            hashing = _Hashing(stream)
            return _count(path, hashing, opts, state, budget, state_path, load_cache, keep)
    except (_Held, OSError):
        return None


def _count(path: Path, hashing: _Hashing, opts: Options, state: State | None, budget: Budget,
           state_path: Path | None, load_cache: CacheLoader | None, keep: bool) -> Counted:
    # run (``keep``) reads each line once more, in pass 2, checked here: nothing to remember of it
    reading = _Reading(path, opts, remember=not keep)
    totals: list[_Totals] = []

    def started(fmt: Format) -> None:
        cache = load_cache(count_key(opts, fmt.name)) if load_cache is not None else None
        if cache is not None and not keep:
            cache.keep = False  # estimate looks up; it never writes the cache
        totals.append(_Totals(fmt.name, opts, budget, cache))

    reading.started = started
    last: int | None = -1  # whether every record comes out as its own line, in order (None: not)
    kept = 0
    for part in reading.parts(iter_lines_at(hashing)):  # type: ignore[arg-type]
        for r in part:
            if last is not None and not r.dirty and r.raw is not None and r.offset > last:
                last, kept = r.offset, kept + 1
            else:
                last = None
        totals[0].add(part)
    total = totals[0]
    total.flush()
    assert reading.chosen is not None
    total.stats.records, total.stats.repairs = reading.records, len(reading.repairs)
    encoding = encoding_name(opts) if total.exact is not None else None
    counts = Counts(total.heuristic, total.exact, encoding)
    cal = calibrate_counts(counts, total.usage, opts, state)
    report = make_estimate_report(total.stats, counts, cal, total.budget, total.system, opts, state_path)
    verbatim = last is not None and kept == reading.records and not reading.repairs
    return Counted(report, counts, reading.chosen.name, reading.repairs, hashing.nbytes,
                   hashing.hash.digest(), total.system, total.cache, verbatim)


def may_write_streamed(fmt: str, opts: Options) -> bool:
    """Whether pass 2 may write the context part by part: the input's own format, written line by line
    (no links between lines to remake, no fallback format), with nothing to convert."""
    target = get_format(fmt)
    return (opts.to in (None, fmt) and target.writable
            and type(target).link_records is Format.link_records)


def written_lines(path: Path, counted: Counted, opts: Options) -> Iterator[bytes]:
    """Pass 2: the cleaned context of ``path`` re-read record by record and written part by part (each
    record as ``formats.jsonl.write_transcript`` writes it: its own bytes when nothing changed it). Only the
    bytes pass 1 read are read, and they must be the same (else an InputError: the file changed); so their
    schema is not checked again."""
    reading = _Reading(path, opts, counted.format, schema=False)
    with open_input(path) as stream:
        hashing = _Hashing(stream, counted.nbytes)
        try:
            if counted.verbatim:  # each record written from its own bytes: the lines are the output
                for _lineno, _offset, raw in iter_lines_at(hashing):  # type: ignore[arg-type]
                    yield raw + b"\n"
            for part in () if counted.verbatim else reading.parts(iter_lines_at(hashing)):  # type: ignore[arg-type]
                yield from write_transcript(Transcript(counted.format, part, str(path)))
        except _Held as held:
            raise InputError(f"{path} changed while it was read ({held}); run again") from None
    if hashing.nbytes != counted.nbytes or hashing.hash.digest() != counted.digest:
        raise InputError(f"{path} changed while it was read; run again")


# pass 2 of a compaction (compaction_stream) reads the file as these passes do
Hashing, Held, Reading = _Hashing, _Held, _Reading

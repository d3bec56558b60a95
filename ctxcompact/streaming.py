"""A file read record by record, in two passes by byte offset (docs/measurements/performance.md#a-hooks-call):
the same stages as every other call (``formats.jsonl.parse_record``, ``clean.Cleaner``,
``tokens.counts.count_records``, ``pipeline.calibrate_counts``, ``report.make_report``), without holding the
transcript. The cleaner hands out each part of the transcript as it settles; the part is counted and
dropped, so memory follows the largest record and the part the cleaner holds, not the file (and the counts,
small integers per message: the calibration from recorded usage needs their prefix sums).

Pass 1 (:func:`count_file`) reads, validates, cleans, counts and decides (``estimate`` of a large file,
``run`` from the command line at any size). When the context passes through, pass 2 (:func:`written_lines`)
reads the same bytes again and writes each settled part as it comes; a compaction of the default path is
made in pass 2 too (:mod:`.compaction_stream`; pass 1 feeds it the records as it reads when the file will
most likely compact), any other reads the file held, with pass 1's counts.

A second call does not read again what the last one read (docs/concepts/state.md#the-settled-prefix): the
count cache keeps where the last part the cleaner settled begins and what the read carries over the bytes
before it (the cleaner's call ids and the calls' names, ``call_ids.CallIds``; the counts and totals:
:class:`~.resume_point.ResumePoint`); a call that
proves those bytes unchanged with one SHA-256 starts pass 1 there (the records from there on are read as a
call from scratch reads them), and pass 2 copies the bytes before it as they are.

A state's covered prefix (a summary's watermark) is read as the held route reads it (:mod:`.covered`): proven
in the pass that proves the settled prefix, its lead (system records, summary) cleaned first; without the
summary where a record after the prefix carries it (:class:`_Carried`). What earlier runs left in the state
to apply again (masking, sliding-window events) is applied to each record as it is read, before the
cleaner, by each strategy's own code a record at a time (``strategies.reapply_each``: what a record gives
in its place, and at the end what follows the last); its fingerprint is proven in the same pass.

The held route (``context.build_context``) is taken instead where the whole is needed: a small file for
``estimate`` (it also says what masking would free), a strategy whose ``describe`` needs the context,
``--exact anthropic``, a line or an end its format's reader cannot finish alone
(``formats.base.NeedsWhole``: a compaction line its scan did not find, a Claude Code subagent's line in the
main file), detection the first lines do not decide, any line the reader does not take (the held route
reports or drops it). A ``formats.base.Restart`` reads again from the file's start instead, a
``formats.base.Forked`` (a Claude Code rewind) after the format's finishing found what every line says
(``Finish.follow``), which pass 2 follows too (:attr:`Counted.branch`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import nullcontext, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from .atomic import Staging, is_special_file
from .budget import Budget
from .call_ids import CallIds
from .clean import Cleaner, Repair
from .context import closes_trailing
from .errors import InputError, LineError, OutputError, Problem, Uncovered
from .formats import DETECT_LINES, get_format
from .formats.base import Finish, Forked, Format, NeedsWhole, Restart
from .formats.jsonl import parse_record, write_transcript
from .formats.registry import Detector
from .hashed_lines import Hashing, Written, copy_prefix, lines_at, proven_prefix
from .model import EARLIER_SUMMARY, Record, Transcript
from .options import Options
from .paths import open_input
from .pipeline import (
    calibrate_counts,
    make_estimate_report,
)
from .plugins import PROVIDER_COUNTERS
from .reader import decode_line
from .report import EstimateReport
from .state import State
from .state.cache import cache_path
from .strategies import Layers, estimate_needs_context, reapplies_each, reapply_each
from .stream_totals import Totals
from .tokens.cache import CountCache
from .tokens.counts import Counts, count_key

if TYPE_CHECKING:
    from .covered import Covered
    from .resume_point import Mark, ResumePoint

#: ``estimate`` streams from this file size on; below it, it holds the context and also says what masking
#: would free (``maskable_tokens``; null when streamed)
STREAMING_FROM_BYTES = 8 * 1024 * 1024


#: ``(count key) -> CountCache``: the counts earlier calls kept (key None: whatever their options, not begun)
CacheLoader = Callable[[tuple[str, str | None] | None], CountCache]


class _Held(Exception):
    """The held route reads this file (module docstring); from a formats.base.Restart: unless read anew;
    from :class:`_Carried`: unless read anew without the summary of the lead."""


def _covers(state: State | None) -> bool:
    """``covered.covers``: its module is loaded only for a state (a run without one has no covered prefix)."""
    if state is None:
        return False
    from .covered import covers

    return covers(state)


class _Carried(Exception):
    """A record after the covered prefix holds the state's summary (``covered.Covered.carries``): the log
    ctxcompact wrote into an agent's log put in the input's place. The context has the log's copy only."""


def staging_for(output: Path | BinaryIO | None, state_path: Path | None, state: State | None
                ) -> Staging | None:
    """The output's temporary file for pass 1 (:func:`count_file`'s ``stage``) where a resume point may be
    taken (a count cache is kept) and the output begins with the input (not with a covered prefix's lead);
    else, or where it cannot be made, None (the write says why, in its turn)."""
    if not isinstance(output, Path) or state_path is None or _covers(state) or is_special_file(output) \
            or not cache_path(state_path).is_file():
        return None
    with suppress(OutputError):
        return Staging(output)
    return None


def may_stream(path: Path | None, opts: Options, state: State | None, from_bytes: int | None = None, *,
               gathers: bool = False) -> bool:
    """Whether ``estimate`` (or ``run``, at any size: ``from_bytes=0``) of ``path`` may stream, before
    reading it (``path`` None: stdin, not yet read; all but its size). ``gathers``: ``run``'s pass 1 gathers
    what the strategy decides by (``strategies.run_gathers``), which would otherwise need the context."""
    if opts.exact in PROVIDER_COUNTERS or (estimate_needs_context(opts.strategy, opts) and not gathers):
        return False
    if state is not None and state.holds_sections() and not reapplies_each(state):
        return False  # layers to apply again a record at a time by no code of their own (a plugin's)
    if state is not None and not _covers(state) and (state.watermark > 0 or state.summary):
        return False  # a covered prefix of an older state's shape
    if path is None:
        return True
    try:
        least = STREAMING_FROM_BYTES if from_bytes is None else from_bytes
        return os.path.getsize(path) >= least and Path(path).is_file()
    except OSError:
        return False  # the held route says what is wrong with it


@dataclass(slots=True)
class Counted:
    """Pass 1 of a file read record by record: what the decision needs, nothing per record but the counts."""

    report: EstimateReport
    counts: Counts  # of every record of the cleaned context, in order
    format: str
    repairs: list[Repair]
    nbytes: int  # the bytes pass 1 read; pass 2 reads exactly these
    digest: bytes  # their SHA-256: pass 2 checks it read the same bytes
    system: int  # tokens of the system records (kept verbatim by any compaction)
    cache: CountCache | None  # the count cache the counts were taken from and added to
    #: the cleaned context is the input's lines themselves, in order (nothing repaired, made or dropped):
    #: pass 2 copies them without parsing them again
    verbatim: bool = False
    #: where pass 1 started after a proven prefix (None: at the start): pass 2 starts there too
    resumed: ResumePoint | None = None
    #: the state's covered prefix, proven (None: none): both passes read after it, its lead first
    covered: Covered | None = None
    gathered: tuple[Any, int, int] | None = None  # compaction_stream.Gathering (pass 1's), records, lines
    #: how the transcripts made of it name their input (``Transcript.source``): the path, ``-`` for stdin
    #: read through a spool file (paths.spooled)
    source: str = ""
    #: the state whose layers the reading applied again (``strategies.reapply_each``): pass 2 does too
    layers: State | None = None
    hides: bool = False  # a line read hides lines before it (formats.base.Finish.hides)
    #: the output's temporary file given to pass 1 (``atomic.Staging``) holds the bytes before the resume
    #: point, as pass 1 hashed them (``CountCache.prove_stream``): pass 2 writes only what follows
    staged: bool = False
    #: what a read of these bytes from the start follows (``Finish.followed``: Claude Code's branch after a
    #: rewind, found by pass 1 or carried by its resume point), given to pass 2's reading (None: nothing)
    branch: Any = None


def _mark(*fields: Any) -> Mark:
    """A ``resume_point.Mark``: its module is loaded only by a reading that marks where each part begins
    (one whose count cache keeps a resume point), not by a run without a state."""
    from .resume_point import Mark

    return Mark(*fields)


def _begin(covered: Covered | None, start: ResumePoint | None) -> tuple[int, int]:
    """Where a read begins (offset, line number): a resume point, the covered prefix's end, or the start."""
    if start is not None:
        return start.at, start.line
    return (covered.at, covered.line) if covered is not None else (0, 1)


class _Reading:
    """One reading of a file, record by record: each line parsed (``formats.jsonl.parse_record``, its schema
    checked), finished (``Format.finish_stream``) and fed to the cleaner, which hands out each part of the
    transcript once it is settled. Pass 1 counts the parts, pass 2 writes them: the same records both times.
    Raises :class:`_Held` where the held route must read the file instead (the module docstring).

    ``start``: read from a resume point on (the lines given begin there), carrying what it carries.
    ``covered``: the state's covered prefix (the lines given begin after it, or after ``start``): its lead
    is cleaned first, unless ``start`` carries it. ``hashing``: the stream being read, to :attr:`mark`
    where each settled part begins. ``checked_from``: the lines ending before it are proven (the settled
    prefix): their schema is not checked again. ``follow``: a read from the start after a
    ``formats.base.Forked``: the format's finishing first finds what every line says (``Finish.follow``), or
    takes ``branch``, what pass 1 followed (:attr:`Counted.branch`)."""

    def __init__(self, path: Path, opts: Options, fmt: str | None = None, *, schema: bool = True,
                 remember: bool = True, start: ResumePoint | None = None, covered: Covered | None = None,
                 hashing: Hashing | None = None, limit: int | None = None, source: str | None = None,
                 state: State | None = None, follow: bool = False, branch: Any = None) -> None:
        self.path, self.opts, self.schema, self.remember, self.limit = path, opts, schema, remember, limit
        self.source = str(path) if source is None else source  # (Counted.source)
        self.state = state  # its layers are applied again to each record (strategies.reapply_each)
        self.again: Layers | None = None
        name = start.format if start is not None else covered.format if covered is not None else \
            fmt or (opts.format if opts.format != "auto" else None)
        self.chosen: Format | None = get_format(name) if name else None
        self.start, self.covered, self.hashing = start, covered, hashing
        self.records = covered.records if covered is not None else 0
        self.repairs: list[Repair] = []
        self.started: Callable[[Format], None] = lambda fmt: None  # told the format once it is known
        self.checked_from = 0
        self.ids = CallIds()  # the calls' names and the cleaner's carry (a resume point's copy, once started)
        self.cleaner: Cleaner | None = None
        self.detect = fmt is None and covered is None  # (pass 2 reads as the format pass 1 found)
        #: where the part the cleaner holds begins, if a later read may start there (the resume point this
        #: read starts at, until a part settles after it)
        self.mark: Mark | None = None if start is None else _mark(
            start.at, start.hash.copy(), start.line, start.records, start.ids.mark(), start.finish,
            start.detector)
        self.finishing = False  # the part handed out now is the cleaner's last, what it held at the end
        self.parsed: Callable[[Record], None] | None = None  # told each record read and finished
        self.finish: Finish | None = None  # the format's, once the format is known
        self.follow, self.branch = follow, branch

    def parts(self, lines: Iterator[tuple[int, int, bytes]]) -> Iterator[list[Record]]:
        # the lines read before the format is decided (with, to mark where a part settles among them, the
        # hash of the bytes before each and what detection had read with it)
        head: list[tuple[int, int, bytes, Any, Any, dict[str, Any] | None]] = []
        cleaner: Cleaner | None = None
        finish: Finish | None = None

        def refuse(problem: Problem) -> None:
            raise _Held(str(problem))

        def start(fmt: Format) -> Cleaner:
            nonlocal finish
            resume = self.start
            self.ids = resume.ids.copy() if resume is not None else CallIds()
            finish = fmt.finish_stream(self.ids, resume.finish if resume is not None else None)
            if finish is None:
                raise _Held(f"{fmt.name} reads over the whole file")
            self.finish = finish
            at = _begin(self.covered, resume)[0]
            finish.scan(self.path, at, self.limit)  # (limit: what pass 1 read)
            if self.follow:
                assert resume is None  # (from the start: what every line says is taken back nowhere)
                finish.follow(self.path, at, self.limit, self.branch)
            self.started(fmt)
            self.again = reapply_each(self.state, fmt.name) if self.state is not None else None
            if resume is not None and self.again is not None and not self.again.skip_to(resume.records):
                raise _Held("the state's layers do not start at the resume point")
            self.cleaner = Cleaner(fmt.layout, fmt.name, source=self.source,
                                   close_trailing=closes_trailing(self.opts), calls=self.ids)
            if resume is not None:
                self.cleaner.resume(self.ids, resume.started, resume.settled)
                self.records = resume.records
            return self.cleaner

        def feed(fmt: Format, lineno: int, offset: int, raw: bytes, obj: Any, hashed: Any = None,
                 detection: dict[str, Any] | None = None, read: bool = True) -> list[Record]:
            rec = parse_record(fmt, obj, self.records, lineno, raw, offset,
                               self.schema and offset + len(raw) > self.checked_from, refuse, self.remember)
            assert rec is not None and cleaner is not None and finish is not None
            try:
                finish(rec)
            except NeedsWhole as why:
                raise _Held(str(why)) from why
            if self.parsed is not None:  # (finished: a line a compaction hides is no system line)
                self.parsed(rec)
            if self.covered is not None and rec.meta.get(EARLIER_SUMMARY) and self.covered.carries(rec):
                raise _Held("the log carries the state's summary") from _Carried()
            self.records += 1
            if self.again is not None and not self.again.passes_on(rec.index):
                # (as build_context: the state's layers, then the cleaner; where sliding-window events
                # place a summary or drop records, no later read may start)
                self.mark = None
                return [r for given in self.again(rec) for r in cleaner.feed(given)]
            if self.again is not None:  # (a record or none for one: masking, events passed)
                again = self.again(rec)
                if not again:
                    return []
                rec = again[0]
            part = cleaner.feed(rec)
            if part:  # a part settled: ``rec`` begins the one held now, where a later read may start
                if read:  # (the line just read; else from the head, with what was kept of it)
                    hashed = self.hashing.before_last(offset) if self.hashing is not None else None
                    detection = detector.kept() if detector is not None else None
                self.mark = None if hashed is None else _mark(offset, hashed, lineno, self.records - 1,
                                                               self.ids.mark(), finish.kept(), detection)
            return part

        # detection (formats.registry.Detector) reads on while the leaders tie: the lines are read meanwhile
        # as the format ahead, and a line that puts another ahead sends the file to the held route
        detector = Detector() if self.chosen is None else None
        resumed = self.start  # the first line is the one the resume point begins at, already detected
        if resumed is not None:
            detector = Detector.resumed(resumed.detector) if resumed.detector is not None and self.detect \
                else None

        def detected() -> Format:
            assert detector is not None
            try:
                return get_format(detector.best())
            except InputError as err:
                raise _Held(str(err)) from None  # the held route reports it

        if resumed is not None or self.covered is not None:
            assert self.chosen is not None
            cleaner = start(self.chosen)
        if resumed is None and self.covered is not None and cleaner is not None:
            for lead in self.covered.lead:  # (no line of its own: a later read may not start in it)
                for rec in [lead] if self.again is None else self.again(lead):
                    part = cleaner.feed(rec)
                    if part:
                        self.mark = None
                        yield part
        for lineno, offset, raw in lines:
            try:
                obj = decode_line(raw, lineno)
            except LineError as err:
                raise _Held(err.message) from None
            if detector is not None:
                again = resumed is not None and offset == resumed.at  # (read by the call that kept it)
                known = False if again else detector.add(obj, lineno)
                if self.chosen is not None and detector.leader() != self.chosen.name:
                    raise _Held("a later line decides the format otherwise")
                if known:
                    self.chosen = detected()
                    detector = None
            if cleaner is None:
                hashed = self.hashing.before_last(offset) if self.hashing is not None else None
                detection = detector.kept() if detector is not None else None
                head.append((lineno, offset, raw, obj, hashed, detection))
                if self.chosen is None:
                    if len(head) < DETECT_LINES:
                        continue
                    assert detector is not None
                    self.chosen = get_format(detector.leader())
                cleaner = start(self.chosen)
                for item in head:
                    yield feed(self.chosen, *item, read=False)
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
                yield feed(self.chosen, *item, read=False)
        if self.records <= 1:
            raise _Held("one record: perhaps a whole-file JSON document (document.split_document)")
        try:
            finish.end()  # type: ignore[union-attr]
        except NeedsWhole as why:  # (its cause: a Restart or a Forked reads again, count_file)
            raise _Held(str(why)) from why
        if self.again is not None:  # what the layers give after the last record (events placed last)
            for rec in self.again.end():
                part = cleaner.feed(rec)
                if part:
                    self.mark = None
                    yield part
        done = cleaner.finish()
        self.repairs = list(done.repairs)
        self.finishing = True
        yield done.transcript.records

    def kept(self, mark: Mark) -> tuple[dict[str, Any], list[memoryview]]:
        """What a read starting at ``mark`` carries from this one (``resume_point.ResumePoint``), once every
        settled part is handed out (the cleaner's carry is then the one at the mark): marshal-able, and the
        call ids' columns (views: every line is read by then, the ids grow no more)."""
        from .resume_point import ResumePoint, layers_key

        assert self.cleaner is not None and self.chosen is not None
        calls, started, settled = self.cleaner.carried()
        ids, columns = calls.kept(mark.ids)
        return {"v": ResumePoint.VERSION, "options": self.opts.format, "format": self.chosen.name,
                "covered": self.covered.key if self.covered is not None else None,
                "layers": layers_key(self.state), "line": mark.line,
                "records": mark.records, "ids": ids, "started": started, "settled": settled,
                "finish": mark.finish, "detector": mark.detector}, columns


def stream_report(path: Path, opts: Options, state: State | None, budget: Budget, state_path: Path | None,
                  load_cache: CacheLoader | None = None, *, name: str | None = None) -> EstimateReport | None:
    """The report of ``path`` read record by record, or None when it takes the held route. ``load_cache``:
    ``(key) -> CountCache``, the counts earlier calls kept (looked up, never added to)."""
    counted = count_file(path, opts, state, budget, state_path, load_cache, keep=False, name=name)
    if counted is None:
        return None
    counted.report.extras = {"maskable_tokens": None, "maskable_results": None}  # needs the whole context
    return counted.report


def count_file(path: Path, opts: Options, state: State | None, budget: Budget, state_path: Path | None,
               load_cache: CacheLoader | None = None, *, keep: bool, gather: Any = None,
               name: str | None = None, resumes: bool = False, stage: Staging | None = None
               ) -> Counted | None:
    """Pass 1: read, validate, clean, count and decide, record by record; None when the held route must
    read the file. ``keep``: add what is counted to the count cache, with the settled prefix and where a
    later read may start (``run``; ``estimate`` only looks up). ``gather``: compaction_stream.gathering, or
    a strategy's own (``strategies.run_gathers``). ``name``: how the transcript names its input
    (:attr:`Counted.source`; default the path). ``resumes``: ``gather`` is a strategy's own, which takes up
    at a resume point from what it kept there (a resume point kept without it is not taken: every record is
    read). ``stage``: the output's temporary file, empty; the bytes before a plain resume point are written
    to it as they are proven, so that pass 2 reads and hashes only what follows (:attr:`Counted.staged`;
    what is in it otherwise is not the output's: the caller discards it)."""
    source = str(path) if name is None else name
    try:
        with open_input(path) as stream:
            fresh = carried = forked = False
            while True:
                try:
                    return _count(path, stream, opts, state, budget, state_path, load_cache, keep, gather,
                                  source, fresh=fresh, carried=carried, resumes=resumes,
                                  stage=None if fresh or carried else stage, forked=forked)
                except _Held as held:  # (Restart: what the resume point carries cannot be taken back)
                    if isinstance(held.__cause__, Forked) and not forked:
                        # from the start, what every line says found first; whether the log carries the
                        # summary is found again (its line may be off the branch: context.log_carries)
                        fresh, forked, carried = True, True, False
                    elif isinstance(held.__cause__, Restart) and not fresh:
                        fresh = True
                    elif isinstance(held.__cause__, _Carried) and not carried:
                        carried = True
                    else:
                        raise
    except (_Held, Uncovered, OSError):
        return None


def _count(path: Path, stream: BinaryIO, opts: Options, state: State | None, budget: Budget,
           state_path: Path | None, load_cache: CacheLoader | None, keep: bool, gather: Any, source: str,
           fresh: bool = False, carried: bool = False, resumes: bool = False, stage: Staging | None = None,
           forked: bool = False) -> Counted:
    stream.seek(0)
    loaded = load_cache(None) if load_cache is not None else None
    # one SHA-256 pass proves the settled prefix, the resume point and the state's covered prefix
    prefix = state.fingerprint.nbytes if state is not None and _covers(state) else 0
    # (a state's layers without a summary fingerprint the input they acted on too: proven in the same pass)
    fingerprinted = state.fingerprint.nbytes if state is not None and not prefix else 0
    # the output begins with the bytes before a plain resume point (not after a covered prefix: its lead)
    staging = _Copy(stage) if stage is not None and not prefix else None
    at_hash, covered_hash = (loaded if loaded is not None else CountCache()).prove_stream(
        stream, prefix or fingerprinted, staging)
    covered = None
    if state is not None and (prefix or fingerprinted):
        from .covered import Covered

        covered = Covered.read(stream, opts, state, covered_hash) if prefix else None
        if fingerprinted:
            Covered.prove(state, covered_hash)
    points = loaded if not fresh else None  # (fresh: not from a resume point)
    if points is not None:  # (a run without a count cache has no resume point: its module is not loaded)
        from .resume_point import ResumePoint, layers_key

        layers = layers_key(state)
    resume = ResumePoint.proven(points, at_hash, opts, covered, layers) if points is not None else None
    if covered is not None and covered.summary and (carried or (resume is None and loaded is not None)):
        # the log carries the lead's summary (a read found so, or the one that kept the resume point did)
        alt = covered.carried()
        again = ResumePoint.proven(points, at_hash, opts, alt, layers) if points is not None else None
        if carried or again is not None:
            covered, resume = alt, again
    if resumes and resume is not None and resume.gathered is None:
        resume = None  # (what the strategy's gatherer needs of the records before it was not kept)
    at, _ = _begin(covered, resume)
    stream.seek(at)
    hashed = resume.hash if resume is not None else covered.hash if covered is not None else None
    hashing = Hashing(stream, at=at, hashed=hashed.copy() if hashed is not None else None)
    # run (``keep``) reads each line once more, in pass 2, checked here: nothing to remember of it; where
    # each part begins is marked only for a count cache to keep a resume point in
    reading = _Reading(path, opts, remember=not keep, start=resume, covered=covered,
                       hashing=hashing if keep and loaded is not None else None, source=source, state=state,
                       follow=forked)
    totals: list[Totals] = []
    gathered: list[Any] = []  # a compaction's conversation as pass 1 reads (not resumed: pass 2 reads all)

    def started(fmt: Format) -> None:
        given = gather is not None and (resume is None or resumes)  # (a compaction's reads every record)
        gathered.extend(gather(fmt.name, covered, reading) if given else ())
        cache = None
        if loaded is not None:
            cache = loaded.use(count_key(opts, fmt.name))  # another format or encoding: emptied
            reading.checked_from = cache.proven
            if not keep:
                cache.keep = False  # estimate looks up; it never writes the cache
            elif resume is not None:
                cache.kept_below = resume.at  # the counts of the lines before it stay
        totals.append(Totals(fmt.name, opts, budget, cache))
        if resume is not None:
            totals[0].take(resume.totals)

    reading.started = started
    # whether every record comes out as its own line, in order (None: not), and as its very bytes (None: not;
    # after a covered prefix: its lead as it is, then the lines after it)
    last: int | None = resume.last if resume is not None else -1 if covered is None else None
    kept = resume.kept if resume is not None else 0
    plain: int | None = (resume.at if resume.plain else None) if resume is not None else at
    lead = covered.lead if covered is not None and resume is None else []
    later: dict[str, Any] | None = None  # what a later read resumes with
    ids: list[memoryview] = []  # and the call ids' columns
    target: tuple[int, Record] | None = None  # where the record Finish.late_usage is for lands, and it
    for part in reading.parts(lines_at(hashing, *_begin(covered, resume))):
        if reading.finishing and keep and totals[0].cache is not None and reading.mark is not None:
            totals[0].mark()  # every settled part is added: a later read starts after them
            later, ids = reading.kept(reading.mark)
            later.update(last=last, kept=kept, plain=plain == reading.mark.at)
            if resumes and gathered:  # (before the last part: what was gathered before the mark)
                later["gathered"] = gathered[0].kept()
        for r in part:
            if lead:
                plain = plain if r is lead[0] else None  # (pass 2 writes the lead as it is)
                lead = lead[1:]
                continue
            if last is not None and not r.dirty and r.raw is not None and r.offset > last:
                last, kept = r.offset, kept + 1
            else:
                last = None
            same = plain == r.offset and not r.dirty and r.raw is not None
            plain = r.offset + len(r.raw) + 1 if same else None  # type: ignore[arg-type]
        finish = reading.finish
        if finish is not None and finish.target is not None:
            at_part = len(totals[0].heuristic) + len(totals[0].pending)
            target = next(((at_part + i, r) for i, r in enumerate(part) if r.offset == finish.target), target)
        for g in gathered:
            g.add(part)
        totals[0].add(part)
    total = totals[0]
    total.flush()
    finish = reading.finish
    late = finish.late_usage() if finish is not None else None
    if late is not None and target is not None and finish is not None and target[1].offset == finish.target:
        position, line = target[0] + late.after, target[1].line
        from .tokens.measured import UsagePoint  # (only a log with usage measures: tokens/measured.py)

        total.usage.append(UsagePoint(position, late.prompt_tokens, line, late.source))
        total.usage.sort(key=lambda p: p.position)  # (in the records' order, as usage_points gives them)
    assert reading.chosen is not None
    total.stats.records, total.stats.repairs = reading.records, len(reading.repairs)
    total.stats.covered = covered.records if covered is not None else 0
    counts = total.counts()
    cal = calibrate_counts(counts, total.usage, opts, state)
    report = make_estimate_report(total.stats, counts, cal, total.budget, total.system, opts, state_path)
    verbatim = last is not None and kept == reading.records and not reading.repairs
    digest = hashing.digest()
    if keep and total.cache is not None:
        # every line read was good (else the held route reads the file): the whole lines are settled (after
        # a covered prefix, if an earlier call settled it: CountCache.settle_read's rule)
        settles = total.cache.settles_after(covered.at if covered is not None else 0)
        total.cache.settled, total.cache.settled_sha256 = hashing.whole_lines() if settles else (0, b"")
        kept_totals = total.kept() if later is not None and settles else None
        columns: list[memoryview] = []
        if later is not None and kept_totals is not None:
            later["totals"], columns = kept_totals
            columns += ids
        else:
            later = None
        mark = reading.mark if later is not None else None
        total.cache.resume_at = mark.at if mark is not None else 0
        total.cache.resume_sha256 = mark.hash.digest() if mark is not None else b""
        total.cache.resume, total.cache.resume_columns = later, columns
    staged = staging is not None and resume is not None and resume.plain and staging.holds(resume.at)
    return Counted(report, counts, reading.chosen.name, reading.repairs, hashing.nbytes, digest, total.system,
                   total.cache, verbatim, resume, covered,
                   (*gathered, reading.records, hashing.lines) if gathered else None, source, state,
                   reading.finish is not None and reading.finish.hides, staged,
                   reading.finish.followed() if reading.finish is not None else None)


class _Copy:
    """Pass 1's copy of the bytes before the resume point into the output's temporary file: a write that
    fails leaves it unused (pass 2 writes the whole output, and says what is wrong with the file)."""

    def __init__(self, stage: Staging) -> None:
        self.stage, self.failed = stage, False

    def __call__(self, chunk: memoryview) -> None:
        if not self.failed:
            try:
                self.stage.write(chunk)
            except OSError:
                self.failed = True

    def holds(self, nbytes: int) -> bool:
        return not self.failed and self.stage.size == nbytes


def may_write_streamed(fmt: str, opts: Options, repairs: Sequence[Repair] = ()) -> bool:
    """Whether pass 2 may write the context part by part: the input's own format, written line by line
    (no links between lines to remake, or no line a repair made; no fallback format), nothing to convert."""
    target = get_format(fmt)
    return (opts.to in (None, fmt) and target.writable
            and (type(target).link_records is Format.link_records or not repairs))


def written_lines(path: Path, counted: Counted, opts: Options, output: Path | None = None, *,
                  staged: bool = False) -> Iterator[bytes]:
    """Pass 2: the cleaned context of ``path`` re-read record by record and written part by part (each
    record as ``formats.jsonl.write_transcript`` writes it: its own bytes when nothing changed it). Only the
    bytes pass 1 read are read, and they must be the same (else an InputError: the file changed); so their
    schema is not checked again. Where pass 1 started after a proven prefix whose cleaned records are its
    very bytes, those bytes are copied as they are and the reading starts where pass 1's did. After a
    covered prefix, only the bytes after it are read (pass 1 proved it and read its lead).

    Where the records before the resume point are not the input's bytes (a state's masking or events made
    them), the bytes the call that kept it wrote before it are copied from ``output`` (the file this call
    replaces), if it still starts with them (their SHA-256), and the reading starts there too: they are what
    the same records, layers and options give (``ResumePoint.proven``). This call notes what it writes
    before its own resume point for the next.

    ``staged``: the output's temporary file holds the bytes before the resume point (:attr:`Counted.staged`,
    the very bytes pass 1 hashed): the reading starts there, on pass 1's hash, and only what follows is
    handed out; the digest at the end proves those are the bytes pass 1 read after it."""
    resumed, covered, cache = counted.resumed, counted.covered, counted.cache
    assert not staged or counted.staged
    start = resumed if resumed is not None and resumed.plain else None
    key = [closes_trailing(opts)]  # (what else the written bytes depend on; not the name of the input)
    known = resumed.output if start is None and resumed is not None else None
    last = proven_prefix(output, known["at"], known["sha256"]) if known is not None and known["key"] == key \
        else None
    start = resumed if last is not None else start
    # what this call writes before the resume point it keeps, if the next cannot copy the input's bytes
    note = Written(*((start.at, start.hash) if staged and start is not None else ())) \
        if output is not None and cache is not None and isinstance(cache.resume, dict) \
        and not counted.verbatim and not cache.resume.get("plain") else None
    reading = _Reading(path, opts, counted.format, schema=False, start=start, covered=covered,
                       limit=counted.nbytes, source=counted.source, state=counted.layers,
                       follow=counted.branch is not None and start is None, branch=counted.branch)
    written = note if note is not None else lambda chunks: chunks
    with open_input(path) as stream, last if last is not None else nullcontext():
        at, hashed = (start.at, start.hash) if staged and start is not None else \
            (_begin(covered, None)[0], covered.hash if covered is not None else None)
        stream.seek(at)
        hashing = Hashing(stream, counted.nbytes, at, hashed.copy() if hashed is not None else None)
        try:
            if staged:
                pass  # (the bytes before ``start``: in the output already)
            elif last is not None and known is not None and start is not None:
                for _ in hashing.copy(start.at):  # (read: the digest proves the file unchanged since pass 1)
                    pass
                yield from written(copy_prefix(last, known["at"], known["sha256"]))
            elif start is not None:
                if covered is not None:
                    yield from written(write_transcript(Transcript(counted.format, covered.lead,
                                                                   counted.source)))
                yield from written(hashing.copy(start.at))
            lines = lines_at(hashing, *_begin(covered, start))
            if counted.verbatim:  # each record written from its own bytes: the lines are the output
                for _lineno, _offset, raw in lines:
                    yield raw + b"\n"
            for part in () if counted.verbatim else reading.parts(lines):
                if note is not None and reading.finishing and cache is not None and part and \
                        part[0].offset == cache.resume_at:  # (it begins where the next call resumes)
                    cache.resume["output"] = {"at": note.nbytes, "sha256": note.hash.hexdigest(), "key": key}
                yield from written(write_transcript(Transcript(counted.format, part, counted.source)))
        except _Held as held:
            raise InputError(f"{path} changed while it was read ({held}); run again") from None
        if hashing.nbytes != counted.nbytes or hashing.digest() != counted.digest:
            raise InputError(f"{path} changed while it was read; run again")


# pass 2 of a compaction (compaction_stream) reads the file as these passes do
Held, Reading, begin = _Held, _Reading, _begin

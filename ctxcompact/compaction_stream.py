"""A compaction without holding the file (docs/measurements/performance.md#a-hooks-call): pass 2 of a
streamed ``run`` (:mod:`.streaming`) when pass 1 decided to compact.

Pass 2 reads the same bytes again record by record (``streaming.Reading``: parsed, finished and cleaned as
pass 1 did; or pass 1 did it as it counted, when the file was large enough to compact almost surely:
:func:`gathering`) into a :class:`~.strategies.conversation.Reader`, which keeps what the summary needs (the
system records, the latest request, the open todos, a window of the last records) and feeds everything before
the window to the fact store (:class:`~.facts.gather.FactFeed`). The strategy then runs as on the held route,
given that conversation instead of a held context: the same ``threshold.compact``, the same summarizer, the
same commit. Its output (the system records, the summary and continuation, the work in flight) is small.

The sliding window's events are made here too (its own gatherer in pass 1, the planner on
``sliding_window_input.Streamed``, which reads the file again by :func:`reread`): a summarizer that declares
it may, a format whose output is the context itself. Otherwise taken for what declares it may be
(:func:`may_compact_streamed`, the registry's traits: ``plugins.COMPACTS_STREAMED`` and
``SUMMARIZES_STREAMED``): the default path, ``--strategy threshold`` without
``--prune``, the extractive or an LLM summarizer (the records a summary covers read again from the file as
often as it iterates them: :func:`read_conversation`, ``strategies.conversation.Summarized``), a format
whose compaction output is the compacted context itself or
an append-only log's lines copied then what ``Format.compaction_appended`` makes of what
``Format.compaction_seen`` took of them line by line (Codex, ADK events, Claude Code: :func:`input_lines`;
``plugins.COMPACTS_LOGS_STREAMED``), no
``--to`` into another format. The held route is taken instead for anything else, and whenever the
streamed one cannot give exactly what it gives
(:class:`~.errors.Unstreamable`): a compaction that would not make the context smaller
(the context is then written whole), a subagent's lines or a result before its call (the facts read over
the whole list), a work in flight that fits nowhere (the whole conversation is summarized again), an
append-only log's compaction after a covered prefix that no line after it makes history only
(:func:`take_prefix`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from .budget import Budget
from .context import Context
from .errors import InputError, LineError, Unstreamable
from .formats import get_format
from .formats.base import Finish
from .hashed_lines import Hashing, lines_at
from .model import Record, Role, Transcript
from .options import Options
from .paths import open_input
from .plugins import COMPACTS_LOGS_STREAMED, COMPACTS_STREAMED, STRATEGIES, SUMMARIZERS, SUMMARIZES_STREAMED
from .reader import decode_line, iter_lines_at
from .strategies import has_trait
from .streaming import Counted, Held, Reading, begin

if TYPE_CHECKING:
    from .covered import Covered
    from .strategies.conversation import Conversation


def may_compact_streamed(fmt: str, opts: Options) -> bool:
    """Whether a compaction of a file pass 1 read may be made in pass 2 (the module docstring)."""
    f = get_format(fmt)
    # an append-only log: its lines copied, then what the compaction appends (Format.compaction_appended,
    # linked to them: Claude Code's parentUuid chain)
    appended = f.compaction_seen() is not None
    context = not f.layout.agent_log and not appended
    # what may compact so is what the strategy and the summarizer declare (plugins: the traits)
    if not has_trait(opts.strategy, COMPACTS_STREAMED, opts) or opts.to not in (None, fmt) or \
            not SUMMARIZERS.has(opts.summarizer, SUMMARIZES_STREAMED):
        return False
    return context or (appended and STRATEGIES.has(opts.strategy, COMPACTS_LOGS_STREAMED))


class _Lines:
    """A binary stream's ``readline`` that counts the physical lines it hands out (``source.count_lines``:
    a last line without a newline counts)."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream, self.lines, self.last = stream, 0, b""

    def readline(self, limit: int = -1) -> bytes:
        chunk = self.stream.readline(limit)
        if chunk:
            self.lines += chunk.count(b"\n")
            self.last = chunk[-1:]
        return chunk

    @property
    def count(self) -> int:
        return self.lines + (1 if self.last not in (b"", b"\n") else 0)


class Gathering:
    """The records of a reading taken into the conversation reader in order (:class:`Reader`): the system
    lines' spans as ``context.build_context`` notes them, what ``taken`` takes of each line read
    (``Format.compaction_seen``), and the position in the cleaned context of each record the reader holds.
    Pass 2 fills one (:func:`read_conversation`); pass 1 may fill one as it counts (:func:`gathering`)."""

    def __init__(self, covered: Covered | None, taken: Any = None) -> None:
        from .strategies.conversation import Reader  # (only a compaction loads it, and the facts it reads)

        self.positions: dict[int, int] = {}  # id(record) -> position (pass 1's counts are not made again)
        self.reader = Reader(hold=False, dropped=self._dropped)
        # the system lines, as context.build_context notes them
        self.spans: list[tuple[int, int]] = list(covered.spans) if covered is not None else []
        self.taken = taken
        self.seen = 0  # records of the cleaned context so far: the position of the next in pass 1's counts

    def _dropped(self, rec: Record) -> None:
        self.positions.pop(id(rec), None)

    def parsed(self, rec: Record) -> None:
        """Told each record as read, before cleaning (``streaming.Reading.parsed``)."""
        if rec.message is not None and rec.message.role is Role.SYSTEM and rec.offset >= 0 and rec.raw:
            self.spans.append((rec.offset, len(rec.raw)))
        if self.taken is not None:
            self.taken.add(rec.data, rec.raw)

    def add(self, part: list[Record]) -> None:
        """A part the cleaner settled, in order."""
        for rec in part:
            self.positions[id(rec)] = self.seen
            self.seen += 1
            self.reader.add(rec)

    def result(self, path: Path, counted: Counted, records: int,
               lines: int) -> tuple[Context, Conversation, dict[int, int]]:
        """The context as the strategy sees it (no records held), the conversation, the positions: after
        ``records`` input records, ``lines`` lines read after the covered prefix, if any."""
        covered = counted.covered
        lines += covered.line - 1 if covered is not None else 0
        return _context(counted, records, lines, self.spans), self.reader.conversation(), self.positions


def _context(counted: Counted, records: int, lines: int, spans: list[tuple[int, int]]) -> Context:
    """The context as a strategy sees it on the streamed route: no records held (its counts are pass 1's)."""
    covered = counted.covered
    return Context(transcript=Transcript(counted.format, [], counted.source), input_records=records,
                   covered=covered.records if covered is not None else 0, input_bytes=counted.nbytes,
                   input_lines=lines, system_spans=spans,
                   repairs=list(counted.repairs), problems=[], dropped=0, input_format=counted.format)


#: pass 1 gathers the conversation as it counts (one read instead of two) when what it reads (the file, or
#: what follows a state's covered prefix) holds at least this many bytes per token of the threshold: it
#: then almost surely compacts (transcripts hold 3-8 bytes per token); when it does not, what was gathered
#: is dropped
GATHER_BYTES_PER_TOKEN = 16


def gathering(path: Path, opts: Options,
              budget: Budget) -> Callable[[str, Covered | None, Any], tuple[Gathering, ...]]:
    """For pass 1 (``streaming.count_file``, reading from the start or the covered prefix as pass 2 does):
    given the format it reads, the covered prefix and its reading, a :class:`Gathering` told each record the
    reading parses, to fill with the parts it counts, when the file will most likely be compacted in pass 2
    (else none). Pass 2 then reads the file no more (:func:`read_conversation`)."""
    try:
        size = os.path.getsize(path)
    except OSError:
        size = 0

    def make(fmt: str, covered: Covered | None, reading: Any) -> tuple[Gathering, ...]:  # (a Reading)
        threshold = budget.threshold
        read = size - (covered.at if covered is not None else 0)  # (the call after a compaction: its tail)
        if (not threshold or read < GATHER_BYTES_PER_TOKEN * threshold or not may_compact_streamed(fmt, opts)
                or get_format(fmt).compaction_seen() is not None):
            return ()  # (an append-only log: route_file.compact_streamed reads what it takes in pass 2)
        gathered = Gathering(covered)
        reading.parsed = gathered.parsed
        return (gathered,)

    return make


def read_conversation(path: Path, counted: Counted, opts: Options,
                      taken: Any = None) -> tuple[Context, Conversation, dict[int, int]]:
    """Pass 2 for a compaction: the context as the strategy sees it (no records held: its counts of the
    input), the conversation read record by record, and the position in the context of each record it
    holds (``id(record) -> position``: pass 1's counts of them are not made again). Only the bytes pass 1
    read are read, and they must be the same (else an InputError: the file changed). After a state's covered
    prefix, the lead pass 1 read (its system records, the earlier summary: what the new summary carries
    forward) comes first, then the records after the prefix, which is not read again. ``taken``: given each
    line read (``Format.compaction_seen``). Where pass 1 gathered them (:func:`gathering`), the file is not
    read again."""
    if counted.gathered is not None and taken is None:
        found, records, nlines = counted.gathered
        if not isinstance(found, Gathering):  # a strategy's own (the sliding window's: _read_again)
            return _read_again(found, path, counted, opts, records, nlines)
        ctx, conv, positions = found.result(path, counted, records, nlines)
    else:
        gathered = Gathering(counted.covered, taken)
        reading = _conversation_reading(path, counted, opts)
        reading.parsed = gathered.parsed
        covered = counted.covered
        if taken is not None and covered is not None:
            # the prefix's lines first, told when the read starts (at once after a covered prefix)
            reading.started = lambda fmt: take_prefix(path, covered, reading.finish, taken)
        lines: list[int] = []
        for part in _conversation_parts(path, counted, reading, lines):
            gathered.add(part)
        ctx, conv, positions = gathered.result(path, counted, reading.records, lines[0])
    # an LLM summarizer reads the records a summary covers: read again, as often as it iterates them
    conv.again = lambda: _conversation_parts(path, counted, _conversation_reading(path, counted, opts))
    return ctx, conv, positions


def context_parts(path: Path, counted: Counted, opts: Options,
                  lines_read: list[int] | None = None) -> tuple[Any, Iterator[list[Record]]]:
    """The cleaned context's parts read again as pass 1 read them (:func:`_conversation_parts`: after a
    covered prefix, its lead first; an InputError if the file changed), and the reading (its ``records``:
    the input records read, once the parts are all read)."""
    reading = _conversation_reading(path, counted, opts)
    return reading, _conversation_parts(path, counted, reading, lines_read)


def context_of(counted: Counted, records: int, lines: int) -> Context:
    """The context as a strategy sees it on the streamed route (no records held), after ``records`` input
    records and ``lines`` lines read after the covered prefix, if any (as :meth:`Gathering.result`)."""
    covered = counted.covered
    return _context(counted, records, lines + (covered.line - 1 if covered is not None else 0), [])


def _conversation_reading(path: Path, counted: Counted, opts: Options) -> Any:  # (a Reading)
    """Pass 2's reading of the conversation: from the start or the state's covered prefix, as pass 1 read."""
    return Reading(path, opts, counted.format, schema=False, covered=counted.covered, limit=counted.nbytes,
                   source=counted.source, state=counted.layers, follow=counted.branch is not None,
                   branch=counted.branch)


def _conversation_parts(path: Path, counted: Counted, reading: Any,
                        lines_read: list[int] | None = None) -> Iterator[list[Record]]:
    """The cleaned context's parts, ``reading`` the bytes pass 1 read (after the covered prefix, its lead
    first); read to the end, they must be the same (else an InputError: the file changed). ``lines_read``:
    given the number of physical lines read, at the end."""
    covered = counted.covered
    at, line = begin(covered, None)
    with open_input(path) as stream:
        stream.seek(at)
        lines = _Lines(stream)
        hashing = Hashing(lines, counted.nbytes, at,  # type: ignore[arg-type]
                          covered.hash.copy() if covered is not None else None)
        try:
            yield from reading.parts(lines_at(hashing, at, line))
        except Held as held:
            raise InputError(f"{path} changed while it was read ({held}); run again") from None
    if hashing.nbytes != counted.nbytes or hashing.digest() != counted.digest:
        raise InputError(f"{path} changed while it was read; run again")
    if lines_read is not None:
        lines_read.append(lines.count)


def take_prefix(path: Path, covered: Covered, finish: Finish | None, taken: Any) -> None:
    """An append-only log's compaction after the state's covered prefix, each of whose lines the state says
    was read as a record the compaction copies (``Fingerprint.history``, ``route_file.compact_streamed``):
    ``taken`` (``Format.compaction_seen``) is given each line of the prefix as
    ``formats.jsonl.history_lines`` gives it, the line and its JSON decoded (what the format's reader keeps
    as the record's data), without parsing it as a record. Only where a line after the prefix makes every
    message before it history only (``finish``, after its scan: ``Finish.hides_all``; an ADK compaction,
    which hides a range of timestamps, once the prefix's are taken: ``Finish.hides_taken``), so that no
    line appended since has made a line of the prefix a result without its call; else
    :class:`~.errors.Unstreamable`. The bytes must be those pass 1 proved (else an InputError: the file
    changed)."""
    if finish is None or not (finish.hides_all or finish.hides):
        raise Unstreamable("no line after the covered prefix makes it history only")
    with open_input(path) as stream:
        hashing = Hashing(stream, covered.at)
        try:
            for lineno, _offset, raw in iter_lines_at(hashing):  # type: ignore[arg-type]
                taken.add(decode_line(raw, lineno), raw)
        except LineError:
            hashing.nbytes = -1  # (a line pass 1 proved good no longer reads: the file changed)
    if hashing.nbytes != covered.at or hashing.digest() != covered.hash.digest():
        raise InputError(f"{path} changed while it was read; run again")
    if not finish.hides_taken(taken):
        raise Unstreamable("the lines after the covered prefix leave a line of it in the context")


def input_lines(path: Path, counted: Counted) -> Iterator[bytes]:
    """The input's lines as an append-only log's compaction copies them before what it appends
    (``formats.jsonl.history_lines``: every line read as a record, as read, each ending in a newline; pass
    1 read no line it dropped or a result whose call no line makes), read again from the file: only the
    bytes pass 1 read, and they must be the same (else an InputError: the file changed)."""
    with open_input(path) as stream:
        hashing = Hashing(stream, counted.nbytes)
        for _lineno, _offset, raw in iter_lines_at(hashing):  # type: ignore[arg-type]
            yield raw + b"\n"
    if hashing.nbytes != counted.nbytes or hashing.digest() != counted.digest:
        raise InputError(f"{path} changed while it was read; run again")



def _read_again(found: Any, path: Path, counted: Counted, opts: Options, records: int,
                lines: int) -> tuple[Context, Any, dict[int, int]]:
    """The sliding window's events made without holding the file: its planner reads the records again by
    sweeps over the file (``sliding_window_input.Streamed``, :func:`reread`). Only a state whose layers are
    its own section alone (its events), no covered prefix (else Unstreamable: the held route)."""
    state, own = counted.layers, STRATEGIES.state_key_of(opts.strategy)
    if counted.covered is not None or (state is not None and (
            state.watermark or any(state.holds(key) for key in state.sections if key != own))):
        raise Unstreamable("layers besides the sliding window's events")
    lines += counted.resumed.line - 1 if counted.resumed is not None else 0
    spans: list[tuple[int, int]] = []
    inp = found.streamed(lambda layers, parsed: reread(path, counted, opts, layers, parsed), state,
                         counted.format, counted.source, spans)
    return _context(counted, records, lines, spans), inp, {}


def reread(path: Path, counted: Counted, opts: Options, state: Any,
           parsed: Callable[[Record], None] | None) -> Iterator[list[Record]]:
    """The cleaned context's parts, the file read again from its start as pass 1 read it with ``state``'s
    layers applied to each record (``parsed`` told each record as read). Only the bytes pass 1 read; read to
    the end, they must be the same (else an InputError: the file changed)."""
    reading = Reading(path, opts, counted.format, schema=False, limit=counted.nbytes, source=counted.source,
                      state=state, follow=counted.branch is not None, branch=counted.branch)
    reading.parsed = parsed
    with open_input(path) as stream:
        hashing = Hashing(stream, counted.nbytes)
        try:
            yield from reading.parts(lines_at(hashing, 0, 1))
        except Held as held:
            raise InputError(f"{path} changed while it was read ({held}); run again") from None
    if hashing.nbytes != counted.nbytes or hashing.digest() != counted.digest:
        raise InputError(f"{path} changed while it was read; run again")

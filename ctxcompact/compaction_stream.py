"""A compaction without holding the file (docs/measurements/performance.md#a-hooks-call): pass 2 of a
streamed ``run`` (:mod:`.streaming`) when pass 1 decided to compact.

Pass 2 reads the same bytes again record by record (``streaming.Reading``: parsed, finished and cleaned as
pass 1 did) into a :class:`~.strategies.conversation.Reader`, which keeps what the summary needs (the system
records, the latest request, the open todos, a window of the last records) and feeds everything before the
window to the fact store (:class:`~.facts.gather.FactFeed`). The strategy then runs as on the held route,
given that conversation instead of a held context: the same ``threshold.compact``, the same summarizer, the
same commit. Its output (the system records, the summary and continuation, the work in flight) is small.

Taken for the default path only (:func:`may_compact_streamed`): ``--strategy threshold`` without
``--prune``, the extractive summarizer, a format whose compaction output is the compacted context itself or
an append-only log's lines copied then what ``Format.compaction_appended`` makes of what
``Format.compaction_seen`` took of them line by line (Codex, ADK events, Claude Code: :func:`input_lines`), no
``--to`` into another format. The held route is taken instead for anything else, and whenever the
streamed one cannot give exactly what it gives
(:class:`~.errors.Unstreamable`): a compaction that would not make the context smaller
(the context is then written whole), a subagent's lines or a result before its call (the facts read over
the whole list), a work in flight that fits nowhere (the whole conversation is summarized again).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from .context import Context
from .errors import InputError
from .formats import get_format
from .formats.base import Format
from .model import Record, Role, Transcript
from .options import Options
from .paths import open_input
from .reader import iter_lines_at
from .streaming import Counted, Hashing, Held, Reading, begin, lines_at

if TYPE_CHECKING:
    from .strategies.conversation import Conversation


def may_compact_streamed(fmt: str, opts: Options) -> bool:
    """Whether a compaction of a file pass 1 read may be made in pass 2 (the module docstring)."""
    f = get_format(fmt)
    context = not f.layout.agent_log and type(f).compaction_output is Format.compaction_output
    # an append-only log: its lines copied, then what the compaction appends (Format.compaction_appended,
    # linked to them: Claude Code's parentUuid chain)
    appended = f.compaction_seen() is not None
    return (opts.strategy == "threshold" and not opts.prune and opts.summarizer == "extractive"
            and opts.to in (None, fmt) and (context or appended))


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


def read_conversation(path: Path, counted: Counted, opts: Options,
                      taken: Any = None) -> tuple[Context, Conversation, dict[int, int]]:
    """Pass 2 for a compaction: the context as the strategy sees it (no records held: its counts of the
    input), the conversation read record by record, and the position in the context of each record it
    holds (``id(record) -> position``: pass 1's counts of them are not made again). Only the bytes pass 1
    read are read, and they must be the same (else an InputError: the file changed). After a state's covered
    prefix, the lead pass 1 read (its system records, the earlier summary: what the new summary carries
    forward) comes first, then the records after the prefix, which is not read again. ``taken``: given each
    line read (``Format.compaction_seen``)."""
    covered = counted.covered
    reading = Reading(path, opts, counted.format, schema=False, covered=covered, limit=counted.nbytes)
    from .strategies.conversation import Reader  # (only a compaction loads it, and the facts it reads)

    positions: dict[int, int] = {}

    def dropped(rec: Record) -> None:
        positions.pop(id(rec), None)

    reader = Reader(hold=False, dropped=dropped)
    # the system lines, as context.build_context notes them
    spans: list[tuple[int, int]] = list(covered.spans) if covered is not None else []

    def parsed(rec: Record) -> None:
        if rec.message is not None and rec.message.role is Role.SYSTEM and rec.offset >= 0 and rec.raw:
            spans.append((rec.offset, len(rec.raw)))
        if taken is not None:
            taken.add(rec.data, rec.raw)

    reading.parsed = parsed
    changed = f"{path} changed while it was read; run again"
    seen = 0  # records of the cleaned context so far: the position of the next in pass 1's counts
    at, line = begin(covered, None)
    with open_input(path) as stream:
        stream.seek(at)
        lines = _Lines(stream)
        hashing = Hashing(lines, counted.nbytes, at,  # type: ignore[arg-type]
                          covered.hash.copy() if covered is not None else None)
        try:
            for part in reading.parts(lines_at(hashing, at, line)):
                for rec in part:
                    positions[id(rec)] = seen
                    seen += 1
                    reader.add(rec)
        except Held as held:
            raise InputError(f"{path} changed while it was read ({held}); run again") from None
    if hashing.nbytes != counted.nbytes or hashing.digest() != counted.digest:
        raise InputError(changed)
    ctx = Context(transcript=Transcript(counted.format, [], str(path)), input_records=reading.records,
                  covered=covered.records if covered is not None else 0, input_bytes=counted.nbytes,
                  input_lines=line - 1 + lines.count, system_spans=spans,
                  repairs=list(counted.repairs), problems=[], dropped=0, input_format=counted.format)
    return ctx, reader.conversation(), positions


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


"""A compaction without holding the file (docs/measurements/performance.md#a-hooks-call): pass 2 of a
streamed ``run`` (:mod:`.streaming`) when pass 1 decided to compact.

Pass 2 reads the same bytes again record by record (``streaming.Reading``: parsed, finished and cleaned as
pass 1 did) into a :class:`~.strategies.conversation.Reader`, which keeps what the summary needs (the system
records, the latest request, the open todos, a window of the last records) and feeds everything before the
window to the fact store (:class:`~.facts.gather.FactFeed`). The strategy then runs as on the held route,
given that conversation instead of a held context: the same ``threshold.compact``, the same summarizer, the
same commit. Its output (the system records, the summary and continuation, the work in flight) is small.

Taken for the default path only (:func:`may_compact_streamed`): ``--strategy threshold`` without
``--prune``, the extractive summarizer, a format whose compaction output is the compacted context itself
(not an agent's append-only log), no ``--to`` into another format. The held route is taken instead for
anything else, and whenever the streamed one cannot give exactly what it gives
(:class:`~.errors.Unstreamable`): a compaction that would not make the context smaller
(the context is then written whole), a subagent's lines or a result before its call (the facts read over
the whole list), a work in flight that fits nowhere (the whole conversation is summarized again).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from .context import Context
from .errors import InputError
from .formats import get_format
from .formats.base import Format
from .model import Record, Role, Transcript
from .options import Options
from .paths import open_input
from .reader import iter_lines_at
from .streaming import Counted, Hashing, Held, Reading

if TYPE_CHECKING:
    from .strategies.conversation import Conversation


def may_compact_streamed(fmt: str, opts: Options) -> bool:
    """Whether a compaction of a file pass 1 read may be made in pass 2 (the module docstring)."""
    f = get_format(fmt)
    return (opts.strategy == "threshold" and not opts.prune and opts.summarizer == "extractive"
            and opts.to in (None, fmt) and not f.layout.agent_log
            and type(f).compaction_output is Format.compaction_output)


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


def read_conversation(path: Path, counted: Counted,
                      opts: Options) -> tuple[Context, Conversation, dict[int, int]]:
    """Pass 2 for a compaction: the context as the strategy sees it (no records held: its counts of the
    input), the conversation read record by record, and the position in the context of each record it
    holds (``id(record) -> position``: pass 1's counts of them are not made again). Only the bytes pass 1
    read are read, and they must be the same (else an InputError: the file changed)."""
    from .strategies.conversation import Reader  # (only a compaction loads it, and the facts it reads)

    reading = Reading(path, opts, counted.format, schema=False)
    positions: dict[int, int] = {}

    def dropped(rec: Record) -> None:
        positions.pop(id(rec), None)

    reader = Reader(hold=False, dropped=dropped)
    spans: list[tuple[int, int]] = []  # the system lines, as context.build_context notes them

    def parsed(rec: Record) -> None:
        if rec.message is not None and rec.message.role is Role.SYSTEM and rec.offset >= 0 and rec.raw:
            spans.append((rec.offset, len(rec.raw)))

    reading.parsed = parsed
    changed = f"{path} changed while it was read; run again"
    seen = 0  # records of the cleaned context so far: the position of the next in pass 1's counts
    with open_input(path) as stream:
        lines = _Lines(stream)
        hashing = Hashing(lines, counted.nbytes)  # type: ignore[arg-type]
        try:
            for part in reading.parts(iter_lines_at(hashing)):  # type: ignore[arg-type]
                for rec in part:
                    positions[id(rec)] = seen
                    seen += 1
                    reader.add(rec)
        except Held as held:
            raise InputError(f"{path} changed while it was read ({held}); run again") from None
    if hashing.nbytes != counted.nbytes or hashing.digest() != counted.digest:
        raise InputError(changed)
    ctx = Context(transcript=Transcript(counted.format, [], str(path)), input_records=reading.records,
                  covered=0, input_bytes=counted.nbytes, input_lines=lines.count, system_spans=spans,
                  repairs=list(counted.repairs), problems=[], dropped=0, input_format=counted.format)
    return ctx, reader.conversation(), positions


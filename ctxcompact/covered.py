"""The state's covered prefix read from a file without holding it (docs/concepts/state.md#the-watermark):
what ``context.build_context`` does with a summary's watermark, for the streamed route (:mod:`.streaming`).

The prefix is proven by its SHA-256, taken in the pass that proves the count cache's settled prefix
(``CountCache.prove_stream``: the prefix is hashed once per call); its system lines and the attachments the
summary quotes are read by their spans (``context.covered_system``, ``context.summary_messages``), and the
context begins with them and the summary (the *lead*), as the held route's does. Whatever is wrong with the
prefix (it changed, the file is shorter, a span is corrupt, text was glued to its last line) is
:class:`Uncovered`: the held route reads the file and says so, with its errors, exit codes and blame.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Any, BinaryIO

from .context import covered_format, covered_system, glued_to_prefix, log_carries, summary_messages
from .errors import InputError, StateError, Uncovered, UsageError
from .formats import get_format
from .model import Record
from .options import Options
from .state import State, check_fingerprint


def covers(state: State | None) -> bool:
    """The state covers a prefix this read may replace (:class:`Covered`): a summary's watermark, with
    the prefix's format and lines (a state older than those is read held)."""
    fp = state.fingerprint if state is not None else None
    return (state is not None and fp is not None and state.watermark > 0 and fp.nbytes > 0 and bool(fp.format)
            and fp.lines is not None)


class _FileSpans:
    """A file's bytes by slice, read where sliced (``context``'s lines of the covered prefix, by their
    spans): never held. A slice from the end (a crafted state) is the held route's to read."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream

    def __getitem__(self, part: slice) -> bytes:
        start, stop = part.start or 0, part.stop
        if start < 0 or stop is None or stop < 0:
            raise Uncovered("a span counted from the end")
        self.stream.seek(start)
        return self.stream.read(max(0, stop - start))


@dataclass(slots=True)
class Covered:
    """The state's covered prefix, proven unchanged: the context begins with the records that replace it
    (``lead``: its system records read by their spans, then the summary, as ``context.build_context``
    puts them), and the read with the bytes after it (the held route's first line and record numbers)."""

    at: int  # the prefix's length: the read starts here
    hash: Any  # SHA-256 of the prefix
    line: int  # the number of the line after it
    records: int  # input records it covers
    format: str
    lead: list[Record]
    spans: list[tuple[int, int]]  # of its system records
    summary: int  # the summary's records at the lead's end (0: none)
    #: what a resume point must have been kept under to be taken (the lead and where the read starts)
    key: str

    @classmethod
    def read(cls, stream: BinaryIO, opts: Options, state: State, hashed: Any) -> Covered:
        """The covered prefix of ``state`` in ``stream`` (``hashed``: the SHA-256 state after the prefix,
        None when the file is shorter); :class:`Uncovered` where the held route says what is wrong (a changed
        prefix, a corrupt span, text glued to the prefix's last line: the same errors, exit codes and
        blame)."""
        fp = state.fingerprint
        if hashed is None:
            raise Uncovered("shorter than the covered prefix")
        view = _FileSpans(stream)
        try:
            check_fingerprint(state, b"", hashed=(hashed.hexdigest(), fp.nbytes))
            fmt = get_format(covered_format(opts, fp))
            system, spans = covered_system(fmt, fp, view)
            summary = summary_messages(fmt, state, view)
        except (StateError, UsageError, InputError) as err:
            raise Uncovered(str(err)) from None
        if glued_to_prefix(view, fp.nbytes):
            raise Uncovered("text appended to the covered prefix's last line")
        s = state.summary
        made = None if s is None else (s.text, s.continuation, s.latest_request, _spans(s.attachment_lines))
        at = (fp.nbytes, fp.sha256, fp.lines, fp.format, _spans(fp.system_lines), state.watermark)
        key = hashlib.sha256(repr((at, made)).encode()).hexdigest()
        assert fp.lines is not None
        return cls(fp.nbytes, hashed, fp.lines + 1, state.watermark, fmt.name, system + summary, spans,
                   len(summary), key)

    def carries(self, rec: Record) -> bool:
        """Whether ``rec``, read after the prefix, holds the lead's summary (``context.log_carries``: the
        output ctxcompact wrote into an agent's log put in the input's place); the context then has the
        log's copy, not the lead's (:meth:`carried`)."""
        return bool(self.summary) and log_carries(self.lead[len(self.lead) - self.summary:], [rec])

    def carried(self) -> Covered:
        """This prefix, its summary carried by the log: the lead is its system records only."""
        key = hashlib.sha256(f"{self.key} carried".encode()).hexdigest()
        return replace(self, lead=self.lead[:len(self.lead) - self.summary], summary=0, key=key)


    @staticmethod
    def prove(state: State, hashed: Any) -> None:
        """The prefix a state without a summary fingerprints (the input its layers acted on: masking),
        proven by its SHA-256 (``hashed``, None when the file is shorter); :class:`Uncovered` where the held
        route says what is wrong."""
        if hashed is None:
            raise Uncovered("shorter than the fingerprinted prefix")
        try:
            check_fingerprint(state, b"", hashed=(hashed.hexdigest(), state.fingerprint.nbytes))
        except StateError as err:
            raise Uncovered(str(err)) from None


def _spans(spans: Any) -> list[tuple[int, int]]:
    return [(int(o), int(n)) for o, n in spans]

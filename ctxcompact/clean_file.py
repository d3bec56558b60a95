"""``clean``'s whole-file read: read a transcript, validate it per line and clean it (:func:`clean_file`).

Apart from :mod:`.api` (which names it on first use) so that a hook's ``run`` does not make
:class:`CleanFileResult`: ~3 M instructions of a dataclass on Python 3.11
(docs/measurements/performance-log.md, start12).
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass, field

from .clean import Repair
from .clean import clean as _clean
from .convert import lines_in
from .engine import Warn, output_format, stderr_warn
from .errors import Problem
from .formats import read_transcript
from .model import Transcript
from .options import Options
from .source import InputData, Source


@dataclass(slots=True)
class CleanFileResult:
    """What ``clean_file`` made: the cleaned transcript, its output format, the repairs and the problems."""

    transcript: Transcript
    output_format: str
    repairs: list[Repair]
    problems: list[Problem] = field(default_factory=list)

    def lines(self) -> Iterator[bytes]:
        return lines_in(self.transcript, self.output_format)


def clean_file(source: Source, fmt: str = "auto", *, lenient: bool = False, to: str | None = None,
               warn: Warn = stderr_warn, keep_trailing_results: bool = False) -> CleanFileResult:
    """Read, validate per line and clean a transcript; ``.lines()`` gives the output (in ``to``, or the
    input's format)."""
    data = InputData.load(source)
    result = read_transcript(io.BytesIO(data.data), fmt, lenient=lenient, schema=True)
    cleaned = _clean(result.transcript, close_trailing=not keep_trailing_results)
    out_format = output_format(Options(to=to), cleaned.transcript, warn)
    return CleanFileResult(cleaned.transcript, out_format, list(cleaned.repairs), list(result.problems))

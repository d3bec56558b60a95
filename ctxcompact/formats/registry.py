"""The formats by name and format detection. The names are :data:`ctxcompact.plugins.FORMATS` (adding a
format: a module exposing ``FORMAT``, an instance of :class:`~ctxcompact.formats.base.Format`, and its line
there); each is loaded when first asked for (detection asks them all, a resumed read only its own)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ..errors import InputError, Problem
from ..plugins import FORMATS as REGISTRY
from .base import Format


class _Builtins(Mapping[str, Format]):
    """The built-in formats by name, each loaded on first look-up: reading the names loads none."""

    def __getitem__(self, name: str) -> Format:
        if name not in REGISTRY.builtin_names():
            raise KeyError(name)
        return REGISTRY.get(name)

    def __iter__(self) -> Iterator[str]:
        return iter(REGISTRY.builtin_names())

    def __len__(self) -> int:
        return len(REGISTRY.builtin_names())


# the built-in formats, in the registry's order (on a tie in detection the earlier format wins)
FORMATS: Mapping[str, Format] = _Builtins()

DEFAULT_FORMAT = REGISTRY.default
#: a sniff score at or above this means "certainly this format"
SURE = 90
#: how many decoded lines detection looks at before it decides (more only while still ambiguous)
DETECT_LINES = 50


def get_format(name: str) -> Format:
    """The format called ``name`` (``claude_code`` and ``claude-code`` are the same name)."""
    return REGISTRY.get(name)


def detect(objs: Sequence[Any], lines: Sequence[int] | None = None) -> str:
    """The name of the format of a transcript, judged from its decoded lines.

    Each format scores each line (``Format.sniff``, 0-100). Over the first :data:`DETECT_LINES` lines, the
    format that recognises the most lines wins, then the one with the highest total score, then the earlier
    in the registry. When that still leaves a tie, detection reads on until a line decides it.

    A file of plain text messages (``{"role": "user", "content": "…"}``) reads the same as OpenAI and as
    Anthropic; it is called ``openai`` because OpenAI is first in the registry: it is the more common JSONL
    shape, and such a file is also valid Anthropic input, so nothing is lost either way.

    ``lines`` gives the line numbers of ``objs`` for messages (default: 1, 2, 3…). Raises InputError when no
    format recognises any line (naming the first line) or when a line is recognised only by a format other
    than the winner (mixed formats, naming that line).
    """
    if lines is None:
        lines = range(1, len(objs) + 1)
    if not objs:
        return DEFAULT_FORMAT
    det = Detector()
    for obj, line in zip(objs, lines, strict=False):
        if det.add(obj, line):
            break
    return det.best()


class Detector:
    """:func:`detect` one line at a time, keeping nothing per line (a streaming reader's detection): ``add``
    each decoded line until it says detection is decided; ``leader`` is the format ahead so far, ``best``
    the answer (with its errors)."""

    def __init__(self) -> None:
        self.names = list(REGISTRY.names())
        self._formats: list[tuple[str, Format]] | None = None  # loaded by the first line it reads
        self._leader: str | None = None  # leader(), kept until the next line
        self.count = dict.fromkeys(self.names, 0)
        self.total = dict.fromkeys(self.names, 0)
        self.seen = 0
        self.first_line: int | None = None
        #: per format, the first line it does not recognise and another format is sure of (that format)
        self.against: dict[str, tuple[int, str]] = {}

    def add(self, obj: Any, line: int) -> bool:
        """Score one line; True once detection is decided (read no more lines into it)."""
        if self.first_line is None:
            self.first_line = line
        if self._formats is None:
            self._formats = [(n, REGISTRY.get(n)) for n in self.names]
        row = {n: _sniff(fmt, obj) for n, fmt in self._formats}
        self._leader = None
        for n, s in row.items():
            if s > 0:
                self.count[n] += 1
                self.total[n] += s
        other = max(row, key=lambda n: row[n])
        if row[other] >= SURE:
            for n, s in row.items():
                if s == 0 and n not in self.against:
                    self.against[n] = (line, other)
        self.seen += 1
        return self.seen >= DETECT_LINES and self.decided()

    def decided(self) -> bool:
        return leader(self.names, self.count, self.total, decided=True) is not None

    def kept(self) -> dict[str, Any]:
        """What the lines so far told it, for a reader that resumes after them (``streaming``)."""
        return {"count": dict(self.count), "total": dict(self.total), "seen": self.seen,
                "first_line": self.first_line, "against": {n: list(a) for n, a in self.against.items()}}

    @classmethod
    def resumed(cls, kept: dict[str, Any]) -> Detector:
        """A detector that has read what :meth:`kept` says (TypeError, ValueError or KeyError otherwise)."""
        det = cls()
        if set(kept["count"]) != set(det.names) or set(kept["total"]) != set(det.names):
            raise ValueError("another set of formats")
        det.count = {n: int(kept["count"][n]) for n in det.names}
        det.total = {n: int(kept["total"][n]) for n in det.names}
        det.seen = int(kept["seen"])
        first = kept["first_line"]
        det.first_line = None if first is None else int(first)
        det.against = {str(n): (int(a[0]), str(a[1])) for n, a in kept["against"].items()}
        return det

    def leader(self) -> str:
        if self._leader is None:
            self._leader = leader(self.names, self.count, self.total, decided=False)
        assert self._leader is not None
        return self._leader

    def best(self) -> str:
        if not self.seen:
            return DEFAULT_FORMAT
        if not any(self.count.values()):
            first = self.first_line
            raise InputError(f"line {first}: not a transcript line of any known format "
                             f"({', '.join(self.names)})", [Problem(first or 1, "$", "no known format "
                                                                    "recognises this line")])
        best = self.leader()
        if best in self.against:
            # only a line another format is sure of makes a mix; a merely odd line is left to the parser
            line, other = self.against[best]
            what = (f"this line is {other}, but the file reads as {best} "
                    "(mixed formats; name one with --format)")
            raise InputError(f"line {line}: {what}", [Problem(line, "$", what)])
        return best


def _sniff(fmt: Format, obj: Any) -> int:
    """``fmt.sniff(obj)``; a line whose values a format cannot even compare (an array where it reads a name)
    is not of that format. The parser then names the line and the path
    (docs/reference/exit-codes.md#bad-input: 1)."""
    try:
        return fmt.sniff(obj)
    except (TypeError, ValueError, AttributeError, RecursionError):
        return 0


def decided(objs: Sequence[Any]) -> bool:
    """Whether :func:`detect` decides on these first lines alone (it reads on while the leaders tie): then
    the first lines of a stream name its format as the whole file would."""
    det = Detector()
    for i, obj in enumerate(objs, 1):
        det.add(obj, i)
    return det.decided()


def leader(names: list[str], count: dict[str, int], total: dict[str, int], *, decided: bool) -> str | None:
    ranked = sorted(names, key=lambda n: (-count[n], -total[n], names.index(n)))
    if not decided or len(ranked) == 1:
        return ranked[0]
    a, b = ranked[0], ranked[1]
    return a if (count[a], total[a]) != (count[b], total[b]) else None


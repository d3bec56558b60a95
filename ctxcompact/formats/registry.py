"""The formats by name and format detection. The names are :data:`ctxcompact.plugins.FORMATS` (adding a
format: a module exposing ``FORMAT``, an instance of :class:`~ctxcompact.formats.base.Format`, and its line
there); every format is loaded here, since detection asks them all."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import InputError, Problem
from ..plugins import FORMATS as REGISTRY
from .base import Format

# the built-in formats, in the registry's order (on a tie in detection the earlier format wins)
FORMATS: dict[str, Format] = {name: REGISTRY.get(name) for name in REGISTRY.builtin_names()}
assert all(fmt.name == name for name, fmt in FORMATS.items())

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
    names = list(REGISTRY.names())
    count = dict.fromkeys(names, 0)
    total = dict.fromkeys(names, 0)
    scores: list[dict[str, int]] = []
    for i, obj in enumerate(objs):
        row = {n: _sniff(REGISTRY.get(n), obj) for n in names}
        scores.append(row)
        for n, s in row.items():
            if s > 0:
                count[n] += 1
                total[n] += s
        if i + 1 >= DETECT_LINES and leader(names, count, total, decided=True) is not None:
            break
    if not objs:
        return DEFAULT_FORMAT
    if not any(count.values()):
        raise InputError(f"line {lines[0]}: not a transcript line of any known format "
                         f"({', '.join(names)})", [Problem(lines[0], "$", "no known format recognises "
                                                           "this line")])
    best = leader(names, count, total, decided=False)
    assert best is not None
    for i, row in enumerate(scores):
        other = max(row, key=lambda n: row[n])
        # only a line another format is sure of makes a mix; a merely odd line is left to the parser
        if row[best] == 0 and row[other] >= SURE:
            what = (f"this line is {other}, but the file reads as {best} "
                    "(mixed formats; name one with --format)")
            raise InputError(f"line {lines[i]}: {what}", [Problem(lines[i], "$", what)])
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
    names = list(REGISTRY.names())
    count = dict.fromkeys(names, 0)
    total = dict.fromkeys(names, 0)
    for obj in objs:
        for n in names:
            s = _sniff(REGISTRY.get(n), obj)
            if s > 0:
                count[n] += 1
                total[n] += s
    return leader(names, count, total, decided=True) is not None


def leader(names: list[str], count: dict[str, int], total: dict[str, int], *, decided: bool) -> str | None:
    ranked = sorted(names, key=lambda n: (-count[n], -total[n], names.index(n)))
    if not decided or len(ranked) == 1:
        return ranked[0]
    a, b = ranked[0], ranked[1]
    return a if (count[a], total[a]) != (count[b], total[b]) else None


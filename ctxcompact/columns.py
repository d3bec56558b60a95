"""Integer columns of 2 bytes an item, 4 or 8 only where an item needs them: what a run keeps per record
(pass 1's counts, ``stream_totals.Totals``; the count cache's, ``tokens.cache``; the resume point's) are
token counts of one record, under 2**15 but for a record of ~100 KB or more, and under 2**31 but for a record
of gigabytes (the cache's line offsets need 4 bytes from the second line on), so a column is narrow until a
value does not fit, then widened whole, once per width (docs/concepts/state.md#the-count-cache: the width of
each column is written with it)."""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence

#: the typecodes a column may have, narrowest first (2, 4 and 8 bytes an item)
CODES = ("h", "i", "q")
NARROW, WIDE = CODES[0], CODES[-1]
#: a column's typecode by its item's width in bytes, as written
BY_WIDTH = {array(code).itemsize: code for code in CODES}
_LIMITS = [(code, 1 << (8 * array(code).itemsize - 1)) for code in CODES]


def code_for(value: int) -> str:
    """The narrowest typecode that holds ``value`` (OverflowError past 8 bytes)."""
    for code, limit in _LIMITS:
        if -limit <= value < limit:
            return code
    raise OverflowError(f"{value} does not fit 8 bytes")


def fits(value: int, column: array[int] | None = None) -> bool:
    """Whether ``value`` fits ``column`` (None: a narrow one)."""
    return CODES.index(code_for(value)) <= CODES.index(column.typecode if column is not None else NARROW)


def narrow() -> array[int]:
    return array(NARROW)


def _at_least(column: array[int], code: str) -> array[int]:
    """``column``, or a copy of it as wide as ``code`` if that is wider."""
    return array(code, column) if CODES.index(code) > CODES.index(column.typecode) else column


def of(values: Sequence[int]) -> array[int]:
    """A column of ``values``, as narrow as they allow."""
    return extend(narrow(), values)


def widened(column: array[int]) -> array[int]:
    return _at_least(column, WIDE)


def append(column: array[int], value: int) -> array[int]:
    """``column`` with ``value`` appended: the same column, or a wider copy of it if the value needs one."""
    try:
        column.append(value)
    except OverflowError:
        column = _at_least(column, code_for(value))
        column.append(value)
    return column


def put(column: array[int], i: int, value: int) -> array[int]:
    """``column`` with item ``i`` made ``value``: the same column, or a wider copy if the value needs one."""
    try:
        column[i] = value
    except OverflowError:
        column = _at_least(column, code_for(value))
        column[i] = value
    return column


def extend(column: array[int], values: Iterable[int]) -> array[int]:
    """``column`` with ``values`` (a sequence) appended: the same column, or a wider copy if one needs it."""
    if isinstance(values, array) and values.typecode != column.typecode:
        values = values.tolist()  # (an array extends only one of its own kind)
    n = len(column)
    try:
        column.extend(values)
    except OverflowError:
        del column[n:]  # (the items before the one that did not fit were appended)
        widest = max((code_for(v) for v in values), key=CODES.index)  # (a sequence: read again)
        column = _at_least(column, widest)
        column.extend(values)
    return column


def join(first: array[int], second: array[int]) -> array[int]:
    """The two columns end to end, as wide as the wider."""
    code = max(first.typecode, second.typecode, key=CODES.index)
    return _at_least(first, code) + _at_least(second, code)


def from_bytes(raw: bytes | memoryview, width: int) -> array[int]:
    """A column of items ``width`` bytes wide, as :func:`memoryview` of one gave them (ValueError on a width
    or a length it cannot be)."""
    code = BY_WIDTH.get(width) if isinstance(width, int) else None
    if code is None:
        raise ValueError(f"a column {width!r} bytes wide")
    got = array(code)
    got.frombytes(raw)
    return got

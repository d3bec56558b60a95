"""Integer columns of 4 bytes an item, 8 only where an item needs them: what a run keeps per record (pass 1's
counts, ``stream_totals.Totals``; the count cache's, ``tokens.cache``; the resume point's) are token counts
of one record, under 2**31 but for a record of gigabytes, so a column is narrow until a value does not fit,
then widened whole, once (docs/concepts/state.md#the-count-cache: the width of each column is written with
it)."""

from __future__ import annotations

from array import array
from collections.abc import Iterable

NARROW, WIDE = "i", "q"
#: a column's typecode by its item's width in bytes, as written
BY_WIDTH = {array(NARROW).itemsize: NARROW, array(WIDE).itemsize: WIDE}


_LIMIT = 1 << (8 * array(NARROW).itemsize - 1)


def fits(value: int) -> bool:
    """Whether ``value`` fits a narrow column."""
    return -_LIMIT <= value < _LIMIT


def narrow() -> array[int]:
    return array(NARROW)


def of(values: Iterable[int]) -> array[int]:
    """A column of ``values`` (a sequence: read again if one does not fit 4 bytes)."""
    try:
        return array(NARROW, values)
    except OverflowError:
        return array(WIDE, values)


def widened(column: array[int]) -> array[int]:
    return column if column.typecode == WIDE else array(WIDE, column)


def append(column: array[int], value: int) -> array[int]:
    """``column`` with ``value`` appended: the same column, or a wide copy of it if the value needs one."""
    try:
        column.append(value)
    except OverflowError:
        column = array(WIDE, column)
        column.append(value)
    return column


def extend(column: array[int], values: Iterable[int]) -> array[int]:
    """``column`` with ``values`` (a sequence) appended: the same column, or a wide copy if one needs it."""
    n = len(column)
    try:
        column.extend(values)
    except OverflowError:
        del column[n:]  # (the items before the one that did not fit were appended)
        column = array(WIDE, column)
        column.extend(values)
    return column


def join(first: array[int], second: array[int]) -> array[int]:
    """The two columns end to end, as wide as the wider."""
    if first.typecode != second.typecode:
        first, second = widened(first), widened(second)
    return first + second


def from_bytes(raw: bytes | memoryview, width: int) -> array[int]:
    """A column of items ``width`` bytes wide, as :func:`memoryview` of one gave them (ValueError on a width
    or a length it cannot be)."""
    code = BY_WIDTH.get(width) if isinstance(width, int) else None
    if code is None:
        raise ValueError(f"a column {width!r} bytes wide")
    got = array(code)
    got.frombytes(raw)
    return got

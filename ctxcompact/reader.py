"""Bytes to decoded JSON lines: line numbering, BOM, CRLF, blank lines, and readable decode errors.

The reader streams: it holds one line at a time, so a transcript of any size can be read with memory bounded
by its longest line.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterator
from typing import Any, BinaryIO

import orjson

from .errors import LineError

#: a UTF-8 byte-order mark: removed where it opens the input
BOM = b"\xef\xbb\xbf"

# orjson refuses documents nested deeper than this (its recursion guard); we name it in the message.
ORJSON_MAX_DEPTH = 1024


#: Python frames a walk over a decoded value may need: a few per level (jsonschema, repr, equality) over
#: the deepest value the reader accepts. Python's default limit (1000) is below ORJSON_MAX_DEPTH itself.
_DEEP_RECURSION = 8 * ORJSON_MAX_DEPTH


def allow_deep_values() -> None:
    """Raise Python's recursion limit so code that walks a decoded value recursively (the schema check, a
    repr, an equality test) handles every nesting the reader accepts (docs/reference/exit-codes.md#bad-input:
    up to 1024 levels is valid input, deeper is a clean error)."""
    if sys.getrecursionlimit() < _DEEP_RECURSION:
        sys.setrecursionlimit(_DEEP_RECURSION)


def iter_lines(stream: BinaryIO) -> Iterator[tuple[int, bytes]]:
    """Yield ``(line number, bytes)`` for every non-blank line of ``stream``.

    Line numbers are 1-based and count blank lines too, so they match what an editor shows. The line ending
    (``\\n``, and every CR before it or at the end of the input) is removed; a UTF-8 byte-order mark at the
    very start is removed; lines made only of ASCII whitespace are skipped.
    """
    for lineno, _offset, line in iter_lines_at(stream):
        yield lineno, line


def iter_lines_at(stream: BinaryIO, first_line: int = 1) -> Iterator[tuple[int, int, bytes]]:
    """Like :func:`iter_lines`, also giving each line's byte offset from the stream's current position.

    ``first_line`` is the number of the stream's first line, for a stream positioned after a prefix of the
    file (then no BOM is looked for: a BOM can only open the file). The offset points at the line's first
    byte after any BOM, so ``data[offset:offset + len(line)] == line``.
    """
    lineno = first_line - 1
    pos = 0
    # readline keeps one line in memory at a time (unlike read()), whatever the file size.
    for chunk in iter(stream.readline, b""):
        lineno += 1
        start = pos
        pos += len(chunk)
        line = chunk
        if line.endswith(b"\n"):
            line = line[:-1]
        # every CR before the line's end is JSON whitespace: a line ending in \r\r\n is read as the same
        # line as one ending in \n, so cleaning twice gives what cleaning once gave (issue 26 item 15)
        line = line.rstrip(b"\r")
        if lineno == 1 and line.startswith(BOM):
            line = line[len(BOM):]
            start += len(BOM)
        if not line or line.isspace():
            continue
        yield lineno, start, line


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def json_type_name(value: Any) -> str:
    """The JSON name of a decoded value's type (``object``, ``array``, ``string``, ``number``…)."""
    return _type_name(value)


def json_type_phrase(value: Any) -> str:
    """The JSON type of a decoded value as a message says it: ``an array``, ``a string``, ``null``."""
    name = _type_name(value)
    if name == "null" or name not in ("boolean", "number", "string", "array", "object"):
        return name
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def _explain(raw: bytes, err: orjson.JSONDecodeError) -> str:
    """Turn orjson's terse error into a message that says what is wrong and where."""
    msg = err.msg
    pos = err.pos
    col = err.colno
    # orjson reports bad UTF-8 with a misleading text and position; find the real byte ourselves.
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as ude:
        return f"invalid UTF-8 at byte {ude.start + 1} (the line must be UTF-8 text)"
    if "depth limit" in msg or "recursion" in msg:
        return (f"nesting too deep at column {col}: more than {ORJSON_MAX_DEPTH} levels of arrays/objects "
                "(the JSON parser's limit)")
    for start in (pos - 1, pos):
        if start < 0:
            continue
        # orjson positions count characters, not bytes
        tail = text[start:start + 9]
        for word in ("-Infinity", "Infinity", "NaN"):
            if tail.startswith(word):
                return (f"{word} at column {start + 1} is not valid JSON "
                        "(NaN and Infinity are not allowed; write null or a number)")
    if "unexpected end of data" in msg or "EOF" in msg:
        return f"truncated JSON: the line ends at column {col} before the value is complete"
    if "after document" in msg or "trailing characters" in msg:
        return f"trailing data at column {col} after the JSON value (one JSON value per line)"
    if "surrogate" in msg:
        return f"invalid JSON string at column {col}: {msg} (unpaired UTF-16 surrogate escape)"
    return f"invalid JSON at column {col}: {msg}"


def decode_line(raw: bytes, line: int) -> Any:
    """Decode one line as a JSON object.

    Raises :class:`LineError` with path ``$`` for anything that is not a single JSON object: invalid or
    truncated JSON, invalid UTF-8, NaN/Infinity, nesting deeper than the parser allows, data after the
    value, or a value that is not an object (``line`` is the line number, for callers that report it).
    """
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as err:
        raise LineError("$", _explain(raw, err)) from None
    if not isinstance(obj, dict):
        raise LineError("$", f"expected a JSON object, got {_type_name(obj)} (each line must be one object)")
    return obj


def encode_json(value: Any, max_depth: int | None = None) -> bytes:
    """``value`` as compact JSON, byte for byte what ``orjson.dumps`` writes, at any depth the reader accepts.

    orjson writes at most 255 levels of nesting, while it reads 1024; a tool's arguments nested deeper than
    255 levels are still a valid line (docs/reference/exit-codes.md#bad-input), so deeper values are written
    by a loop that leaves every scalar to orjson.

    ``max_depth`` (a line's writer gives :data:`ORJSON_MAX_DEPTH`): an array or object that would sit deeper
    is written as the JSON text of itself, a string, so the line stays one the reader (and ``validate``)
    accepts. Converting to a format that wraps a tool's arguments in more levels than the input did
    (``--to genai``) is the only way a line gets there (docs/reference/safety.md).
    """
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError as err:
        if "ecursion" not in str(err):
            raise
    out: list[bytes] = []
    # a stack of pending work: a value to write (with its depth), or literal bytes (separators, brackets)
    stack: list[Any] = [(value, 1)]
    while stack:
        entry = stack.pop()
        if isinstance(entry, _Raw):
            out.append(entry.data)
            continue
        item, depth = entry
        if max_depth is not None and depth > max_depth and isinstance(item, (dict, list, tuple)):
            out.append(orjson.dumps(encode_json(item).decode()))
        elif isinstance(item, dict):
            parts: list[Any] = [_Raw(b"{")]
            for i, (k, v) in enumerate(item.items()):
                parts.append(_Raw((b"," if i else b"") + orjson.dumps(k) + b":"))
                parts.append((v, depth + 1))
            parts.append(_Raw(b"}"))
            stack.extend(reversed(parts))
        elif isinstance(item, (list, tuple)):
            parts = [_Raw(b"[")]
            for i, v in enumerate(item):
                if i:
                    parts.append(_Raw(b","))
                parts.append((v, depth + 1))
            parts.append(_Raw(b"]"))
            stack.extend(reversed(parts))
        else:
            out.append(orjson.dumps(item))
    return b"".join(out)


class _Raw:
    """Bytes :func:`encode_json` writes as they are."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


def line_digest(raw: bytes) -> int:
    """The content key of one line: 64 bits of BLAKE2b, as a signed integer (an ``array('q')`` item). What
    the count cache keys counts by, and what the reader remembers a conforming line by."""
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "little", signed=True)

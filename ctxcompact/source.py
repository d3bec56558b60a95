"""The input of a command: a path, ``-`` (stdin), bytes or a binary stream, read once into memory.

Every command that reads a transcript goes through :meth:`InputData.load`, so a missing file, a folder or an
unreadable file gives the same clear usage error everywhere.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from .errors import UsageError
from .paths import read_input

Source = str | Path | bytes | BinaryIO


@dataclass(slots=True)
class InputData:
    """The input as bytes, read once. The state's covered prefix lets later steps skip parsing it.

    A transcript stored as one JSON document (an ADK session export, a JSON array of messages) is read as
    the JSONL of its records (``document.split_document``): ``data`` holds that JSONL, ``document`` says what
    the file was, and line N of every message is record N of the document."""

    data: bytes
    path: Path | None  # None for stdin / bytes
    document: str | None = None  # what a whole-file JSON input was; None for JSONL

    @classmethod
    def load(cls, source: Source) -> InputData:
        data, path = cls._read(source)
        from .document import split_document  # (here: a streamed run holds no input, document.py)

        doc = split_document(data)
        return cls(data, path) if doc is None else cls(doc.lines, path, doc.what)

    @staticmethod
    def _read(source: Source) -> tuple[bytes, Path | None]:
        if isinstance(source, bytes):
            return source, None
        if isinstance(source, (str, Path)):
            if str(source) == "-":
                return sys.stdin.buffer.read(), None
            path = Path(source)
            try:  # a FIFO or a device is read up to a bound, never without end (paths.read_input)
                return read_input(path), path
            except FileNotFoundError:
                raise UsageError(f"no such file: {path}") from None
            except IsADirectoryError:
                raise UsageError(f"{path} is a directory, not a transcript") from None
            except PermissionError:
                raise UsageError(f"cannot read {path}: permission denied") from None
            except OSError as exc:
                raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
        return source.read(), None

    @property
    def lines(self) -> int:
        """Physical lines of the input (a last line without a newline counts)."""
        return count_lines(self.data, len(self.data))


def count_lines(data: bytes, end: int) -> int:
    """Physical lines in ``data[:end]`` (a last line without a newline counts)."""
    return data.count(b"\n", 0, end) + (1 if end and data[end - 1 : end] != b"\n" else 0)


def is_file(source: Source) -> bool:
    """A path on disk (not ``-``, bytes or a stream)."""
    return isinstance(source, (str, Path)) and str(source) != "-"


def is_stdin(source: Source) -> bool:
    """``-``: stdin."""
    return isinstance(source, (str, Path)) and str(source) == "-"


def source_name(path: Path | None) -> str:
    """How a transcript names where it was read (``Transcript.source``): its path, ``-`` for stdin or
    bytes; the same on every route (stdin read through a spool file is still ``-``)."""
    return str(path or "-")

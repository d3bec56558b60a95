"""Transcript formats: one module per format behind :mod:`.base`'s small interface, the registry and
detection (:mod:`.registry`), reading and writing JSONL (:mod:`.jsonl`).

``from ctxcompact.formats import …`` gives the registry and the readers/writers; conversion, which cleans
its result, is :mod:`ctxcompact.convert`, a layer above (it needs the cleaner, which needs the format
layouts).
"""

from __future__ import annotations

from .jsonl import (
    MAX_PROBLEMS,
    ReadResult,
    is_unchanged,
    read_lines,
    read_transcript,
    schema_problems,
    write_transcript,
)
from .registry import DEFAULT_FORMAT, DETECT_LINES, FORMATS, SURE, detect, get_format, leader

__all__ = [
    "DEFAULT_FORMAT",
    "DETECT_LINES",
    "FORMATS",
    "MAX_PROBLEMS",
    "SURE",
    "ReadResult",
    "detect",
    "get_format",
    "is_unchanged",
    "leader",
    "read_lines",
    "read_transcript",
    "schema_problems",
    "write_transcript",
]

"""Probes: what the user knows must survive a compaction (docs/guides/eval.md#probes).

A probes file is JSONL: one ``{"expect": "string"}`` or ``{"expect_regex": "…"}`` per line, with an optional
``"question"`` (what ``--judge`` asks the model) and an optional ``"category"`` (what kind of fact it is, for
the per-category table: one of :data:`CATEGORIES`). Blank lines and lines starting with ``#`` are skipped."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import orjson

from ..errors import InputError, UsageError
from ..paths import read_side_file

#: what a continuing agent needs, by kind (docs/guides/eval.md#probes)
CATEGORIES = ("rules", "request", "files", "errors", "identifiers", "decisions", "todos", "skill")


@dataclass(frozen=True, slots=True)
class Probe:
    line: int
    expect: str | None = None
    expect_regex: str | None = None
    question: str | None = None
    category: str | None = None

    @property
    def label(self) -> str:
        return self.expect if self.expect is not None else f"/{self.expect_regex}/"

    def found_in(self, text: str) -> bool:
        if self.expect is not None:
            return self.expect in text
        assert self.expect_regex is not None
        return re.search(self.expect_regex, text) is not None


def _probe(path: str, n: int, raw: bytes) -> Probe:
    where = f"--probes {path}: line {n}"
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise InputError(f"{where}: not JSON ({e}); expected one JSON object per line") from None
    if not isinstance(obj, dict):
        raise InputError(f'{where}: expected an object like {{"expect": "…"}}, got {type(obj).__name__}')
    expect, regex, question = obj.get("expect"), obj.get("expect_regex"), obj.get("question")
    category = obj.get("category")
    if (expect is None) == (regex is None):
        raise InputError(f'{where}: give exactly one of "expect" or "expect_regex"')
    fields = (("expect", expect), ("expect_regex", regex), ("question", question), ("category", category))
    for key, value in fields:
        if value is not None and (not isinstance(value, str) or not value):
            raise InputError(f'{where}: "{key}" must be a non-empty string')
    if category is not None and category not in CATEGORIES:
        raise InputError(f'{where}: "category" must be one of {", ".join(CATEGORIES)}, got {category!r}')
    if regex is not None:
        try:
            re.compile(regex)
        except re.error as e:
            raise InputError(f'{where}: "expect_regex" is not a valid regular expression: {e}') from None
    return Probe(n, expect, regex, question, category)


def load_probes(path: str | Path) -> list[Probe]:
    """The probes of a JSONL file. A line that is not such an object is an InputError naming the line (exit 1,
    as for a bad transcript); a file that cannot be read is a UsageError."""
    try:
        data = read_side_file(path, f"--probes {path}")
    except OSError as e:
        raise UsageError(f"--probes {path}: cannot read: {e.strerror or e}") from None
    probes = []
    for n, raw in enumerate(data.split(b"\n"), start=1):  # JSONL: lines end at \n only
        stripped = raw.strip()
        if not stripped or stripped.startswith(b"#"):
            continue
        probes.append(_probe(str(path), n, stripped))
    return probes

"""Recall what a summary replaced (docs/guides/frameworks.md#mcp-server): search the original records the
state's summary covers, by text or regular expression, and give them back with their line numbers, so an
agent can read an exact earlier detail instead of redoing the work.

Bounded everywhere: only the covered prefix of the file is read (the state says how many bytes), at most
:data:`MAX_RESULTS` records are returned, each as an excerpt of at most :data:`MAX_EXCERPT` characters, and
a regular expression gets :data:`REGEX_TIMEOUT_S` seconds per record (the ``regex`` module's timeout).
Credentials are masked in what it returns, as in everything ctxcompact composes
(docs/reference/safety.md#credentials-in-what-ctxcompact-writes).
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import UsageError
from .formats import read_transcript
from .model import token_text
from .secrets import scrub_credentials
from .state import check_fingerprint, default_state_path, load_state

MAX_RESULTS = 100
MAX_EXCERPT = 4000
MAX_QUERY = 1000
REGEX_TIMEOUT_S = 1.0


@dataclass(slots=True)
class Hit:
    line: int
    role: str
    text: str  # an excerpt around the first match

    def to_json(self) -> dict[str, Any]:
        return {"line": self.line, "role": self.role, "text": self.text}


@dataclass(slots=True)
class Recall:
    path: str
    covered_lines: int  # the summary replaced lines 1..covered_lines of the file
    covered_records: int
    hits: list[Hit] = field(default_factory=list)
    more: int = 0  # further matching records not returned (max_results)

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "covered_lines": self.covered_lines,
                "covered_records": self.covered_records, "hits": [h.to_json() for h in self.hits],
                "more": self.more}


def _matcher(query: str, use_regex: bool) -> Any:
    if not query or len(query) > MAX_QUERY:
        raise UsageError(f"recall: the query must be 1 to {MAX_QUERY} characters")
    if not use_regex:
        folded = query.casefold()

        def find(text: str) -> int:
            return text.casefold().find(folded)
        return find
    import regex

    try:
        pattern = regex.compile(query, regex.IGNORECASE)
    except regex.error as exc:
        raise UsageError(f"recall: not a regular expression: {exc}") from None

    def search(text: str) -> int:
        try:
            m = pattern.search(text, timeout=REGEX_TIMEOUT_S)
        except TimeoutError:
            raise UsageError(f"recall: the regular expression took over {REGEX_TIMEOUT_S:g} s on one "
                             "record; make it simpler") from None
        return m.start() if m else -1
    return search


def _excerpt(text: str, at: int, size: int) -> str:
    if len(text) <= size:
        return text
    start = max(0, min(at - size // 4, len(text) - size))
    cut = text[start:start + size]
    return ("…" if start else "") + cut + ("…" if start + size < len(text) else "")


def recall(path: str | os.PathLike[str], query: str, *, regex: bool = False,
           state_path: str | os.PathLike[str] | None = None, max_results: int = 20,
           excerpt_chars: int = 600) -> Recall:
    """The records of ``path`` that the state's summary replaced and that match ``query`` (case-insensitive
    text, or a regular expression), oldest first, with their line numbers."""
    file = Path(path)
    sp = Path(state_path) if state_path is not None else default_state_path(file)
    state = load_state(sp)
    if state is None or state.watermark == 0:
        raise UsageError(f"recall: no summary covers any part of {file} yet (no compaction in {sp})")
    fp = state.fingerprint
    try:
        with open(file, "rb") as f:
            prefix = f.read(fp.nbytes)  # only what the summary covers: bounded by the state
    except OSError as exc:
        raise UsageError(f"recall: cannot read {file}: {exc.strerror or exc}") from None
    check_fingerprint(state, prefix, state_path=sp)
    find = _matcher(query, regex)
    limit = max(1, min(max_results, MAX_RESULTS))
    size = max(80, min(excerpt_chars, MAX_EXCERPT))
    records = read_transcript(io.BytesIO(prefix), fp.format or "auto", lenient=True, schema=False)
    out = Recall(str(file), fp.lines or prefix.count(b"\n"), state.watermark)
    for rec in records.transcript.records:
        if rec.message is None:
            continue
        text = scrub_credentials("\n".join(token_text(rec.message)[0]))  # what ctxcompact hands out
        at = find(text)
        if at < 0:
            continue
        if len(out.hits) < limit:
            out.hits.append(Hit(rec.line, rec.message.role.value, _excerpt(text, at, size)))
        else:
            out.more += 1
    return out

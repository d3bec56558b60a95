"""A streamed read's resume point (docs/concepts/state.md#the-settled-prefix): where the next call's pass 1
may start after a prefix proven unchanged, what the read carries over the records before it, and when it
may be used. :class:`Mark` is where the last part the cleaner settled began while reading;
``streaming._Reading.kept`` turns it into the marshal-able dict a count cache keeps, and
:meth:`ResumePoint.proven` reads that dict back.
Split from ``streaming`` (which reads and writes) so the rule for taking a resume point is in one place.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from .call_ids import CallIds
from .formats import get_format
from .formats.registry import Detector
from .options import Options
from .state import State
from .stream_totals import Totals
from .tokens.cache import CountCache
from .tokens.counts import count_key

if TYPE_CHECKING:
    from .covered import Covered


@dataclass(slots=True)
class ResumePoint:
    """Where a read starts after a prefix proven unchanged (a count cache's resume point): at the first
    record of the last part the cleaner settled, with what the read carries over the records before it."""

    at: int  # byte offset of that record's line
    hash: Any  # SHA-256 of the bytes before it (carried on over the rest)
    format: str
    line: int  # its line number
    records: int  # input records before it
    #: the cleaner's carry (clean.Cleaner.carried) and the calls' names by id (Format.finish_stream), one
    #: entry an id; a reading starts with a copy
    ids: CallIds
    started: bool
    settled: int
    finish: Any  # what else the format's finishing carries (formats.base.Finish.kept)
    #: detection still reading on, that record's line read (Detector.kept)
    detector: dict[str, Any] | None
    totals: dict[str, Any]  # Totals.kept, read
    last: int | None  # the verbatim check over the records before it (_count)
    kept: int
    #: the cleaned records before it are the input's lines, in order and byte for byte (no blank line, CR
    #: or BOM): pass 2 copies those bytes as they are
    plain: bool
    #: else what the call that kept it wrote before that record (``{"at", "sha256", "key"}``; None: not
    #: known): pass 2 copies those bytes from the output if it still starts with them (:func:`written_lines`)
    output: dict[str, Any] | None = None
    #: what a strategy's own gatherer had gathered of the records before it (``strategies.run_gathers``;
    #: None: kept by a call without one)
    gathered: Any = None

    VERSION = 5

    @classmethod
    def proven(cls, cache: CountCache, hashed: Any, opts: Options, covered: Covered | None,
               layers: str | None = None) -> ResumePoint | None:
        """The cache's resume point if the input still starts with the bytes it was kept after (``hashed``:
        the SHA-256 state there, from :meth:`CountCache.prove_stream`, None if not), for these options and
        this covered prefix (kept by a read that began after it, with the same lead); else None."""
        kept = cache.resume
        if hashed is None or not isinstance(kept, dict) or cache.format is None:
            return None
        try:
            if kept["v"] != cls.VERSION or kept["options"] != opts.format or kept["format"] != cache.format:
                return None  # (a format detected is not a format given: the detection is part of the read)
            if kept.get("covered") != (covered.key if covered is not None else None) or (
                    covered is not None and cache.resume_at < covered.at):
                return None
            if kept.get("layers") != layers:  # (what it carries was counted with these layers applied)
                return None
            if cache.key != count_key(opts, cache.format):
                return None
            last = kept["last"]
            get_format(cache.format).finish_stream(None, kept["finish"])  # (raises on what it does not take)
            exact = opts.exact != "none"
            columns = cache.resume_columns  # (pass 1's counts, then the call ids')
            return cls(cache.resume_at, hashed, cache.format, int(kept["line"]), int(kept["records"]),
                       CallIds.read(kept["ids"], columns[1 + exact:]), bool(kept["started"]),
                       int(kept["settled"]), kept["finish"],
                       _detector(kept["detector"]),
                       Totals.read(kept["totals"], columns[:1 + exact], exact),
                       None if last is None else int(last), int(kept["kept"]), bool(kept["plain"]),
                       _output(kept.get("output")), kept.get("gathered"))
        except (KeyError, TypeError, ValueError, AttributeError):
            return None


def layers_key(state: State | None) -> str | None:
    """What a resume point is kept under of the state's layers (None: none to apply again)."""
    if state is None or not state.holds_sections():
        return None
    d = state.to_json()
    return hashlib.sha256(orjson.dumps({k: d.get(k) for k in sorted(state.sections)})).hexdigest()


def _output(kept: Any) -> dict[str, Any] | None:
    if kept is None:
        return None
    return {"at": int(kept["at"]), "sha256": str(kept["sha256"]), "key": list(kept["key"])}


def _detector(kept: Any) -> dict[str, Any] | None:
    if kept is not None:
        Detector.resumed(kept)  # (raises on anything it does not take)
    return kept


@dataclass(slots=True)
class Mark:
    """Where the last part the cleaner settled began (:class:`ResumePoint`, before it is kept)."""

    at: int
    hash: Any
    line: int
    records: int
    ids: tuple[int, int]  # the reading's call ids then (CallIds.mark: they are added, never changed)
    finish: Any  # what else the format's finishing carries over the records before (Finish.kept)
    detector: dict[str, Any] | None  # Detector.kept, that record's line read

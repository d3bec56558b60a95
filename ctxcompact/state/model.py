"""The state file's content as typed objects (docs/concepts/state.md#the-state-file), and the updates every
run makes to its compaction history and watermark. The calibration's updates are :mod:`.calibration`; reading,
writing and locking the file is :mod:`.store`; hashing the covered prefix is :mod:`.fingerprint`."""

from __future__ import annotations

import copy
import hashlib
import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, Self, TypeVar

from ..plugins import STRATEGIES
from ..tokens.calibration import FIT_POINTS
from .clock import utc_now

if TYPE_CHECKING:  # (what only a compaction writes: its module is loaded for a state that holds it)
    from .compacted import Compaction, Summary, TokenCache

STATE_VERSION = 2
#: versions this ctxcompact reads (1: before the affine calibration; read as having no model yet)
READABLE_VERSIONS = (1, 2)
#: measured requests the state keeps: as many as the fit uses
MAX_POINTS = FIT_POINTS
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
_NAME = re.compile(r"[a-z][a-z0-9-]*")






def _token_cache(d: dict[str, Any]) -> TokenCache:
    from .compacted import TokenCache

    return TokenCache.from_json(d)


@dataclass(slots=True)
class Fingerprint:
    """The covered prefix: the first ``records`` records are the first ``nbytes`` bytes (JSON key ``bytes``)
    of the input, whose SHA-256 is ``sha256``. ``system_lines`` are ``(offset, length)`` of the system records
    inside that prefix, line endings excluded."""

    records: int = 0
    nbytes: int = 0
    sha256: str = EMPTY_SHA256
    format: str = ""
    tokens: TokenCache | None = None
    system_lines: list[tuple[int, int]] = field(default_factory=list)
    lines: int | None = None  # physical lines of the prefix (blank ones too), for line numbers after it
    #: an append-only log's prefix (``Format.compaction_seen``; None for other formats, and in a state older
    #: than it): every line of it was read as a record its compaction copies as history, none dropped and
    #: no result without its call (``context.copies_history``)
    history: bool | None = None

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"records": self.records, "bytes": self.nbytes}
        if self.lines is not None:
            d["lines"] = self.lines
        d.update({"sha256": self.sha256, "format": self.format})
        if self.tokens is not None:
            d["tokens"] = self.tokens.to_json()
        d["system_lines"] = [[off, n] for off, n in self.system_lines]
        if self.history is not None:  # (only an append-only log's: the other states' bytes as they were)
            d["history"] = self.history
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Fingerprint:
        tokens = d.get("tokens")
        return cls(records=d["records"], nbytes=d["bytes"], sha256=d["sha256"], format=d["format"],
                   tokens=_token_cache(tokens) if tokens is not None else None,
                   system_lines=[(int(off), int(n)) for off, n in d["system_lines"]], lines=d.get("lines"),
                   history=d.get("history"))


@dataclass(slots=True)
class Calibration:
    """What was measured of the requests sent
    (docs/concepts/calibration.md#calibration).

    ``real`` and ``last_estimate`` describe the last request: our estimate of what we wrote and, once
    ``ctxcompact calibrate`` reported it, what the provider billed. ``points`` are the measured requests
    ``(visible, real)`` of this session (the latest :data:`MAX_POINTS`), ``hidden`` and ``slope`` the affine
    model fitted to them; ``factor`` the correction the last single pair measured (clamped to [1, 5])."""

    real: int | None = None
    last_estimate: int | None = None
    estimator: str | None = None
    factor: float | None = None
    updated_at: str | None = None
    hidden: int | None = None
    slope: float | None = None
    points: list[tuple[int, int]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"real": self.real, "last_estimate": self.last_estimate, "estimator": self.estimator,
                "factor": self.factor, "hidden": self.hidden, "slope": self.slope,
                "points": [[v, r] for v, r in self.points], "updated_at": self.updated_at}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Calibration:
        factor, slope = d["factor"], d.get("slope")
        points = [(int(v), int(r)) for v, r in d.get("points") or []]
        if "points" not in d and d["real"] is not None and d["last_estimate"]:
            points = [(d["last_estimate"], d["real"])]  # a version 1 state: its one measured pair
        return cls(real=d["real"], last_estimate=d["last_estimate"], estimator=d["estimator"],
                   factor=float(factor) if factor is not None else None, updated_at=d["updated_at"],
                   hidden=d.get("hidden"), slope=float(slope) if slope is not None else None, points=points)


@dataclass(slots=True)
class InputInfo:
    """The input the state was last used with (informational; the fingerprint is what is checked)."""

    path: str | None = None
    format: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "format": self.format}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> InputInfo:
        return cls(path=d.get("path"), format=d.get("format"))


class Section(Protocol):
    """A strategy's own part of the state, serialised under its own key (docs/DESIGN.md "Adding a
    strategy"): the strategy's module defines it and reads it back with :meth:`State.section`."""

    KEY: ClassVar[str]  # its key in the state file

    def to_json(self) -> Any: ...

    @classmethod
    def from_json(cls, obj: Any) -> Self: ...


S = TypeVar("S", bound=Section)

#: the sections a version 2 state file holds even when empty (schemas/state.schema.json ``required``): every
#: state carries them, so readers of the file keep working; each strategy's entry says whether its own is one
#: (``plugins.Builtin.state_empty``: the sliding window's ``events``)
REQUIRED_SECTIONS: dict[str, Any] = STRATEGIES.required_sections()

#: the state's own keys; every other key but the ``x-`` ones is a strategy's section
CORE_KEYS = ("version", "watermark", "fingerprint", "summary", "calibration", "compactions", "input")


@dataclass(slots=True, eq=False)
class State:
    """The whole state file. ``sections`` holds each strategy's own part by its key: the JSON as read until
    the strategy reads it (:meth:`section`), then its typed object. ``extra`` holds the ``x-…`` keys users or
    tools put there, carried through. Two states are equal when they write the same file."""

    version: int = STATE_VERSION
    watermark: int = 0
    fingerprint: Fingerprint = field(default_factory=Fingerprint)
    summary: Summary | None = None
    calibration: Calibration = field(default_factory=Calibration)
    compactions: list[Compaction] = field(default_factory=list)
    sections: dict[str, Any] = field(default_factory=dict)
    input: InputInfo | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def section(self, kind: type[S]) -> S | None:
        """The part of the state ``kind`` describes (read from its JSON on first use), or None when the state
        has none."""
        value = self.sections.get(kind.KEY)
        if value is None or isinstance(value, kind):
            return value
        typed = kind.from_json(value)
        self.sections[kind.KEY] = typed
        return typed

    def set_section(self, value: Section | None, key: str | None = None) -> None:
        """Store a strategy's part of the state under its key (None removes it)."""
        if value is None:
            if key is not None:
                self.sections.pop(key, None)
            return
        self.sections[key if key is not None else type(value).KEY] = value

    def holds_sections(self) -> bool:
        """Whether any strategy left something of its own here (a section that is neither absent nor
        empty)."""
        return not all(map(_empty, self.sections.values()))

    def holds(self, key: str) -> bool:
        """Whether the section ``key`` is here and not empty."""
        return key in self.sections and not _empty(self.sections[key])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, State) and self.to_json() == other.to_json()

    __hash__ = None  # type: ignore[assignment]  # mutable

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "version": self.version,
            "watermark": self.watermark,
            "fingerprint": self.fingerprint.to_json(),
            "summary": self.summary.to_json() if self.summary is not None else None,
            "calibration": self.calibration.to_json(),
            "compactions": [c.to_json() for c in self.compactions],
        }
        sections = {**REQUIRED_SECTIONS, **self.sections}
        for key in sorted(sections):  # by key: "events", then "masking" (the order of the version 2 file)
            value = _section_json(sections[key])
            if value is not None:
                d[key] = value
        if self.input is not None:
            d["input"] = self.input.to_json()
        for key, value in self.extra.items():
            d[key] = copy.deepcopy(value)
        return d


def _empty(value: Any) -> bool:
    if isinstance(value, (list, dict)) or value is None:  # as read
        return not value
    return _section_json(value) in (None, [], {})


def _section_json(value: Any) -> Any:
    to_json = getattr(value, "to_json", None)
    return to_json() if callable(to_json) else copy.deepcopy(value)


def new_state(format: str, input_path: str | os.PathLike[str] | None = None) -> State:
    """A fresh state for a transcript of ``format``: nothing covered, no calibration."""
    info = InputInfo(path=os.fspath(input_path) if input_path is not None else None, format=format)
    return State(fingerprint=Fingerprint(format=format), input=info)


# ---------------------------------------------------------------------------------------- compactions


def add_compaction(state: State, *, strategy: str, tokens_before: int, tokens_after: int,
                   records_covered: int, watermark: int, summarizer: str | None, fallback: bool = False,
                   duration_s: float = 0.0, tier: str | None = None, time: str | None = None,
                   input_lines: int | None = None) -> Compaction:
    """Append one entry to the compaction history and return it. ``strategy`` is a registry name
    (``ctxcompact.strategies``); the state only checks that it looks like one."""
    from .compacted import Compaction

    if not _NAME.fullmatch(strategy):
        raise ValueError(f"{strategy!r} is not a strategy name")
    entry = Compaction(time=time or utc_now(), strategy=strategy, tokens_before=tokens_before,
                       tokens_after=tokens_after, records_covered=records_covered, watermark=watermark,
                       summarizer=summarizer, fallback=fallback, duration_s=float(duration_s), tier=tier,
                       input_lines=input_lines)
    state.compactions.append(entry)
    return entry


def set_watermark(state: State, fingerprint: Fingerprint, summary: Summary | None) -> None:
    """Move the watermark to ``fingerprint.records`` with the summary that now covers those records.

    Setting all three together keeps the invariant ``watermark == fingerprint.records`` that loading checks.
    """
    state.watermark = fingerprint.records
    state.fingerprint = fingerprint
    state.summary = summary

"""The sliding window's own part of the state (docs/concepts/state.md#the-state-file): its events, oldest
first, under the key ``events``. Only the sliding-window modules read or write it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..state import utc_now


@dataclass(slots=True)
class Event:
    """A sliding-window compaction event (docs/guides/strategies.md#sliding-window): input records ``[start,
    end)`` replaced by ``summary``."""

    start: int
    end: int
    invocations: int
    records: int
    original_tokens: int
    compacted_tokens: int
    ratio: float
    summary: str
    summarizer: str
    fallback: bool = False
    created_at: str = field(default_factory=utc_now)
    start_timestamp: float | str | None = None
    end_timestamp: float | str | None = None
    model: str | None = None
    first_invocation: int | None = None  # 1-based numbers of the invocations covered
    last_invocation: int | None = None
    invocation_ids: list[str] | None = None  # the format's own ids (ADK invocation_id), where it has them

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"start": self.start, "end": self.end}
        if self.start_timestamp is not None:
            d["start_timestamp"] = self.start_timestamp
        if self.end_timestamp is not None:
            d["end_timestamp"] = self.end_timestamp
        d["invocations"] = self.invocations
        if self.first_invocation is not None:
            d["first_invocation"] = self.first_invocation
            d["last_invocation"] = self.last_invocation
        if self.invocation_ids:
            d["invocation_ids"] = list(self.invocation_ids)
        d.update({"records": self.records,
                  "original_tokens": self.original_tokens, "compacted_tokens": self.compacted_tokens,
                  "ratio": self.ratio, "summary": self.summary, "summarizer": self.summarizer})
        if self.model is not None:
            d["model"] = self.model
        d.update({"fallback": self.fallback, "created_at": self.created_at})
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Event:
        first, last = d.get("first_invocation"), d.get("last_invocation")
        return cls(start=int(d["start"]), end=int(d["end"]), invocations=int(d["invocations"]),
                   records=int(d["records"]), original_tokens=int(d["original_tokens"]),
                   compacted_tokens=int(d["compacted_tokens"]), ratio=float(d["ratio"]),
                   summary=d["summary"], summarizer=d["summarizer"], fallback=d["fallback"],
                   created_at=d["created_at"], start_timestamp=d.get("start_timestamp"),
                   end_timestamp=d.get("end_timestamp"), model=d.get("model"),
                   first_invocation=int(first) if first is not None else None,
                   last_invocation=int(last) if last is not None else None,
                   invocation_ids=d.get("invocation_ids"))


@dataclass(slots=True)
class WindowEvents:
    """Every event the sliding window made, oldest first (a later roll-up hides those it contains:
    strategies/ranges.visible_events)."""

    KEY: ClassVar[str] = "events"
    events: list[Event] = field(default_factory=list)

    def to_json(self) -> list[dict[str, Any]]:
        return [e.to_json() for e in self.events]

    @classmethod
    def from_json(cls, obj: Any) -> WindowEvents:
        return cls([Event.from_json(e) for e in obj or []])

    @staticmethod
    def problem(obj: Any) -> str | None:
        """What the schema cannot say of the events as read (state.store checks it on load, after the
        schema)."""
        for i, ev in enumerate(obj):
            if ev["end"] < ev["start"]:
                return f"[{i}]: end {ev['end']} is before start {ev['start']}"
        return None

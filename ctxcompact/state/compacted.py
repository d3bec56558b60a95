"""What a compaction writes into the state (docs/concepts/state.md#the-state-file): the summary, the entry of
the compaction history, the covered prefix's token counts. A state no compaction wrote holds none of them,
so this module is loaded only where one is made or read (:mod:`.model`'s ``add_compaction``, ``Fingerprint``
with counts, :mod:`.store` reading a state that holds them): a run without a state, or below the threshold
before any compaction, makes none of these classes (docs/measurements/performance-log.md, branch `start9`)."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from .clock import utc_now


@dataclass(slots=True)
class TokenCache:
    """Token counts of the covered prefix (``fingerprint.tokens``)."""

    heuristic: int | None = None
    exact: int | None = None
    encoding: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"heuristic": self.heuristic, "exact": self.exact, "encoding": self.encoding}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TokenCache:
        return cls(heuristic=d.get("heuristic"), exact=d.get("exact"), encoding=d.get("encoding"))


@dataclass(slots=True)
class Summary:
    """The current summary: what replaces the first ``watermark`` records, and how it was made."""

    text: str
    summarizer: str
    model: str | None = None
    fallback: bool = False
    fallback_reason: str | None = None
    created_at: str = field(default_factory=utc_now)
    records_covered: int = 0
    latest_request: str | None = None
    facts: dict[str, Any] | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    duration_s: float = 0.0
    continuation: str | None = None  # the continuation text written after it, reused verbatim later
    truncated: bool = False
    check: dict[str, Any] | None = None  # what the check of an LLM summary found and did
    chunks: int = 1  # requests the summary took (more than one when chunked)
    window: int | None = None  # the LLM summarizer's window and where it came from
    window_source: str | None = None
    #: (offset, length) of the input lines whose images and documents the continuation carries (the latest
    #: request's), re-read from the verified prefix by later runs instead of copying the payloads here
    attachment_lines: list[tuple[int, int]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        out = self._to_json()
        if self.attachment_lines:  # only when there are any: a state without attachments stays as it was
            out["attachment_lines"] = [[off, n] for off, n in self.attachment_lines]
        return out

    def _to_json(self) -> dict[str, Any]:
        return {"text": self.text, "summarizer": self.summarizer, "model": self.model,
                "fallback": self.fallback, "fallback_reason": self.fallback_reason,
                "continuation": self.continuation, "truncated": self.truncated,
                "created_at": self.created_at, "records_covered": self.records_covered,
                "latest_request": self.latest_request, "facts": copy.deepcopy(self.facts),
                "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "duration_s": self.duration_s, "check": copy.deepcopy(self.check), "chunks": self.chunks,
                "window": self.window, "window_source": self.window_source}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Summary:
        return cls(text=d["text"], summarizer=d["summarizer"], model=d.get("model"), fallback=d["fallback"],
                   fallback_reason=d.get("fallback_reason"), created_at=d["created_at"],
                   records_covered=d["records_covered"], latest_request=d.get("latest_request"),
                   facts=copy.deepcopy(d.get("facts")), input_tokens=d.get("input_tokens"),
                   output_tokens=d.get("output_tokens"), duration_s=float(d.get("duration_s", 0.0)),
                   continuation=d.get("continuation"), truncated=d.get("truncated", False),
                   check=copy.deepcopy(d.get("check")), chunks=int(d.get("chunks", 1)),
                   window=d.get("window"), window_source=d.get("window_source"),
                   attachment_lines=[(int(off), int(n)) for off, n in d.get("attachment_lines", [])])


@dataclass(slots=True)
class Compaction:
    """One entry of the compaction history."""

    time: str
    strategy: str
    tokens_before: int
    tokens_after: int
    records_covered: int
    watermark: int
    summarizer: str | None
    fallback: bool
    duration_s: float
    tier: str | None = None
    #: physical lines of the input when it was made: usage recorded up to there was billed before it
    #: (tokens.calibration.calibrate_request, ``compacted_at_line``)
    input_lines: int | None = None

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"time": self.time, "strategy": self.strategy,
                             "tokens_before": self.tokens_before, "tokens_after": self.tokens_after,
                             "records_covered": self.records_covered,
                             "watermark": self.watermark, "summarizer": self.summarizer,
                             "fallback": self.fallback, "duration_s": self.duration_s}
        if self.tier is not None:
            d["tier"] = self.tier
        if self.input_lines is not None:
            d["input_lines"] = self.input_lines
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Compaction:
        return cls(time=d["time"], strategy=d["strategy"], tokens_before=d["tokens_before"],
                   tokens_after=d["tokens_after"], records_covered=d["records_covered"],
                   watermark=d["watermark"], summarizer=d["summarizer"], fallback=d["fallback"],
                   duration_s=float(d["duration_s"]), tier=d.get("tier"), input_lines=d.get("input_lines"))

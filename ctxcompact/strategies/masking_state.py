"""Masking's own part of the state (docs/concepts/state.md#the-state-file): every tool result cleared or
trimmed so far with its placeholder, under the key ``masking``. The mask strategy, ``--prune``'s tier and the
trimmed work in flight (strategies/tail.py) write it; mask's ``reapply`` applies it again on every run."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, ClassVar, overload


@dataclass(slots=True)
class MaskedResult:
    """One tool result the mask strategy cleared: later runs put the same placeholder in its place."""

    call_id: str
    placeholder: str
    tool: str | None = None
    index: int = -1  # 0-based input record index, -1 when unknown
    chars: int | None = None
    original_tokens: int | None = None

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"call_id": self.call_id, "tool": self.tool, "placeholder": self.placeholder}
        if self.chars is not None:
            d["chars"] = self.chars
        if self.original_tokens is not None:
            d["original_tokens"] = self.original_tokens
        if self.index >= 0:
            d["index"] = self.index
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> MaskedResult:
        return cls(call_id=d["call_id"], placeholder=str(d.get("placeholder", "")), tool=d.get("tool"),
                   index=_int(d.get("index"), -1), chars=_int(d.get("chars"), None),
                   original_tokens=_int(d.get("original_tokens"), None))


@dataclass(slots=True)
class Masking:
    """Masking's own part of the state (key ``masking``): what it cleared so far (the mask strategy, the
    ``--prune`` tier, the threshold's trimmed tail), applied again by every run.

    ``input_records``: usage recorded on input records before this index measured the unmasked context and
    is ignored; ``thinking_before``: thinking of input records before this index was cleared."""

    KEY: ClassVar[str] = "masking"
    results: list[MaskedResult] = field(default_factory=list)
    input_records: int = 0
    thinking_before: int = 0
    tokens_freed: int = 0
    updated_at: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # keys of other versions, carried through

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = dict(copy.deepcopy(self.extra))
        d["records"] = [r.to_json() for r in self.results]
        d["input_records"] = self.input_records
        if self.thinking_before:
            d["thinking_before"] = self.thinking_before
        d["tokens_freed"] = self.tokens_freed
        d["updated_at"] = self.updated_at
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Masking:
        known = ("records", "input_records", "thinking_before", "tokens_freed", "updated_at")
        results = [MaskedResult.from_json(r) for r in d.get("records") or []
                   if isinstance(r, dict) and isinstance(r.get("call_id"), str)]
        return cls(results=results, input_records=_int(d.get("input_records")),
                   thinking_before=_int(d.get("thinking_before")), tokens_freed=_int(d.get("tokens_freed")),
                   updated_at=d.get("updated_at") if isinstance(d.get("updated_at"), str) else None,
                   extra={k: copy.deepcopy(v) for k, v in d.items() if k not in known})


@overload
def _int(value: Any, default: int = 0) -> int: ...
@overload
def _int(value: Any, default: None) -> int | None: ...
def _int(value: Any, default: int | None = 0) -> int | None:
    """An integer field as written (a whole number written as a float, ``3.0``, is the integer it is)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) else default

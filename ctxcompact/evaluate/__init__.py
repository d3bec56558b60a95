"""`ctxcompact eval`: measure what a compaction keeps, offline and deterministically
(docs/guides/eval.md#what-it-reports). ``core`` scores one compaction, ``replay`` a whole session compacted as
often as its window forces."""

from __future__ import annotations

from .core import evaluate
from .probes import Probe, load_probes

__all__ = ["Probe", "evaluate", "load_probes"]

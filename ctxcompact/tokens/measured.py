"""What the calibration measured: a provider's bill recorded in the transcript (:class:`UsagePoint`) and the
line fitted through such bills (:class:`Affine`).

Their own module so that a call with nothing measured (no usage in the log, no fit in the state: a first
hook call, a run without a state) makes neither class: ~3 M instructions each on Python 3.11
(docs/measurements/performance-log.md, branch start12). The rules that read them are :mod:`.calibration`'s.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Affine:
    """``real ≈ hidden + slope × visible``: the model :func:`.calibration.fit_affine` fits."""

    hidden: int
    slope: float


@dataclass(frozen=True, slots=True)
class UsagePoint:
    """Prompt tokens a provider reported for a request recorded in the transcript: the request saw the
    records before ``position`` (an index into the counts of the context)."""

    position: int
    prompt_tokens: int
    line: int
    source: str

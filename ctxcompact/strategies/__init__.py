"""Compaction strategies behind one small interface.

A strategy looks at the effective context (already cleaned, with the state applied) and its estimate, and
either does nothing (``None``: the transcript passes through) or returns an outcome: the context to write
and a ``commit`` that records in the state what it did. ``commit`` runs only when the run really writes
(never for ``--dry-run``), inside the state lock.

- ``threshold`` (§8, default): over the threshold, summary + continuation; ``--prune`` masks first.
- ``mask`` (§9a): over the threshold, old tool results replaced by placeholders.
- ``sliding-window`` (§9): ADK-style compaction events every θ invocations or over ρ × window.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..budget import Budget
    from ..model import Transcript
    from ..options import Options
    from ..pipeline import Context, Counts, EstimateReport, InputData, RunResult, Warn
    from ..state import State

STRATEGIES = ("threshold", "mask", "sliding-window")


@dataclass(slots=True)
class StrategyInput:
    ctx: Context  # the effective context and what was learnt building it
    opts: Options
    budget: Budget
    state: State | None  # as loaded (read it; change it only in commit)
    report: EstimateReport  # counts, calibration and the threshold decision
    warn: Warn


class StrategyOutcome(Protocol):
    transcript: Transcript  # what to write
    compacted: bool  # something was summarized or masked

    def commit(
        self, state: State, inp: InputData, ctx: Context, result: RunResult, out_counts: Counts
    ) -> None:
        """Record what was done in the state (watermark, summary, events, masking, history)."""


def apply_strategy(si: StrategyInput) -> StrategyOutcome | None:
    name = si.opts.strategy
    if name == "threshold":
        from .threshold import apply

        return apply(si)
    if name == "mask":
        from .mask import apply as apply_mask

        return apply_mask(si)
    if name == "sliding-window":
        from .sliding_window import apply as apply_window

        return apply_window(si)
    from ..errors import UsageError

    raise UsageError(f"unknown strategy {name!r}; known: {', '.join(STRATEGIES)}")


def describe_strategy(si: StrategyInput) -> dict[str, Any]:
    """Extra keys for `estimate --json`: what the strategy would do (e.g. the next event's range)."""
    name = si.opts.strategy
    if name == "sliding-window":
        from .sliding_window import describe

        return describe(si)
    if name == "mask" or si.opts.prune:
        from .mask import describe as describe_mask

        return describe_mask(si)
    return {}

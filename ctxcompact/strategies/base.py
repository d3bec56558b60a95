"""The one interface of a compaction strategy (docs/DESIGN.md, "Adding a strategy").

A strategy looks at the effective context (cleaned, with the state applied) and its estimate, and either
does nothing (``apply`` returns None: the transcript passes through) or returns an :class:`Outcome`: the
context to write and a ``commit`` that records in the state what it did. ``commit`` runs only when the run
really writes (never for ``--dry-run``), inside the state lock.

A strategy that leaves something in the state which later runs must apply again (sliding-window events,
masked results) does that in ``reapply``; every strategy's ``reapply`` runs on every context, whatever
strategy the current run uses, in the order of ``state_layer``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..budget import Budget
from ..context import Context
from ..errors import ExitCode
from ..model import Record, Transcript
from ..options import Options
from ..report import EstimateReport
from ..state import HashedFile, State
from ..tokens.counts import Counts, count_records

if TYPE_CHECKING:
    from ..summarizers.base import SummaryResult
    from .conversation import Conversation

Warn = Callable[[str], None]


@dataclass(slots=True)
class StrategyInput:
    ctx: Context  # the effective context and what was learnt building it
    opts: Options
    budget: Budget
    state: State | None  # as loaded (read it; change it only in commit)
    report: EstimateReport  # counts, calibration and the threshold decision
    warn: Warn
    #: the run's counter, bound to its count cache: records it has counted are not counted again
    counter: Callable[[list[Record]], Counts] | None = None
    #: the context read record by record (strategies.conversation), when the run streams: ``ctx`` then
    #: holds no records
    conversation: Conversation | None = None

    def count(self, records: list[Record]) -> Counts:
        """Each record's tokens with the run's estimator (``tokens.counts.count_records``)."""
        return self.counter(records) if self.counter is not None else count_records(records, self.opts)

    def tokens(self, records: list[Record]) -> int:
        """The tokens of ``records`` the run judges its result with (before the calibration's projection)."""
        return sum(self.count(records).base)


@dataclass(slots=True)
class Written:
    """What a run is about to write, for a strategy's commit to record."""

    ctx: Context
    data: bytes | Path | HashedFile  # the input as read (for fingerprints), or the file a streamed run read
    tokens_before: int
    tokens_after: int
    counts: Counts  # of the context written


def _nothing(state: State, written: Written) -> None:
    return None


@dataclass(slots=True)
class Outcome:
    """What a strategy did. ``commit`` records in the state what later runs need (closing over whatever the
    strategy needs); the engine adds the compaction history entry from the fields here."""

    strategy: str
    transcript: Transcript  # what to write
    compacted: bool = True  # something was summarized or masked
    commit: Callable[[State, Written], None] = _nothing
    summary: SummaryResult | None = None  # the summary made (the last one, for several events)
    tier: str | None = None  # "mask" or "summary" under --prune; "mask" for --strategy mask
    masked: int = 0  # tool results masked by this run
    covered: int = 0  # what the history says it covered: input records summarized, or results masked
    fallback: bool = False  # an LLM summarizer failed and the extractive summary stood in
    duration_s: float = 0.0  # time spent summarizing or masking
    tokens_after: int | None = None  # the strategy's own calibrated judgement of its result, if any
    exit_code: ExitCode = ExitCode.OK  # DOES_NOT_FIT when the strategy knows its result cannot fit
    warnings: list[str] = field(default_factory=list)  # reported with the run's warnings

    @property
    def warning(self) -> str | None:
        return self.warnings[0] if self.warnings else None


class Strategy(Protocol):
    """A compaction strategy: one module and its registry entry (``plugins.STRATEGIES``, which declares its
    options). Optional attributes: ``options`` (its :class:`ctxcompact.plugins.Option` declarations, for a
    strategy registered at run time; a built-in's are in its registry entry), ``reapply_each(state,
    fmt_name)`` (:meth:`reapply` a record at a time, ``Record -> Record | None`` or ``-> list[Record]`` when
    a record gives several, with an ``end()`` giving what follows the last one, so a reading that does not
    hold the records applies it; without it a state holding its section is read held) and ``state_section``
    (the class of its own part of the state, a :class:`ctxcompact.state.Section`: ``KEY``, ``to_json``,
    ``from_json``, and optionally ``problem(value) -> str | None``, checked on load: a problem in a part of
    the section starts with that part's path, ``[1]: ...``), ``traits`` (for one registered at run time: the
    ``plugins`` traits it declares, which the routing reads instead of its name: ``plugins.ESTIMATE_STREAMS``:
    its ``describe`` needs only the counts; ``plugins.COMPACTS_STREAMED``: its ``apply`` also compacts given
    ``StrategyInput.conversation`` instead of the context's records; ``plugins.RUN_GATHERS``: it has
    ``gathering(state)`` (pass 1's gatherer) and ``quiet(counted, opts, state)`` (its report keys when nothing
    is due, else None))."""

    #: the name ``--strategy`` takes and the state's history records
    name: str
    #: order in which ``reapply`` runs across strategies (lower first); 0 when it keeps nothing in the state
    state_layer: int

    def reapply(self, records: list[Record], state: State, fmt_name: str) -> list[Record]:
        """Apply again what earlier runs of this strategy left in the state; return the records unchanged
        (the same list) when there is nothing of it."""

    def describe(self, si: StrategyInput) -> dict[str, Any]:
        """Extra keys for ``estimate --json``: what the strategy would do now. Two keys are the report's own
        instead, taken out of them (``pipeline.describe``): ``would_compact`` (a strategy that decides by its
        own rule says whether ``run`` would act) and ``projected_tokens_after`` (what its output would count,
        when that is not a summary's projection: mask's tier)."""

    def apply(self, si: StrategyInput) -> Outcome | None:
        """Compact (or mask) the context, or None to pass it through."""


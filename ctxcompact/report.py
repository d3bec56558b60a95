"""What ``estimate`` reports (docs/reference/cli.md#ctxcompact-estimate-file): the context's shape, its
tokens, the calibration, the budget and the decision. One builder serves the full path and the streaming fast
path, so both give the same report for the same input.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .budget import Budget
from .facts.text import continuation_text
from .model import Origin, Record, Role, message_chars
from .plugins import STRATEGIES
from .tokens import heuristic
from .tokens.calibration import Calibrated

#: how long a latest request the projection assumes the continuation quotes (chars)
_PROJECTED_REQUEST_CHARS = 400
#: the smallest useful summary (the marker, a heading, a line or two), in estimated tokens
MIN_SUMMARY_TOKENS = 100


@dataclass(slots=True)
class ContextStats:
    """The shape of a context: what ``estimate`` counts besides tokens."""

    format: str
    records: int  # input records (the whole input, covered prefix included)
    covered: int  # input records replaced by the state's summary
    messages: dict[str, int] = field(default_factory=dict)  # by role, in order of first appearance
    tool_calls: int = 0
    chars: int = 0
    repairs: int = 0
    from_input: int = 0  # records of the context that are the input's own (``Origin.INPUT``)


def context_stats(records: list[Record], format: str, input_records: int, covered: int,
                  repairs: int) -> ContextStats:
    # (per record: called on every part a stream counts; the tallies are kept in locals and the roles by
    # their member, whose ``.value`` is a Python-level property on Python 3.11)
    roles: dict[Role, int] = {}
    from_input = tool_calls = chars = 0
    for rec in records:
        from_input += rec.origin is Origin.INPUT
        msg = rec.message
        if msg is None:
            continue
        roles[msg.role] = roles.get(msg.role, 0) + 1
        tool_calls += len(msg.tool_calls())
        chars += message_chars(msg)
    return ContextStats(format=format, records=input_records, covered=covered,
                        messages={role.value: n for role, n in roles.items()}, tool_calls=tool_calls,
                        chars=chars, repairs=repairs, from_input=from_input)


def projected_after_compaction(system_tokens: int, calibrated: Calibrated,
                               summary_tokens: int) -> int:
    """What a summary compaction leaves, in the provider's tokens: the system records, a summary of
    ``summary_tokens`` and the continuation, with the hidden part of every request
    (``Calibrated.project``)."""
    cont = heuristic.text_tokens(continuation_text("x" * _PROJECTED_REQUEST_CHARS))
    return calibrated.project(system_tokens + summary_tokens + cont)


def decide(tokens: int, smallest_after: int, budget: Budget) -> tuple[bool, bool]:
    """The one compaction decision ``estimate`` reports and ``run`` follows: (over the threshold, compact).

    A summary is made when the context reaches the threshold and even the smallest compaction
    (``smallest_after``: what no summary can shrink, the hidden part and the system records, plus the
    smallest summary) would make it smaller and fit the window. When it would not, summarizing would only
    lose the conversation's detail: the context passes through (exit 5 when it does not fit the window)."""
    over = budget.would_compact(tokens)
    return over, over and smallest_after < tokens and smallest_after <= budget.window


@dataclass(slots=True)
class EstimateReport:
    """What ``estimate`` reports (and ``run`` with it): the records, the counts, the budget, the verdict."""

    format: str
    records: int
    covered: int
    messages: dict[str, int]
    tool_calls: int
    chars: int
    heuristic: int
    exact: int | None
    encoding: str | None
    calibrated: Calibrated
    budget: Budget
    would_compact: bool
    projected_tokens_after: int
    repairs: int
    state_path: str | None
    strategy: str = STRATEGIES.default
    over_threshold: bool = False
    #: records of the context that are the input's own (``Origin.INPUT``): what a run that passes the
    #: context through keeps of the input, known without its records (``run --json``'s ``kept``)
    from_input: int = 0
    own: dict[str, Any] = field(default_factory=dict)  # the strategy's own keys (Strategy.describe)
    #: more keys, worked out only when read (:attr:`extras`, ``to_json``): what ``--prune`` would free costs a
    #: pass over the whole context, which a ``run`` that reports nothing never needs (pipeline.describe)
    later: Callable[[], dict[str, Any]] | None = field(default=None, repr=False, compare=False)

    @property
    def extras(self) -> dict[str, Any]:
        """The strategy's own keys for ``estimate --json``, the deferred ones worked out on first read."""
        if self.later is not None:
            later, self.later = self.later, None
            self.own.update(later())
        return self.own

    @extras.setter
    def extras(self, value: dict[str, Any]) -> None:
        self.own, self.later = value, None

    @property
    def percent_used(self) -> float:
        return round(100.0 * self.calibrated.tokens / self.budget.window, 1) if self.budget.window else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "records": self.records,
            "covered_by_summary": self.covered,
            "messages": self.messages,
            "tool_calls": self.tool_calls,
            "chars": self.chars,
            "tokens": {
                "heuristic": self.heuristic,
                "exact": self.exact,
                "calibrated": self.calibrated.tokens,
                "encoding": self.encoding,
            },
            "correction": {
                "factor": round(self.calibrated.factor, 4),
                "source": self.calibrated.source,
                "real": self.calibrated.real,
                "hidden": self.calibrated.hidden,
                "slope": round(self.calibrated.slope, 4) if self.calibrated.slope is not None else None,
                "points": self.calibrated.points,
            },
            "window": self.budget.window,
            "window_source": self.budget.window_source,
            "buffer": self.budget.buffer,
            "threshold": self.budget.threshold,
            "summary_budget": self.budget.summary_budget,
            "percent_used": self.percent_used,
            "over_threshold": self.over_threshold,
            "would_compact": self.would_compact,
            "projected_tokens_after": self.projected_tokens_after,
            "repairs": self.repairs,
            "state": self.state_path,
            "strategy": self.strategy,
            **self.extras,
        }


def make_report(stats: ContextStats, *, heuristic_total: int, exact_total: int | None, encoding: str | None,
                calibrated: Calibrated, budget: Budget, system_tokens: int, state_path: str | None,
                strategy: str) -> EstimateReport:
    """The report for a counted, calibrated context: the decision (:func:`decide`) and, over the threshold,
    the projected size after a summary."""
    smallest = projected_after_compaction(system_tokens, calibrated, MIN_SUMMARY_TOKENS)
    over, would = decide(calibrated.tokens, smallest, budget)
    projected = calibrated.tokens
    if would:  # at most a summary of its full budget, and never more than now (run keeps the smaller)
        full = projected_after_compaction(system_tokens, calibrated, budget.summary_budget)
        projected = min(projected, full)
    return EstimateReport(
        format=stats.format, records=stats.records, covered=stats.covered, messages=stats.messages,
        tool_calls=stats.tool_calls, chars=stats.chars, heuristic=heuristic_total, exact=exact_total,
        encoding=encoding, calibrated=calibrated, budget=budget, would_compact=would,
        projected_tokens_after=projected, repairs=stats.repairs, state_path=state_path, strategy=strategy,
        over_threshold=over, from_input=stats.from_input)

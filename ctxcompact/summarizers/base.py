"""The interface every summarizer implements (extractive, anthropic, openai).

A summarizer gets the records to summarize (the conversation since the last summary, already cleaned), the
previous summary to carry forward, and a budget in tokens, and returns the summary text. LLM summarizers
that fail raise :class:`~ctxcompact.errors.SummarizerError`; the pipeline then falls back to extractive.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..facts.todos import Todo
from ..model import Record

if TYPE_CHECKING:
    from ..facts.gather import FactFeed  # loaded only by a compaction


@dataclass(slots=True)
class SummaryRequest:
    #: what to summarize, oldest first (message records; others may be present): a list, or records read
    #: again from the file at each iteration (a streamed run: ``strategies.conversation.Summarized``), so a
    #: summarizer iterates them as often as it needs and holds no more of them than it must
    records: Iterable[Record]
    budget_tokens: int  # the summary must fit this (buffer x 0.5), in the window's tokens as ``cost`` counts
    prior_summary: str | None = None  # the previous compaction's summary text, carried forward
    prior_facts: dict[str, Any] | None = None  # structured facts of the previous extractive summary
    latest_request: str | None = None  # the last thing a person typed (None if not found)
    todos: list[Todo] = field(default_factory=list)  # open todo items (from todo tools or --todos)
    instructions: str | None = None  # the user's focus for this summary (--instructions)
    #: what a text costs in the window's tokens (tokens.counts.text_cost: the run's counter and calibration);
    #: None: chars/4 (a library caller that gives no counter)
    cost: Callable[[str], int] | None = None
    #: the latest request is quoted verbatim in the message written after the summary: the summary names it
    #: once, shortly, instead of quoting it a second time
    latest_in_continuation: bool = False
    #: the assistant's answer to the latest request, quoted in the message written after the summary (the
    #: request was answered): the summary does not repeat it under its findings
    answer_in_continuation: str | None = None
    #: the project instruction files the client that resumes the output sends itself
    #: (``Format.client_files``): their rules are not quoted (``facts.rules.sent_by_client``)
    client_files: tuple[str, ...] = ()
    #: the facts of the records to summarize, read as they came (a streamed run; a held run's are gathered
    #: from ``records``)
    feed: FactFeed | None = None


@dataclass(slots=True)
class SummaryResult:
    text: str
    summarizer: str  # "extractive", "anthropic", "openai"
    model: str | None = None
    fallback: bool = False  # True when an LLM summarizer failed and extractive stood in
    fallback_reason: str | None = None
    facts: dict[str, Any] | None = None  # structured facts, kept in the state for the next compaction
    input_tokens: int | None = None  # as the provider reported
    output_tokens: int | None = None
    duration_s: float = 0.0
    truncated: bool = False  # the text came back over budget and was cut to fit
    check: dict[str, Any] | None = None  # what the check of an LLM summary found and did (summarizers.check)
    chunks: int = 1  # requests the summary took: more than one when the input did not fit the summarizer
    window: int | None = None  # the LLM summarizer's own window the requests were fitted to
    # where that window came from (docs/guides/local-models.md#the-summarizers-window)
    window_source: str | None = None


#: what each request sent in this run was answered (a SummaryResult or the exception, with the seconds it
#: took), by the request, and the window each summarizer's server reported: a run whose streamed compaction
#: the held route takes over (``route_file.run_file``: Unstreamable after the strategy ran) asks the
#: provider once for each, as the held route alone does, and reports the time the replies took
REPLIES: ContextVar[dict[tuple[Any, ...], Any] | None] = ContextVar("replies", default=None)


@contextmanager
def replies_kept() -> Iterator[None]:
    """Within it, a request sent again is answered as it was the first time (:data:`REPLIES`)."""
    token = REPLIES.set({})
    try:
        yield
    finally:
        REPLIES.reset(token)


class Summarizer(abc.ABC):
    name: str = ""

    @abc.abstractmethod
    def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Summarize ``request.records``. Raise SummarizerError on failure."""

    def secrets(self) -> list[str]:
        """Strings that must never be written (API keys): redacted from every summary this summarizer
        returns before it is stored or written. The offline summarizers have none."""
        return []

    def check(self) -> None:
        """Fail before any work when this summarizer cannot possibly run (a missing key or model): a
        UsageError, or a SummarizerError that the caller reports as a configuration error. The offline
        summarizer always can."""
        return None


#: marks a summary cut to its budget, so a reader knows the end is missing
CUT_MARK = "\n[… summary cut to fit its budget]"


def chars_cost(text: str) -> int:
    """ceil(chars / 4): the cost of a text when no counter is given."""
    return math.ceil(len(text) / 4)


def fit_summary(text: str, budget_tokens: int,
                cost: Callable[[str], int] | None = None) -> tuple[str, bool]:
    """``text`` cut to ``budget_tokens`` as ``cost`` counts (the window's counter and calibration,
    tokens.counts.text_cost; chars/4 without one), at a line break when one is near, with :data:`CUT_MARK`
    at the end. Returns the text and whether it was cut. The one cutter of every summary: an LLM's reply
    (servers that ignore max tokens, tokenizers that count fewer tokens than ours), the extractive summary's
    last resort, and the final text a strategy writes."""
    cost = cost or chars_cost
    text = text.strip()
    budget = max(0, budget_tokens)
    if cost(text) <= budget:
        return text, False
    # the longest prefix whose cut text fits: cost grows with the prefix, so a binary search finds it
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if cost(_cut_at(text, mid)) <= budget:
            lo = mid
        else:
            hi = mid - 1
    if lo == 0 or cost(_cut_at(text, lo)) > budget:
        return "", True  # not even the mark fits
    return _cut_at(text, lo), True


def _cut_at(text: str, keep: int) -> str:
    cut = text[:keep]
    nl = cut.rfind("\n")
    if nl >= keep * 0.8:  # prefer ending on a whole line unless that loses much
        cut = cut[:nl]
    return cut.rstrip() + CUT_MARK

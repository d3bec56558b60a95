"""The interface every summarizer implements (extractive, anthropic, openai).

A summarizer gets the records to summarize (the conversation since the last summary, already cleaned), the
previous summary to carry forward, and a budget in tokens, and returns the summary text. LLM summarizers
that fail raise :class:`~ctxcompact.errors.SummarizerError`; the pipeline then falls back to extractive.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any

from ..facts.todos import Todo
from ..model import Record


@dataclass(slots=True)
class SummaryRequest:
    records: list[Record]  # what to summarize, oldest first (message records; others may be present)
    budget_tokens: int  # the summary must fit this (buffer x 0.5)
    prior_summary: str | None = None  # the previous compaction's summary text, carried forward
    prior_facts: dict[str, Any] | None = None  # structured facts of the previous extractive summary
    latest_request: str | None = None  # the last thing a person typed (None if not found)
    todos: list[Todo] = field(default_factory=list)  # open todo items (from todo tools or --todos)
    instructions: str | None = None  # the user's focus for this summary (--instructions)


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


class Summarizer(abc.ABC):
    name: str = ""

    @abc.abstractmethod
    def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Summarize ``request.records``. Raise SummarizerError on failure."""


class ProviderSummarizer(Summarizer):
    """What the LLM summarizers share: their options, and a repr that never shows the key."""

    default_context_window: int = 200_000

    def __init__(
        self,
        *,
        model: str | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        context_window: int | None = None,
        instructions: str | None = None,
    ) -> None:
        self.model = model
        self._explicit_key = api_key
        self.base_url = base_url
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        # the summarizer's own window: its input must fit 80 % of it (§6)
        self.context_window = int(context_window or self.default_context_window)
        self.instructions = instructions
        self.last_stats: Any = None  # prompt.PromptStats of the last request (what was dropped and cut)

    def __repr__(self) -> str:  # never show the key
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

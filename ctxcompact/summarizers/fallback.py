"""The one way a strategy gets a summary: ask the chosen summarizer, check an LLM's summary against the facts
extracted from the transcript (pinning what it left out), fall back to the extractive summary when it fails
or is unusable (unless ``--no-fallback``), mark the text as ours and cut it to its budget
(docs/concepts/summary.md#llm-summarizers)."""

from __future__ import annotations

import time
from collections.abc import Callable

from ..errors import SummarizerError
from ..facts.text import SUMMARY_MARKER
from ..options import Options
from ..plugins import EXTRACTS, FALLBACK_SUMMARIZER, SUMMARIZERS
from ..secrets import scrub_credentials, scrub_json
from . import get_summarizer, summarizer_for
from .base import SummaryRequest, SummaryResult, chars_cost, fit_summary
from .check import SummaryCheck, check_summary
from .extractive import extract_facts
from .provider import redact_result


class SummaryRejected(SummarizerError):
    """An LLM's summary failed the check (empty, no section, off-topic)."""

    def __init__(self, message: str, check: SummaryCheck, rejected: SummaryResult) -> None:
        super().__init__(message)
        self.check = check
        self.rejected = rejected  # the model's result: its usage was spent even though its text is not used


def summarize(request: SummaryRequest, opts: Options, warn: Callable[[str], None]) -> SummaryResult:
    """The summary of ``request`` by ``opts.summarizer``; on failure the extractive summary with
    ``fallback`` set and the reason kept, or SummarizerError (exit 4) with ``--no-fallback``. An LLM's
    summary is checked first (:func:`checked`). The text starts with the summary marker (so later runs
    recognise it) and fits ``request.budget_tokens``."""
    started = time.monotonic()
    summarizer = summarizer_for(opts)
    try:
        summary = summarizer.summarize(request)
        if not SUMMARIZERS.has(summary.summarizer, EXTRACTS):  # (a summary that is the facts needs no check)
            summary = checked(summary, request)
    except SummarizerError as exc:
        if opts.no_fallback:
            raise
        warn(f"the {opts.summarizer} summarizer failed ({exc}); using the extractive summary instead")
        summary = get_summarizer(FALLBACK_SUMMARIZER).summarize(request)
        summary.fallback = True
        summary.fallback_reason = str(exc)
        if isinstance(exc, SummaryRejected):
            summary.check = exc.check.to_json()
            # what the model was billed for stays on record
            summary.input_tokens = exc.rejected.input_tokens
            summary.output_tokens = exc.rejected.output_tokens
            summary.chunks = exc.rejected.chunks
            summary.window, summary.window_source = exc.rejected.window, exc.rejected.window_source
    secrets = getattr(summarizer, "secrets", None)  # a summarizer registered at run time may not have it
    summary = redact_result(summary, secrets() if callable(secrets) else [])
    # what ctxcompact composes never quotes a credential the transcript holds: the summary, and the facts
    # the state keeps for the next compaction
    summary.text = scrub_credentials(summary.text)
    summary.facts = scrub_json(summary.facts) if summary.facts is not None else None
    if summary.fallback_reason is not None:
        summary.fallback_reason = scrub_credentials(summary.fallback_reason)
    summary.duration_s = round(time.monotonic() - started, 3)
    text = summary.text.strip()
    if not text.startswith(SUMMARY_MARKER):
        text = f"{SUMMARY_MARKER}\n{text}"
    text, cut = fit_summary(text, request.budget_tokens, request.cost)
    summary.text = text
    summary.truncated = summary.truncated or cut
    return summary


def checked(summary: SummaryResult, request: SummaryRequest) -> SummaryResult:
    """``summary`` after the check: unchanged when it passed, with the pinned-facts block appended (the
    model's text cut to leave room for it) when facts were missing. Raises :class:`SummaryRejected` when
    it is unusable. The facts go with the result into the state, so later checks know the earlier rules."""
    facts = extract_facts(request)
    body = summary.text.strip()
    if body.startswith(SUMMARY_MARKER):
        body = body[len(SUMMARY_MARKER):].strip()
    check, block = check_summary(body, facts, request.records, request.budget_tokens)
    if check.verdict == "rejected":
        raise SummaryRejected(f"{summary.summarizer}: the summary failed the check: {check.reason}", check,
                              summary)
    if block is not None:
        cost = request.cost or chars_cost
        room = request.budget_tokens - cost(f"{SUMMARY_MARKER}\n\n\n{block}")
        body, cut = fit_summary(body, max(0, room), cost)
        summary.truncated = summary.truncated or cut
        summary.text = f"{SUMMARY_MARKER}\n{body}\n\n{block}"
    summary.check = check.to_json()
    summary.facts = facts
    return summary

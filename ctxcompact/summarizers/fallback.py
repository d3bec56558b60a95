"""The one way a strategy gets a summary: ask the chosen summarizer, fall back to the extractive summary when
it fails (unless ``--no-fallback``), mark the text as ours and cut it to its budget (README "LLM summarizers
and provider token counts")."""

from __future__ import annotations

import time
from collections.abc import Callable

from ..errors import SummarizerError
from ..facts.text import SUMMARY_MARKER
from ..options import Options
from . import get_summarizer, summarizer_for
from .base import SummaryRequest, SummaryResult, fit_summary


def summarize(request: SummaryRequest, opts: Options, warn: Callable[[str], None]) -> SummaryResult:
    """The summary of ``request`` by ``opts.summarizer``; on failure the extractive summary with
    ``fallback`` set and the reason kept, or SummarizerError (exit 4) with ``--no-fallback``. The text
    starts with the summary marker (so later runs recognise it) and fits ``request.budget_tokens``."""
    started = time.monotonic()
    try:
        summary = summarizer_for(opts).summarize(request)
    except SummarizerError as exc:
        if opts.no_fallback:
            raise
        warn(f"the {opts.summarizer} summarizer failed ({exc}); using the extractive summary instead")
        summary = get_summarizer("extractive").summarize(request)
        summary.fallback = True
        summary.fallback_reason = str(exc)
    summary.duration_s = round(time.monotonic() - started, 3)
    text = summary.text.strip()
    if not text.startswith(SUMMARY_MARKER):
        text = f"{SUMMARY_MARKER}\n{text}"
    text, cut = fit_summary(text, request.budget_tokens)
    summary.text = text
    summary.truncated = summary.truncated or cut
    return summary

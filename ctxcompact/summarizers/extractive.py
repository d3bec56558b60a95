"""The offline, deterministic summarizer (docs/concepts/summary.md#llm-summarizers): a structured summary
built from the transcript itself (docs/concepts/summary.md).

Anchored and incremental: the facts of each summary (:class:`~ctxcompact.facts.store.Facts`) are returned
in ``SummaryResult.facts`` (their JSON form, which the state keeps) and merged with the facts of the next
records (:func:`~ctxcompact.facts.store.merge`), so rules, goals, files, errors, findings and todos survive
any number of compactions even though each run sees only the new records. What drops out of the store drops
by its stated rule (:mod:`ctxcompact.facts.store`); what the text leaves out when the budget is short, by
the order of :mod:`.layout`.

The text fits ``budget_tokens`` as ``SummaryRequest.cost`` counts (the window's counter and calibration;
chars/4 when no counter is given). Rules and the latest request go last, by a hard cut that sets
``truncated``.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from ..facts import SUMMARY_MARKER
from ..facts.earlier import MAX_EARLIER_CHARS
from ..facts.gather import gather
from ..facts.rules import sent_by_client
from ..facts.store import FACTS_VERSION, Facts, merge
from .base import Summarizer, SummaryRequest, SummaryResult
from .layout import EXTRACTED_NOTE, EXTRACTED_NOTE_SHORT, render_facts

__all__ = ["EXTRACTED_NOTE", "FACTS_VERSION", "ExtractiveSummarizer", "extract_facts", "facts_of"]


def facts_of(request: SummaryRequest) -> Facts:
    """The fact store after ``request``: the prior facts (from the state) merged with what its records
    say. The one extraction behind the extractive summary and the check of an LLM summary
    (``summarizers.check``)."""
    if request.feed is not None:  # the records were read as they came (facts.gather.FactFeed)
        new = request.feed.facts(request.latest_request, request.todos or None, request.prior_summary)
    else:
        new = gather(request.records, request.latest_request, request.todos or None, request.prior_summary)
    return merge(Facts.from_json(request.prior_facts), new)


def extract_facts(request: SummaryRequest) -> dict[str, Any]:
    """:func:`facts_of` in its JSON form (what ``SummaryResult.facts`` and the state carry)."""
    return facts_of(request).to_json()


class ExtractiveSummarizer(Summarizer):
    """Offline and deterministic: the same request always gives the same text."""

    name = "extractive"

    def __init__(self, **options: Any) -> None:
        # Options meant for LLM summarizers (model, base_url, …) do not apply; accepted so callers can pass
        # one option set to whichever summarizer they build.
        self.options = options

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        start = time.monotonic()
        earlier = None
        if request.prior_summary and request.prior_summary.strip():
            # an LLM's summary is carried forward as text (its facts are merged too); an extractive
            # summary is not, its facts say everything it said
            body = _strip_marker(request.prior_summary)
            if request.prior_facts is None or (body and not body.startswith((EXTRACTED_NOTE,
                                                                             EXTRACTED_NOTE_SHORT))):
                earlier = body
        facts = facts_of(request)
        # earlier summaries (kept by an earlier compaction, found in the records, an LLM's prior summary) stay
        # in the facts, so every later compaction carries them (docs/concepts/handoff.md)
        if earlier and not (facts.earlier and earlier in facts.earlier):
            carried = "\n\n".join(t for t in (facts.earlier, earlier) if t)
            facts = replace(facts, earlier=carried[-MAX_EARLIER_CHARS:])
        # (the state keeps every fact: only the text leaves out what the client sends itself)
        shown = replace(facts, instructions=tuple(t for t in facts.instructions
                                                  if not sent_by_client(t, request.client_files)))
        text, truncated = render_facts(shown, request.budget_tokens, facts.earlier, request.cost,
                                       request.latest_in_continuation, request.answer_in_continuation)
        return SummaryResult(text=text, summarizer=self.name, facts=facts.to_json(), truncated=truncated,
                             duration_s=time.monotonic() - start)


def _strip_marker(text: str) -> str | None:
    lines = text.strip().splitlines()
    if lines and lines[0].strip() == SUMMARY_MARKER:
        lines = lines[1:]
    body = "\n".join(lines).strip()
    return body or None


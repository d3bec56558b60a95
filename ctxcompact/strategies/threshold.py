"""Strategy ``threshold`` (§8), the default: over the threshold, summarize everything since the last
summary and write ``[system messages, verbatim] + [summary] + [continuation]``.

Nothing of the old conversation is kept verbatim: a kept "recent tail" can hold one giant tool result and
never shrink (the original design measured exactly that failure), so the output is always the system
prompt plus two short messages, far below the threshold.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import SummarizerError
from ..model import Origin, Record, Role, Transcript
from ..summarizers.base import SummaryRequest, SummaryResult

if TYPE_CHECKING:
    from ..budget import Budget
    from ..options import Options
    from ..pipeline import Context, Counts, InputData, RunResult, Warn
    from ..state import State
    from . import StrategyInput
    from .mask import MaskOutcome

# Marks a summary cut to its budget, so a reader knows the end is missing.
CUT_MARK = "\n[… summary cut to fit its token budget]"


@dataclass(slots=True)
class Outcome:
    transcript: Transcript
    summary: SummaryResult
    continuation: str
    latest_request: str | None
    records_covered: int
    compacted: bool = True
    tier: str | None = None  # "summary" when --prune masked first and it was not enough

    def commit(
        self, state: State, inp: InputData, ctx: Context, result: RunResult, out_counts: Counts
    ) -> None:
        """Move the watermark over every input record, keep the summary, reset the calibration."""
        import hashlib

        from ..state import Fingerprint, TokenCache, reset_calibration

        state.watermark = ctx.input_records
        state.fingerprint = Fingerprint(
            records=ctx.input_records,
            nbytes=ctx.input_bytes,
            lines=ctx.input_lines,
            sha256=hashlib.sha256(inp.data).hexdigest(),
            format=ctx.input_format,
            system_lines=list(ctx.system_spans),
            # what replaces the covered prefix (system + summary + continuation) costs this much
            tokens=TokenCache(
                heuristic=sum(out_counts.heuristic),
                exact=sum(out_counts.exact) if out_counts.exact is not None else None,
                encoding=out_counts.encoding,
            ),
        )
        state.masking = None  # every masked record is now inside the summary
        record_compaction(state, ctx, result, self)
        # the factor measured on the large pre-compaction request must not scale the small one (§5)
        reset_calibration(state)


def apply(si: StrategyInput) -> Outcome | MaskOutcome | None:
    """Compact when the estimate reaches the threshold; otherwise pass the context through.

    With ``--prune`` the first tier is masking (strategies/mask.py): when the masked context is under the
    threshold that is the outcome (tier ``mask``); otherwise the masked context is summarized (tier
    ``summary``)."""
    if not si.report.would_compact:
        return None
    from ..progress import progress

    ctx = si.ctx
    if si.opts.prune:
        from .mask import masked_context, try_mask

        masked = try_mask(si, "threshold")
        if masked.compacted and masked.exit_code == 0:
            return masked
        if masked.compacted:
            ctx = masked_context(si.ctx, masked.transcript)
    with progress(f"summarizing with {si.opts.summarizer}"):
        outcome = compact(ctx, si.opts, si.budget, si.state, si.warn)
    if si.opts.prune:
        outcome.tier = "summary"
    return outcome


def split_context(records: list[Record]) -> tuple[list[Record], list[Record]]:
    """The input's system records (kept verbatim) and the conversation to summarize.

    Summaries and continuations written by an earlier compaction are left out of the conversation: the
    earlier summary reaches the summarizer as prior context instead."""
    system: list[Record] = []
    body: list[Record] = []
    for rec in records:
        if rec.origin in (Origin.SUMMARY, Origin.CONTINUATION):
            continue
        if rec.message is not None and rec.message.role is Role.SYSTEM:
            system.append(rec)
        else:
            body.append(rec)
    return system, body


def fit_to_budget(text: str, budget_tokens: int) -> tuple[str, bool]:
    """Cut a summary that came back longer than its budget (chars/4 heuristic, as the budget is set)."""
    limit = max(0, budget_tokens * 4)
    if len(text) <= limit:
        return text, False
    keep = max(0, limit - len(CUT_MARK))
    return text[:keep].rstrip() + CUT_MARK, True


def compact(ctx: Context, opts: Options, budget: Budget, state: State | None, warn: Warn) -> Outcome:
    from ..facts import SUMMARY_MARKER, latest_request, load_todos_file, open_todos
    from ..pipeline import _summarizer, _summary_records, continuation_text
    from ..summarizers import get_summarizer

    system, body = split_context(ctx.transcript.records)
    prior = state.summary if state is not None else None
    latest = latest_request(body) or (prior.latest_request if prior is not None else None)
    todos = load_todos_file(opts.todos_file) if opts.todos_file else open_todos(body)
    request = SummaryRequest(
        records=body,
        budget_tokens=budget.summary_budget,
        prior_summary=prior.text if prior is not None else None,
        prior_facts=prior.facts if prior is not None else None,
        latest_request=latest,
        todos=todos,
        instructions=opts.instructions,
    )
    started = time.monotonic()
    try:
        summary = _summarizer(opts).summarize(request)
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
    text, cut = fit_to_budget(text, budget.summary_budget)
    summary.text = text
    summary.truncated = summary.truncated or cut
    continuation = continuation_text(latest)
    out = [*system, *_summary_records(ctx.transcript.format, text, continuation)]
    return Outcome(
        transcript=Transcript(format=ctx.transcript.format, records=out, source=ctx.transcript.source),
        summary=summary,
        continuation=continuation,
        latest_request=latest,
        records_covered=ctx.input_records,
    )


def record_compaction(state: State, ctx: Context, result: RunResult, outcome: Outcome) -> None:
    """Keep the summary (for the next run's context and as prior context) and the compaction's history."""
    from ..state import Summary, add_compaction

    summary = outcome.summary
    state.summary = Summary.from_result(
        summary,
        records_covered=ctx.input_records,
        latest_request=outcome.latest_request,
        continuation=outcome.continuation,
    )
    add_compaction(
        state,
        strategy="threshold",
        tokens_before=result.tokens_before,
        tokens_after=result.tokens_after,
        records_covered=ctx.input_records - ctx.covered,
        watermark=ctx.input_records,
        summarizer=summary.summarizer,
        fallback=summary.fallback,
        duration_s=summary.duration_s,
        tier=outcome.tier,
    )

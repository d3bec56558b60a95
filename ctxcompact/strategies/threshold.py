"""Strategy ``threshold``, the default (docs/concepts/handoff.md#the-compacted-context): over the threshold,
summarize everything since the last summary and write ``[system messages, verbatim] + [summary] +
[continuation]``.

Nothing of the old conversation is kept verbatim: a kept "recent tail" can hold one giant tool result and
never shrink (the original design measured exactly that failure), so the output is always the system
prompt plus two short messages, far below the threshold.

With ``--prune`` the first tier is masking (:mod:`.mask`): when the masked context is under the threshold
that is the outcome (tier ``mask``); otherwise the masked context is summarized (tier ``summary``).
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from ..budget import Budget
from ..context import Context, copies_history
from ..errors import Unstreamable
from ..facts.handoff import request_status
from ..facts.text import (
    IN_PROGRESS,
    attachments,
    continuation_text,
    removed_attachments_note,
    source_note,
    typed_text,
)
from ..facts.todos import load_todos_file
from ..formats import get_format
from ..model import ImageBlock, Record, Transcript
from ..options import Options
from ..progress import progress
from ..secrets import scrub_credentials, scrub_json
from ..state import State, Summary, TokenCache, make_fingerprint, reset_calibration, set_watermark
from ..summarizers.base import SummaryRequest, SummaryResult
from ..tokens.calibration import Calibrated
from ..tokens.counts import count_records, text_cost
from . import mask
from .base import Outcome, StrategyInput, Warn, Written
from .conversation import Conversation, held
from .masking_state import Masking
from .tail import Count, Tail, fit, in_flight_records, plan, room

NAME = "threshold"


def compact(ctx: Context, opts: Options, budget: Budget, state: State | None, warn: Warn,
            tier: str | None = None, calibrated: Calibrated | None = None,
            counter: Count | None = None, conversation: Conversation | None = None) -> Outcome:
    """Summarize the conversation of ``ctx`` (with the state's summary as prior context), the summary fitted
    to its budget as the window counts (``calibrated``: the run's calibration), keeping the work in flight
    verbatim after the continuation and an encrypted earlier summary as it is (docs/concepts/handoff.md).
    ``counter``: the run's counter (``StrategyInput.tokens``), with which the tail is fitted;
    ``conversation``: the context read record by record (a streamed run, :mod:`.conversation`), else read
    from ``ctx``."""
    conv = conversation if conversation is not None else held(ctx.transcript.records)
    system, opaque = conv.system, conv.opaque
    prior = state.summary if state is not None else None
    typed = typed_text(conv.latest_record) if conv.latest_record is not None else None
    latest = typed or (prior.latest_request if prior is not None else None)
    status = request_status(conv.window)  # (read on the window: as on the whole conversation)
    in_progress = status.status == IN_PROGRESS
    flight = in_flight_records(conv.window) if in_progress else []
    answer = _quoted_answer(status.answer, budget.summary_budget)
    cost = text_cost(opts, calibrated)
    fmt = get_format(ctx.transcript.format)
    attached, spans = _attached(conv, prior)
    removed = None
    if not fmt.carries_attachments:  # named instead, never dropped without a word
        removed = removed_attachments_note(attached)
        attached, spans = [], []

    def continuation_for(tail: list[Record]) -> str:
        text = continuation_text(latest, removed, status=status.status, answer=answer, in_flight=bool(tail))
        text = scrub_credentials(text)  # composed by ctxcompact: the quote keeps no credential
        if opts.cite_source and ctx.transcript.source not in ("", "-"):
            text = f"{text}\n\n{source_note(ctx.transcript.source, ctx.input_lines)}"
        return text

    def head(summary_text: str, continuation: str) -> list[Record]:
        return [*system, *opaque, *fmt.summary_records(summary_text, continuation, attached)]

    # the answer the continuation quotes (and the words around it) is paid from the summary's budget, at
    # most half of it; and a summary is never more than half of what it replaces: whole answers must not
    # make a small context larger
    budget_tokens = min(
        budget.summary_budget - min(budget.summary_budget // 2, cost(answer) + 50 if answer else 0),
        max(64, calibrated.tokens // 2) if calibrated is not None else budget.summary_budget)
    source = ctx.transcript.source
    count = counter if counter is not None else (lambda records: sum(count_records(records, opts).base))
    cal = calibrated if calibrated is not None else UNCALIBRATED
    placed = None
    if flight:
        # the work in flight first: the summary's budget shrinks (to a quarter) so the tail fits whole
        # (docs/concepts/handoff.md#the-work-in-flight); all counted as the run judges its result
        ours = int(budget_tokens / (cal.cost(10_000) / 10_000))
        # cleaning's closing "Understood." after the results is not written, but the next run adds it again
        closing = conv.window[next(i for i, r in enumerate(conv.window) if r is flight[-1]) + 1:]
        # and a compaction must leave less than the context it replaces (else the run passes it through)
        most = cal.base - 1 if cal.base > 0 else None
        placed = plan(flight, count([*head("", continuation_for(flight)), *closing]), ours, ours // 4, budget,
                      cal, count, source, most)
        budget_tokens = min(budget_tokens, cal.cost(placed.summary))
    tail = placed.tail if placed is not None else Tail()
    at = next(i for i, r in enumerate(conv.window) if r is flight[0]) if tail.records else len(conv.window)
    summarized, feed = conv.before(at)
    todos = load_todos_file(opts.todos_file) if opts.todos_file else conv.todos
    request = SummaryRequest(
        records=summarized,
        feed=feed,
        budget_tokens=budget_tokens,
        prior_summary=prior.text if prior is not None else None,
        prior_facts=prior.facts if prior is not None else None,
        latest_request=latest,
        todos=todos,
        instructions=opts.instructions,
        cost=cost,
        latest_in_continuation=latest is not None,
        answer_in_continuation=status.answer if answer else None,
        client_files=get_format(opts.to or ctx.transcript.format).client_files,
    )
    # only a compaction loads the summarizers (a hook's start-up)
    from ..summarizers.fallback import summarize

    summary = summarize(request, opts, warn)
    if placed is not None and tail.records:
        # the summary is made: the tail takes exactly what it leaves under the ceiling (a summary shorter
        # than its budget leaves more of a trimmed result; one longer than counted, less)
        space = min(room(cal, placed.ceiling), most if most is not None else placed.ceiling * 64) - count(
            [*head(summary.text, continuation_for(flight)), *closing])
        tail = fit(flight, space, count, source) if tail.trimmed or count(tail.records) > space else tail
        if not tail.records:  # (never more than the summary's own rounding): the turn was summarized
            records, feed = conv.before(len(conv.window))
            summary = summarize(dataclasses.replace(request, records=records, feed=feed), opts, warn)
    continuation = continuation_for(tail.records)
    out = [*head(summary.text, continuation), *tail.records]
    transcript = Transcript(format=ctx.transcript.format, records=out, source=ctx.transcript.source)
    # the tail stays after the watermark (the next run reads it from the input again) when its place in the
    # input is known; else the summary covers everything and the tail is written this once
    tail_at = tail.first_index if tail.first_index > ctx.covered else -1
    covered_to = tail_at if tail_at >= 0 else ctx.input_records

    def commit(state: State, written: Written) -> None:
        _commit(state, written, summary, latest, continuation, spans,
                tail if tail_at >= 0 else Tail())

    return Outcome(strategy=NAME, transcript=transcript, commit=commit, summary=summary, tier=tier,
                   covered=covered_to - ctx.covered, fallback=summary.fallback,
                   duration_s=summary.duration_s)


#: the projection without a calibration (a caller that has none): our tokens as they are
UNCALIBRATED = Calibrated(tokens=0, calibrated=0, base=0, factor=1.0, source="default", real=None)


def _quoted_answer(answer: str | None, summary_budget: int) -> str | None:
    """The assistant's latest answer, whole when it fits half the summary's budget (at 4 characters a
    token), else its beginning and end around a marker."""
    if not answer:
        return None
    limit = max(400, summary_budget * 2)
    if len(answer) <= limit:
        return answer
    head = (2 * limit) // 3
    left = len(answer) - limit
    return (f"{answer[:head].rstrip()}\n[… {left:,} characters of the answer left out …]\n"
            f"{answer[len(answer) - (limit - head):].lstrip()}")


def _attached(conv: Conversation, prior: Summary | None) -> tuple[list[ImageBlock], list[tuple[int, int]]]:
    """The images and documents attached to the latest request
    (docs/concepts/handoff.md#the-compacted-context), and the input lines they are read from: the latest
    request's own record, or, when the person typed nothing since the last compaction, what the earlier
    continuation carried."""
    rec = conv.latest_record
    if rec is not None:
        found = attachments(rec)
        span = [(rec.offset, len(rec.raw))] if found and rec.offset >= 0 and rec.raw else []
        return found, span
    carried = [b for r in conv.carried for b in attachments(r)]
    return carried, list(prior.attachment_lines) if prior is not None and carried else []


def summary_from_result(result: SummaryResult, *, records_covered: int, latest_request: str | None = None,
                        continuation: str | None = None,
                        attachment_lines: list[tuple[int, int]] | None = None) -> Summary:
    """The state's record of a summarizer's result covering the first ``records_covered`` records."""
    scrub = scrub_credentials  # the state holds what ctxcompact composed: never a credential
    return Summary(text=scrub(result.text), summarizer=result.summarizer, model=result.model,
                   fallback=result.fallback, fallback_reason=result.fallback_reason,
                   records_covered=records_covered,
                   latest_request=scrub(latest_request) if latest_request is not None else None,
                   facts=scrub_json(copy.deepcopy(result.facts)), input_tokens=result.input_tokens,
                   output_tokens=result.output_tokens, duration_s=float(result.duration_s),
                   continuation=scrub(continuation) if continuation is not None else None,
                   truncated=result.truncated,
                   check=copy.deepcopy(result.check), chunks=result.chunks, window=result.window,
                   window_source=result.window_source, attachment_lines=list(attachment_lines or []))


def _commit(state: State, written: Written, summary: SummaryResult, latest: str | None,
            continuation: str, spans: list[tuple[int, int]], tail: Tail) -> None:
    """Move the watermark over every input record (up to the work in flight, which the next run reads
    again), keep the summary, reset the calibration."""
    ctx, counts = written.ctx, written.counts
    # what replaces the covered prefix (system + summary + continuation) costs this much; the tail is
    # counted again from the input
    n = len(counts.heuristic) - len(tail.records)
    exact = sum(counts.exact[:n]) if counts.exact is not None else None
    tokens = TokenCache(heuristic=sum(counts.heuristic[:n]), exact=exact, encoding=counts.encoding)
    start = tail.start
    # (the state as the run found it: its fingerprint the earlier one; the input as read for an older
    # state's prefix, held on the only route that meets one: route_file.compact_streamed)
    history = copies_history(ctx, state, written.data if isinstance(written.data, bytes) else None)
    if start is not None:
        fingerprint = make_fingerprint(written.data, records=start.index, nbytes=start.offset,
                                       lines=start.line - 1, format=ctx.input_format,
                                       system_lines=[(o, k) for o, k in ctx.system_spans
                                                     if o + k <= start.offset], tokens=tokens,
                                       history=history)
    else:
        fingerprint = make_fingerprint(written.data, records=ctx.input_records, nbytes=ctx.input_bytes,
                                       lines=ctx.input_lines, format=ctx.input_format,
                                       system_lines=ctx.system_spans, tokens=tokens, history=history)
    # every masked record is now inside the summary; a trimmed result of the tail stays trimmed
    state.set_section(mask.merge_masking(None, tail.trimmed, input_records=start.index, thinking_before=0)
                      if tail.trimmed and start is not None else None, Masking.KEY)
    set_watermark(state, fingerprint, summary_from_result(
        summary, records_covered=ctx.input_records, latest_request=latest, continuation=continuation,
        attachment_lines=spans))
    # the factor measured on the large pre-compaction request must not scale the small one
    reset_calibration(state)


class ThresholdStrategy:
    name = NAME
    state_layer = 0

    def reapply(self, records: list[Record], state: State, fmt_name: str) -> list[Record]:
        return records  # the summary itself is applied by context.build_context (the watermark)

    def describe(self, si: StrategyInput) -> dict[str, Any]:
        return mask.STRATEGY.describe(si) if si.opts.prune else {}

    def apply(self, si: StrategyInput) -> Outcome | None:
        """Over the threshold, summarize (when a summary makes the context smaller: report.decide); with
        ``--prune`` mask first and summarize only if that is not enough."""
        if not si.report.over_threshold:
            return None
        ctx = si.ctx
        if si.opts.prune:
            masked = mask.try_mask(si, NAME)
            if masked.compacted and (masked.exit_code == 0 or not si.report.would_compact):
                return masked
            if masked.compacted:
                ctx = dataclasses.replace(si.ctx, transcript=masked.transcript)
        if not si.report.would_compact:
            return None
        if si.opts.prune and not isinstance(mask.masking_of(si), mask.HeldMask):
            # (a streamed run's masking holds no records: the summary tier reads the masked context held)
            raise Unstreamable("--prune's summary tier")
        with progress(f"summarizing with {si.opts.summarizer}"):
            tier = "summary" if si.opts.prune else None
            return compact(ctx, si.opts, si.budget, si.state, si.warn, tier=tier,
                           calibrated=si.report.calibrated, counter=si.tokens,
                           conversation=si.conversation if ctx is si.ctx else None)


STRATEGY = ThresholdStrategy()

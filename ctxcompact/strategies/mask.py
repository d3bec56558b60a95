"""Strategy ``mask`` and the ``--prune`` tier of ``threshold``: observation masking
(docs/guides/strategies.md#mask-and-prune-the-masking-rules).

Over the threshold, every tool result that is neither among the most recent ``keep_results`` results nor
inside the newest ``protect_tokens`` of tool output is replaced by a short placeholder such as
``[tool result cleared: read_file(src/app.py), 48,213 chars; call again to see it]``. The call, its id and
every other message stay verbatim, and the result block itself stays (only its content changes, ``is_error``
is kept), so call/result pairs are never broken and the output is a valid transcript of its format.

Rules, where the issue left a choice:

- Budgets (``protect_tokens``, ``min_savings``, tokens freed) are in the run's estimator tokens (tiktoken when
  counted, else ``ceil(chars/4)``), before calibration. A result's tokens are its share of its record's count
  (by the heuristic weight of the result within the record), exact for a record holding one result.
- Protection counts tool output from the newest result backwards; a result is protected when the running
  total *including it* is at most ``protect_tokens`` (opencode's rule: the result that crosses the line is
  cleared). Results of ``exclude_tools`` are never cleared and count neither towards ``keep_results`` nor
  towards ``protect_tokens`` (they are not at stake). Placeholders count as what they now cost.
- Defaults when the options are None: ``protect_tokens = min(40,000, 20 % of the window)`` and
  ``min_savings = min(20,000, 5 % of the window)``. opencode protects 40k and prunes only when 20k is freed
  on 200k-class windows; on an 8k or 32k window those figures would protect everything, so they scale.
- A result whose placeholder would not be shorter is left alone (nothing to gain, and the cache stays).
- The results of the work in flight (the last assistant turn, when the transcript ends in its tool loop:
  ``facts.handoff.in_flight_start``) are never cleared: the model just asked for them.
- ``clear_thinking``: thinking blocks of records before the latest user turn (the last message a person
  typed) are *removed*, not emptied: Anthropic rejects a thinking block whose signature does not match its
  text, and accepts (indeed strips itself) thinking of earlier turns being absent. A message made only of
  thinking is dropped when the format writes each item as its own line (``split_turns``: Codex reasoning
  items) and kept whole otherwise, so alternation is never broken. Claude Code logs (``layout.tree``) keep
  all their thinking: each thinking line is a link of the ``parentUuid`` chain, and the session Claude Code
  resumes must carry every signature and redacted payload as the API returned them.
- Calibration is *kept* after masking (unlike the reset after a summary). The reset exists because a
  factor measured on a large request must not scale a tiny summary into a loop; masking keeps the system
  prompt, every message and its framing, and removes only tool-output text, so the measured ratio of the
  provider's count to ours still describes what is sent — and falling back to the default factor could
  undercount. A factor measured from usage in the transcript is copied into the state, and usage recorded on
  records older than the masking is ignored on later runs (:func:`reapply_masking`): it measured the
  unmasked context, and pairing it with the masked estimate would inflate the factor and re-trigger.
- ``--strategy mask`` over the threshold with nothing worth masking, or still over it after masking, gives
  exit 5 with a warning naming ``--prune`` (``MaskOutcome.exit_code`` / ``warning``).

The state (:class:`Masking`, key ``masking``) records every masked call id with its placeholder, so each
later run re-applies exactly the same placeholders (:func:`reapply_masking`) and never re-expands what was
cleared.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from ..budget import Budget
from ..errors import ExitCode
from ..facts.text import typed_text
from ..formats import get_format
from ..model import (
    Block,
    Message,
    Record,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResult,
    Transcript,
    token_text,
)
from ..options import Options, declared_default
from ..state import State, make_fingerprint, utc_now
from ..tokens import heuristic
from .base import Outcome, StrategyInput, Written
from .masking_state import MaskedResult, Masking
from .tail import trim_in_place

NAME = "mask"

PLACEHOLDER_PREFIX = "[tool result cleared: "
#: opencode's figures for 200k-class windows, scaled down for small windows (see the module docstring)
PROTECT_TOKENS_MAX = 40_000
PROTECT_SHARE = 0.20
MIN_SAVINGS_MAX = 20_000
MIN_SAVINGS_SHARE = 0.05
_BRIEF_LIMIT = 80


@dataclass(frozen=True, slots=True)
class MaskParams:
    """The resolved masking rules (no None left)."""

    keep_results: int = declared_default("keep_results")  # (each declared once: plugins.STRATEGIES)
    protect_tokens: int = 0
    exclude_tools: frozenset[str] = frozenset(declared_default("exclude_tools"))
    min_savings: int = 0
    clear_thinking: bool = declared_default("clear_thinking")


def default_protect_tokens(window: int) -> int:
    return min(PROTECT_TOKENS_MAX, int(window * PROTECT_SHARE))


def default_min_savings(window: int) -> int:
    return min(MIN_SAVINGS_MAX, int(window * MIN_SAVINGS_SHARE))


def mask_params(opts: Options, budget: Budget) -> MaskParams:
    """The options with their documented defaults filled in for this window."""
    return MaskParams(
        keep_results=max(0, opts.keep_results),
        protect_tokens=opts.protect_tokens if opts.protect_tokens is not None
        else default_protect_tokens(budget.window),
        exclude_tools=frozenset(opts.exclude_tools),
        min_savings=opts.min_savings if opts.min_savings is not None else default_min_savings(budget.window),
        clear_thinking=opts.clear_thinking,
    )


# --------------------------------------------------------------------------------------------------
# The pure part: which results to clear, and the placeholders


def _unwrap(text: str) -> str:
    # Gemini writes a changed result as {"result": text}; reading it back gives that JSON as the text.
    s = text.strip()
    if s.startswith("{") and PLACEHOLDER_PREFIX in s[:40]:
        try:
            obj = orjson.loads(s)
        except orjson.JSONDecodeError:
            return s
        if isinstance(obj, dict) and len(obj) == 1 and isinstance(obj.get("result"), str):
            return str(obj["result"]).strip()
    return s


def is_placeholder(result: ToolResult) -> bool:
    """True when the result already holds a mask placeholder (so it is never masked twice)."""
    if len(result.content) != 1 or not isinstance(result.content[0], TextBlock):
        return False
    return _unwrap(result.content[0].text).startswith(PLACEHOLDER_PREFIX)


def _result_chars(result: ToolResult) -> int:
    texts, _ = _texts(result)
    return sum(len(t) for t in texts)


def _texts(result: ToolResult) -> tuple[list[str], int]:
    return token_text(Message(role=Role.TOOL, blocks=[result]))


def _weight(blocks: list[Any]) -> int:
    """Heuristic tokens of some blocks: the weight used to share a record's count among its results."""
    return heuristic.message_tokens(Message(role=Role.TOOL, blocks=blocks))


def placeholder_text(brief: str | None, tool: str | None, chars: int) -> str:
    """``[tool result cleared: name(main argument), N chars; call again to see it]``; ``brief``: the call's
    ``name(main argument)`` (:func:`call_brief`), None when the result's call is not in the context."""
    said = brief if brief is not None else tool or "tool"
    return f"{PLACEHOLDER_PREFIX}{said}, {chars:,} chars; call again to see it]"


def call_brief(call: ToolCall) -> str:
    """What a placeholder says of the call whose result it replaces: ``name(main argument)``."""
    from ..facts.timeline import describe_call  # here: the module loads five of facts' (a run need not)

    return describe_call(call, _BRIEF_LIMIT)


def _masked_result(result: ToolResult, placeholder: str) -> ToolResult:
    # the block and its raw envelope stay (ids, is_error, the format's own fields); only the content changes
    return dataclasses.replace(result, content=[TextBlock(placeholder)])


def _without_thinking(msg: Message) -> Message | None:
    """The message without thinking blocks; None when nothing else is left in it."""
    rest: list[Block] = [b for b in msg.blocks if not isinstance(b, ThinkingBlock)]
    return dataclasses.replace(msg, blocks=rest) if rest else None


@dataclass(slots=True)
class _Found:
    """One tool result of the context, as the choice of what to clear reads it (no text held)."""

    position: int  # of its record in the context
    block: int  # its position in the record's blocks
    call_id: str
    name: str | None  # the result's own tool name, if its format writes one
    index: int  # its record's input index
    weight: int  # heuristic tokens of the result (``_weight``)
    whole: int  # of its record
    chars: int
    placeholder: bool  # it holds a placeholder already


class MaskScan:
    """What :func:`mask_transcript` reads of the context, taken record by record in order (a held context,
    or a streamed ``run``'s reading of the file: ``mask_stream``): each tool result's figures, each call's
    tool and brief (the first call of an id), where the latest turn a person typed begins, the input index
    boundary before it, and the work in flight (``facts.handoff.FlightScan``). Holds no record but the
    flight scan's last few."""

    def __init__(self) -> None:
        from ..facts.handoff import FlightScan

        self.found: list[_Found] = []
        self.calls: dict[str, tuple[str, str]] = {}  # call id -> (tool, brief)
        self.position = 0  # records read
        self.turn = 0  # position of the last record a person typed (thinking from it on: the latest turn's)
        self.boundary = 0  # 1 + the largest input index before it
        self.top = -1  # the largest input index so far
        self.flight = FlightScan()

    def add(self, rec: Record) -> None:
        ri = self.position
        self.position += 1
        if typed_text(rec) is not None:
            self.turn, self.boundary = ri, 1 + self.top
        if rec.index >= 0:
            self.top = max(self.top, rec.index)
        self.flight.add(rec)
        msg = rec.message
        if msg is None:
            return
        for call in msg.tool_calls():
            if call.id not in self.calls:
                self.calls[call.id] = (call.name, call_brief(call))
        whole = -1
        for bi, b in enumerate(msg.blocks):
            if isinstance(b, ToolResult):
                whole = _weight(msg.blocks) if whole < 0 else whole
                self.found.append(_Found(ri, bi, b.call_id, b.name, rec.index, _weight([b]), whole,
                                         _result_chars(b), is_placeholder(b)))

    def plan(self, base: Sequence[int], opts: MaskParams, fmt_name: str) -> MaskPlan:
        """Which results to clear (the module's rules), given each record's estimator tokens ``base``."""
        if len(base) != self.position:
            raise ValueError("one count per record is needed")
        chosen: dict[int, dict[int, MaskedResult]] = {}
        seen = 0
        total = 0.0
        in_flight = self.flight.start()  # the results the model just asked for are never cleared
        for f in reversed(self.found):
            share = base[f.position] * f.weight / f.whole if f.whole else 0.0
            call = self.calls.get(f.call_id)
            tool = call[0] if call is not None else f.name
            if tool is not None and tool in opts.exclude_tools:
                continue
            seen += 1
            total += share
            if seen <= opts.keep_results or total <= opts.protect_tokens or f.placeholder or (
                    in_flight is not None and f.position >= in_flight):
                continue
            text = placeholder_text(call[1] if call is not None else None, tool, f.chars)
            if heuristic.text_tokens(text) >= f.weight:
                continue  # the placeholder would cost as much as the result
            chosen.setdefault(f.position, {})[f.block] = MaskedResult(
                call_id=f.call_id, tool=tool, index=f.index, placeholder=text, chars=f.chars,
                original_tokens=math.ceil(share))
        layout = get_format(fmt_name).layout
        # A tree layout (Claude Code) keeps its thinking: a thinking line is a link of the parentUuid chain,
        # and a session Claude Code resumes must keep every signature and redacted payload as the API
        # returned them.
        clear_thinking = opts.clear_thinking and not layout.tree
        return MaskPlan(chosen, self.turn if clear_thinking else 0, layout.split_turns if clear_thinking
                        else False, self.boundary if clear_thinking else 0, in_flight)


@dataclass(slots=True)
class MaskPlan:
    """What masking does to each record (:meth:`record`), decided over the whole context
    (:meth:`MaskScan.plan`): the same for a held context and a streamed ``run``'s pass 2."""

    chosen: dict[int, dict[int, MaskedResult]]  # record position -> block position -> what replaces it
    drop_thinking_before: int  # thinking of assistant records before this position is removed
    split: bool  # the format writes each item as its own line: a thinking-only message is dropped
    thinking_before: int  # the input index boundary of that thinking (the state's ``thinking_before``)
    in_flight: int | None  # where the work in flight begins

    def record(self, ri: int, rec: Record, before: int) -> tuple[Record | None, int, list[MaskedResult]]:
        """Record ``ri`` of the context masked (itself when unchanged; None: dropped), the estimator tokens
        that frees (of its ``before``) and the results cleared in it."""
        msg = rec.message
        changes = self.chosen.get(ri)
        thinking = (ri < self.drop_thinking_before and msg is not None and msg.role is Role.ASSISTANT
                    and any(isinstance(b, ThinkingBlock) for b in msg.blocks))
        if msg is None or (changes is None and not thinking):
            return rec, 0, []
        blocks = list(msg.blocks)
        entries: list[MaskedResult] = []
        for bi, entry in (changes or {}).items():
            old = blocks[bi]
            assert isinstance(old, ToolResult)
            blocks[bi] = _masked_result(old, entry.placeholder)
            entries.append(entry)
        new_msg: Message | None = dataclasses.replace(msg, blocks=blocks)
        if thinking:
            assert new_msg is not None
            new_msg = _without_thinking(new_msg)
            if new_msg is None and not self.split:
                new_msg = dataclasses.replace(msg, blocks=blocks)  # a thinking-only message stays whole
        if new_msg is None:
            return None, before, entries  # a thinking-only item line dropped
        if new_msg.blocks == msg.blocks:
            return rec, 0, entries
        old_w = _weight(msg.blocks)
        after = math.ceil(before * _weight(new_msg.blocks) / old_w) if old_w else 0
        return dataclasses.replace(rec, message=new_msg, dirty=True), max(0, before - after), entries


def mask_transcript(transcript: Transcript, base_counts_per_record: Sequence[int],
                    opts: MaskParams) -> tuple[Transcript, list[MaskedResult], int]:
    """Clear old tool results (and, with ``clear_thinking``, old thinking) by the rules of the module.

    ``base_counts_per_record`` are the estimator's tokens of each record (``Counts.base``). Returns the new
    transcript (changed records are copies marked dirty; the input is not touched), the cleared results and
    the tokens freed. ``min_savings`` is *not* applied here: the caller decides whether the saving is worth
    it. Pure and idempotent: masking the result again changes nothing."""
    records = transcript.records
    scan = MaskScan()
    for rec in records:
        scan.add(rec)
    plan = scan.plan(base_counts_per_record, opts, transcript.format)
    out: list[Record] = []
    entries: list[MaskedResult] = []
    freed = 0
    for ri, rec in enumerate(records):
        new, gained, cleared = plan.record(ri, rec, base_counts_per_record[ri])
        freed += gained
        entries.extend(cleared)
        if new is not None:
            out.append(new)
    if not entries and len(out) == len(records) and all(a is b for a, b in zip(out, records, strict=True)):
        return transcript, [], 0
    return dataclasses.replace(transcript, records=out), entries, freed


# --------------------------------------------------------------------------------------------------
# Re-applying an earlier run's masking


def reapply_masking(records: list[Record], masking: Masking, fmt_name: str) -> list[Record]:
    """Replace the results of previously masked call ids with their recorded placeholders (copies, marked
    dirty), drop thinking an earlier ``--clear-thinking`` cleared, and ignore usage recorded before the
    masking (it measured the unmasked context). Idempotent; records it does not change are returned as is."""
    one = masking_each(masking, fmt_name)
    return [r for r in map(one, records) if r is not None]


def masking_each(masking: Masking, fmt_name: str) -> Callable[[Record], Record | None]:
    """:func:`reapply_masking` of one record (None: dropped): a record at a time, for a reading that does not
    hold the records (``streaming``); each record's own, so the same whatever the records around it."""
    placeholders = {r.call_id: r.placeholder for r in masking.results}
    thinking_before = masking.thinking_before
    usage_before = masking.input_records
    split = get_format(fmt_name).layout.split_turns

    def one(rec: Record) -> Record | None:
        msg = rec.message
        if rec.usage is not None and 0 <= rec.index < usage_before:
            rec = dataclasses.replace(rec, usage=None)  # the line itself is unchanged: still written as read
        if msg is None:
            return rec
        blocks = list(msg.blocks)
        changed = False
        for bi, b in enumerate(blocks):
            if isinstance(b, ToolResult) and b.call_id in placeholders and not is_placeholder(b):
                blocks[bi] = _masked_result(b, placeholders[b.call_id])
                changed = True
        new_msg: Message | None = dataclasses.replace(msg, blocks=blocks)
        if (0 <= rec.index < thinking_before and msg.role is Role.ASSISTANT
                and any(isinstance(b, ThinkingBlock) for b in blocks)):
            assert new_msg is not None
            stripped = _without_thinking(new_msg)
            if stripped is not None or split:
                new_msg, changed = stripped, True
        if new_msg is None:
            return None
        return dataclasses.replace(rec, message=new_msg, dirty=True) if changed else rec

    return one


def merge_masking(old: Masking | None, entries: Sequence[MaskedResult], *, input_records: int,
                  thinking_before: int) -> Masking:
    """The state's masking after this run: the earlier entries plus the new ones (by call id)."""
    merged = Masking() if old is None else dataclasses.replace(old, results=list(old.results))
    known = {r.call_id for r in merged.results}
    merged.results.extend(e for e in entries if e.call_id not in known)
    merged.input_records = max(merged.input_records, input_records)
    merged.thinking_before = max(merged.thinking_before, thinking_before)
    merged.tokens_freed = sum(r.original_tokens or 0 for r in merged.results)
    merged.updated_at = utc_now()
    return merged


# --------------------------------------------------------------------------------------------------
# The strategy


def _commit(state: State, written: Written, *, results: list[MaskedResult], thinking_before: int,
            measured: bool, factor: float) -> None:
    """Merge what was masked into the state's :class:`Masking`; calibration is kept."""
    ctx = written.ctx
    state.set_section(merge_masking(state.section(Masking), results, input_records=ctx.input_records,
                                    thinking_before=thinking_before))
    if state.watermark == 0:
        # masked call ids only mean something in this transcript: fingerprint what was masked, so a
        # rewritten or different transcript is refused (exit 3) instead of masked by accident
        state.fingerprint = make_fingerprint(written.data, records=ctx.input_records, nbytes=ctx.input_bytes,
                                             lines=ctx.input_lines, format=ctx.input_format)
    if measured:
        # keep the provider's measured ratio for the masked request (see the module docstring)
        state.calibration.factor = round(factor, 6)
        state.calibration.estimator = written.counts.estimator


def _counts(si: StrategyInput) -> Sequence[int]:
    return si.count(si.ctx.transcript.records).base


def _freed_exactly(si: StrategyInput, before: Transcript, base: Sequence[int], after: Transcript) -> int:
    """Tokens freed, counting the changed records again with the run's estimator: the proportional share
    used to choose results is close, but exact counts of placeholders keep the threshold decision true."""
    known = {id(rec): n for rec, n in zip(before.records, base, strict=True)}
    fresh = [rec for rec in after.records if id(rec) not in known]
    if not fresh:
        return sum(base) - sum(known.get(id(rec), 0) for rec in after.records)
    counted = si.count(fresh).base
    total_after = sum(known[id(rec)] for rec in after.records if id(rec) in known) + sum(counted)
    return max(0, sum(base) - total_after)


class HeldMask:
    """What masking reads of a held context (:func:`mask_transcript` over its records); a streamed ``run``
    gives its own (``StrategyInput.conversation``: ``mask_stream.StreamedMask``, the file read again by
    the same :class:`MaskScan` and :class:`MaskPlan`)."""

    def __init__(self, si: StrategyInput) -> None:
        self.si = si

    def mask(self, base: Sequence[int], params: MaskParams) -> tuple[Transcript, list[MaskedResult], int]:
        """:func:`mask_transcript` of the context."""
        return mask_transcript(self.si.ctx.transcript, base, params)

    def freed_exactly(self, base: Sequence[int], masked: Transcript) -> int:
        return _freed_exactly(self.si, self.si.ctx.transcript, base, masked)

    def trim(self, masked: Transcript) -> tuple[Transcript, list[MaskedResult]]:
        """Still over the threshold: the work in flight (never cleared) has its oversized results trimmed
        (``strategies.tail.trim_in_place``)."""
        si, cal = self.si, self.si.report.calibrated
        records, trimmed = trim_in_place(masked.records, si.budget, si.ctx.transcript.source, cal,
                                          si.tokens, under_threshold=True, headroom=si.budget.summary_budget)
        return (dataclasses.replace(masked, records=records), trimmed) if trimmed else (masked, [])

    def thinking_boundary(self, params: MaskParams) -> int:
        return _thinking_boundary(self.si.ctx.transcript, params)


def masking_of(si: StrategyInput) -> Any:  # (HeldMask, or a streamed run's with the same methods)
    given = si.conversation
    return given if hasattr(given, "freed_exactly") else HeldMask(si)


def _maskable(si: StrategyInput, base: Sequence[int], params: MaskParams) -> tuple[list[Any], int]:
    """The results masking would clear now and the estimator tokens that frees."""
    masking = masking_of(si)
    masked, results, freed = masking.mask(base, params)
    if masked is not si.ctx.transcript:
        freed = masking.freed_exactly(base, masked)
    return results, freed


def maskable(si: StrategyInput) -> dict[str, Any]:
    """``maskable_tokens`` and ``maskable_results``: what ``--prune`` (or ``--strategy mask``) would free
    now with the run's mask options, reported by ``estimate`` whatever the strategy
    (docs/reference/cli.md#ctxcompact-estimate-file)."""
    results, freed = _maskable(si, _counts(si), mask_params(si.opts, si.budget))
    return {"maskable_tokens": freed, "maskable_results": len(results)}


def _thinking_boundary(transcript: Transcript, params: MaskParams) -> int:
    if not params.clear_thinking or get_format(transcript.format).layout.tree:
        return 0  # nothing cleared, so nothing for later runs to clear again
    scan = MaskScan()
    for rec in transcript.records:
        scan.add(rec)
    return scan.boundary


def try_mask(si: StrategyInput, strategy: str = NAME) -> Outcome:
    """Mask the context by the options. ``compacted`` is False (and the transcript unchanged) when the saving
    is below ``min_savings``; ``exit_code`` is 5 when the result is still over the threshold."""
    started = time.monotonic()
    params = mask_params(si.opts, si.budget)
    base = _counts(si)
    masking = masking_of(si)
    masked, results, freed = masking.mask(base, params)
    cal = si.report.calibrated
    if si.budget.threshold and cal.project(sum(base) - freed) >= si.budget.threshold:
        masked, trimmed = masking.trim(masked)
        results = [*results, *trimmed] if trimmed else results
    if masked is not si.ctx.transcript:
        freed = masking.freed_exactly(base, masked)
    before = cal.tokens
    worth = freed > 0 and freed >= params.min_savings
    if worth:
        after = si.report.calibrated.project(sum(base) - freed)
    else:
        masked, results, after = si.ctx.transcript, [], before
    thinking_before = masking.thinking_boundary(params) if worth else 0
    duration = round(time.monotonic() - started, 3)

    def commit(state: State, written: Written) -> None:
        _commit(state, written, results=results, thinking_before=thinking_before,
                measured=cal.real is not None, factor=cal.factor)

    outcome = Outcome(strategy=strategy, transcript=masked, compacted=worth,
                      commit=commit if worth else _nothing, tier="mask", masked=len(results),
                      covered=len(results), duration_s=duration, tokens_after=after)
    threshold = si.budget.threshold
    if threshold and after >= threshold:
        outcome.exit_code = ExitCode.DOES_NOT_FIT
        if worth:
            n = len(results)
            what = (f"after masking {n} tool result{'s' if n != 1 else ''} the context is still "
                    f"{after:,} tokens, over the threshold of {threshold:,}")
        else:
            what = (f"the context is {before:,} tokens, over the threshold of {threshold:,}, and masking "
                    f"would free only {freed:,} tokens (minimum {params.min_savings:,}): nothing masked")
        if si.report.calibrated.hidden < si.budget.window:  # else no summary can help (the engine says why)
            what += "; use --prune to summarize when masking is not enough"
        outcome.warnings.append(what)
    return outcome


def _nothing(state: State, written: Written) -> None:
    return None  # nothing was masked: the state stays as it was


def _same(rec: Record) -> Record | None:
    return rec


class MaskStrategy:
    name = NAME
    state_layer = 2  # after sliding-window events (placeholders apply to what the events kept)
    state_section = Masking

    def reapply(self, records: list[Record], state: State, fmt_name: str) -> list[Record]:
        masking = state.section(Masking)
        return reapply_masking(records, masking, fmt_name) if masking else records

    def reapply_each(self, state: State, fmt_name: str) -> Callable[[Record], Record | None]:
        """:meth:`reapply` a record at a time (``strategies.reapply_each``)."""
        masking = state.section(Masking)
        return masking_each(masking, fmt_name) if masking else _same

    def apply(self, si: StrategyInput) -> Outcome | None:
        """``--strategy mask``: over the threshold, mask; None below it."""
        if not si.report.over_threshold:
            return None
        return try_mask(si, NAME)

    def describe(self, si: StrategyInput) -> dict[str, Any]:
        """``estimate --json`` keys: ``maskable_tokens`` (estimator tokens masking would free now, before the
        ``min_savings`` test), ``tokens_after_mask`` (calibrated), ``tier`` (``none``, ``mask`` or
        ``summary``: what ``run`` would do), ``masked_results`` (cleared by earlier runs) and the resolved
        parameters."""
        params = mask_params(si.opts, si.budget)
        base = _counts(si)
        results, freed = _maskable(si, base, params)
        after = si.report.calibrated.project(sum(base) - freed)
        threshold = si.budget.threshold
        worth = freed > 0 and freed >= params.min_savings
        fits = not threshold or after < threshold
        if not si.report.over_threshold:
            tier = "none"
        elif si.opts.strategy == NAME:
            tier = "mask" if worth else "none"
        else:  # the --prune tiers: a summary only where a summary helps (report.decide)
            tier = "mask" if worth and (fits or not si.report.would_compact) else (
                "summary" if si.report.would_compact else "none")
        # the mask tier is enough: that, not a summary, is what run would write (the report's projection)
        projected = {"projected_tokens_after": after} if tier == "mask" else {}
        return {**projected, "would_compact": tier != "none",
                **_keys(params, si.state, freed, len(results),
                        after if worth else si.report.calibrated.tokens, tier)}


def _keys(params: MaskParams, state: State | None, freed: int | None, results: int | None,
          after: int | None, tier: str) -> dict[str, Any]:
    """:meth:`MaskStrategy.describe`'s own keys (``quiet``'s too)."""
    masking = state.section(Masking) if state is not None else None
    previous = masking.results if masking else None
    return {
        "maskable_tokens": freed,
        "maskable_results": results,
        "tokens_after_mask": after,
        "tier": tier,
        "masked_results": len(previous or []),
        "mask": {"keep_results": params.keep_results, "protect_tokens": params.protect_tokens,
                 "min_savings": params.min_savings, "exclude_tools": sorted(params.exclude_tools),
                 "clear_thinking": params.clear_thinking},
    }


def quiet(counted: Any, opts: Options, state: State | None) -> dict[str, Any] | None:
    """:meth:`MaskStrategy.describe`'s keys for a streamed ``run`` below the threshold (``streaming.Counted``:
    nothing is masked, tier ``none``), or None over it. What masking would free now needs the whole
    context: null, as the streamed route's ``maskable_tokens`` (and ``tokens_after_mask``)."""
    if counted.report.over_threshold:
        return None
    return _keys(mask_params(opts, counted.report.budget), state, None, None, None, "none")


STRATEGY = MaskStrategy()

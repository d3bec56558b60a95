"""The composition of every part: load → validate → clean → apply state → estimate → compact → write.

``estimate()`` and ``run()`` are what the CLI commands call; both build the *effective context* the same
way: the system records of the input, then the summary of the last compaction (if the state has one), then
only the records newer than the watermark (§7). That is what the agent will send, so that is what is
estimated, and what a compaction summarizes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import math
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from .budget import Budget, make_budget
from .errors import ExitCode, InputError, Problem, StateError, SummarizerError, UsageError
from .formats import get_format, read_transcript
from .formats.base import new_record
from .model import Message, Origin, Record, Role, TextBlock, Transcript
from .options import Options
from .progress import progress
from .state import (
    State,
    default_state_path,
    load_state,
    new_state,
    save_state,
    state_lock,
)
from .tokens import heuristic
from .tokens.calibration import DEFAULT_EXACT_FACTOR, DEFAULT_HEURISTIC_FACTOR, Calibrated, calibrate

Source = str | Path | bytes | BinaryIO
Warn = Callable[[str], None]


def _stderr_warn(message: str) -> None:
    sys.stderr.write(f"ctxcompact: {message}\n")


# --------------------------------------------------------------------------------------------------
# Loading the input and applying the state


@dataclass(slots=True)
class InputData:
    """The input as bytes, read once. Files are read whole; the state's prefix lets us skip parsing it."""

    data: bytes
    path: Path | None  # None for stdin / bytes

    @classmethod
    def load(cls, source: Source) -> InputData:
        if isinstance(source, bytes):
            return cls(source, None)
        if isinstance(source, (str, Path)):
            if str(source) == "-":
                return cls(sys.stdin.buffer.read(), None)
            path = Path(source)
            try:
                return cls(path.read_bytes(), path)
            except FileNotFoundError:
                raise UsageError(f"no such file: {path}") from None
            except IsADirectoryError:
                raise UsageError(f"{path} is a directory, not a transcript") from None
            except PermissionError:
                raise UsageError(f"cannot read {path}: permission denied") from None
        return cls(source.read(), None)


@dataclass(slots=True)
class Context:
    """The effective context and what was learnt building it."""

    transcript: Transcript  # system records + summary + records after the watermark, cleaned
    input_records: int  # records in the whole input
    covered: int  # input records replaced by the state's summary (the watermark applied)
    input_bytes: int
    input_lines: int  # physical lines of the input (for the next run's line numbers)
    system_spans: list[tuple[int, int]]  # (offset, length) of the input's system records
    repairs: list[Any] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)  # warnings (lenient mode)
    dropped: int = 0
    input_format: str = "openai"


def resolve_state_path(source: Source, opts: Options, *, required: bool) -> Path | None:
    """Where the state lives: --state, else beside a file input; stdin needs --state or --no-state."""
    if not opts.use_state:
        return None
    if opts.state_path is not None:
        return Path(opts.state_path)
    if isinstance(source, (str, Path)) and str(source) != "-":
        return default_state_path(Path(source))
    if required:
        raise UsageError("reading stdin: give --state PATH to keep the state, or --no-state")
    return None


def _count_lines(data: bytes, end: int) -> int:
    return data.count(b"\n", 0, end) + (1 if end and data[end - 1 : end] != b"\n" else 0)


def build_context(inp: InputData, opts: Options, state: State | None, *, schema: bool) -> Context:
    """Read the input, replace what the state's summary covers, and clean the result."""
    from .clean import clean

    data = inp.data
    covered = 0
    prefix_bytes = 0
    prefix_lines = 0
    fmt_name = opts.format
    prefix_system: list[Record] = []
    system_spans: list[tuple[int, int]] = []
    summary_records: list[Record] = []

    if state is not None and state.watermark > 0:
        fp = state.fingerprint
        prefix_bytes = fp.nbytes
        if len(data) < prefix_bytes or hashlib.sha256(data[:prefix_bytes]).hexdigest() != fp.sha256:
            raise StateError(
                "the state file does not belong to this transcript: the first "
                f"{state.watermark} records it covers changed or are missing "
                "(use --reset-state to start over)"
            )
        covered = state.watermark
        prefix_lines = fp.lines if fp.lines is not None else _count_lines(data, prefix_bytes)
        if fp.format:
            if fmt_name not in ("auto", fp.format):
                raise UsageError(f"--format {fmt_name} does not match the state's format {fp.format}")
            fmt_name = fp.format
        fmt = get_format(fmt_name)
        for offset, length in fp.system_lines:
            raw = data[offset : offset + length]
            prefix_system.append(_parse_one(fmt, raw, offset, len(prefix_system)))
            system_spans.append((offset, length))
        summary_records = summary_messages(fmt_name, state)
    elif state is not None and state.fingerprint.nbytes > 0:
        # sliding-window events and masking fingerprint the input they acted on, with the watermark at 0
        fp = state.fingerprint
        if len(data) < fp.nbytes or hashlib.sha256(data[: fp.nbytes]).hexdigest() != fp.sha256:
            raise StateError(
                "the state file does not belong to this transcript: the first "
                f"{fp.records} records its compaction events or masking cover changed or are missing "
                "(use --reset-state to start over)"
            )

    stream = io.BytesIO(data)
    stream.seek(prefix_bytes)
    result = read_transcript(
        stream,
        fmt_name,
        lenient=opts.lenient,
        schema=schema,
        first_line=prefix_lines + 1,
        first_index=covered,
        base_offset=prefix_bytes,
    )
    new_records = result.transcript.records
    fmt_name = result.transcript.format
    for rec in new_records:
        if rec.message is not None and rec.message.role is Role.SYSTEM and rec.offset >= 0 and rec.raw:
            system_spans.append((rec.offset, len(rec.raw)))

    records = apply_state_layers(prefix_system + summary_records + new_records, state, fmt_name)
    transcript = Transcript(format=fmt_name, records=records, source=str(inp.path or "-"))
    cleaned = clean(transcript, close_trailing=not opts.keep_trailing_results)
    input_records = covered + len(new_records) + result.dropped
    return Context(
        transcript=cleaned.transcript,
        input_records=input_records,
        covered=covered,
        input_bytes=len(data),
        input_lines=_count_lines(data, len(data)),
        system_spans=system_spans,
        repairs=list(cleaned.repairs),
        problems=list(result.problems),
        dropped=result.dropped,
        input_format=fmt_name,
    )


def apply_state_layers(records: list[Record], state: State | None, fmt_name: str) -> list[Record]:
    """Re-apply what earlier runs decided beyond the watermark: sliding-window compaction events (§9)
    and masked tool results (§9a), so a later run never re-expands what an earlier one reduced."""
    if state is None:
        return records
    if state.events:
        from .strategies.sliding_window import apply_events

        records = apply_events(records, state, fmt_name)
    if state.masking:
        from .strategies.mask import reapply_masking

        records = reapply_masking(records, state.masking, fmt_name)
    return records


def _parse_one(fmt: Any, raw: bytes, offset: int, index: int) -> Record:
    from .reader import decode_line

    try:
        obj = decode_line(raw, 0)
        rec: Record = fmt.parse_line(obj, index, 0, raw)
    except Exception as exc:  # the fingerprint matched, so this means a corrupt state
        raise StateError(f"the state's system line at byte {offset} does not parse: {exc}") from None
    rec.offset = offset
    return rec


def summary_messages(fmt_name: str, state: State) -> list[Record]:
    """The summary (and continuation) of the last compaction as records of the given format."""
    summary = state.summary
    if summary is None:
        return []
    continuation = summary.continuation or continuation_text(summary.latest_request)
    return _summary_records(fmt_name, summary.text, continuation)


def _summary_records(fmt_name: str, summary_text: str, continuation: str) -> list[Record]:
    fmt = get_format(fmt_name)
    if fmt.layout.alternate:
        # One user message with two text blocks: the API merges consecutive user messages anyway, and a
        # single message keeps strict user/assistant alternation valid on its own.
        msg = Message(
            role=Role.USER, blocks=[TextBlock(summary_text), TextBlock(continuation)], source_role="user"
        )
        return [new_record(msg, Origin.SUMMARY)]
    return [
        new_record(fmt.make_message(Role.USER, summary_text), Origin.SUMMARY),
        new_record(fmt.make_message(Role.USER, continuation), Origin.CONTINUATION),
    ]


def continuation_text(latest: str | None) -> str:
    from .facts import CONTINUATION_MARKER

    head = (
        f"{CONTINUATION_MARKER} because it no longer fitted the context window. "
        "The summary above holds everything said and done before this point.]"
    )
    if latest:
        return (
            f"{head}\n\nThe user's latest request, quoted verbatim:\n\n{latest}\n\n"
            "Continue working on this request from where the work stopped. "
            "Do not ask the user to repeat anything."
        )
    return (
        f"{head}\n\nContinue the work described in the summary from where it stopped. "
        "Do not ask the user to repeat anything."
    )


# --------------------------------------------------------------------------------------------------
# Counting and calibration


@dataclass(slots=True)
class Counts:
    heuristic: list[int]  # per record of the context (0 for records with no message)
    exact: list[int] | None
    encoding: str | None

    @property
    def base(self) -> list[int]:
        return self.exact if self.exact is not None else self.heuristic

    @property
    def estimator(self) -> str:
        return f"tiktoken:{self.encoding}" if self.exact is not None else "heuristic"


def _encoding_name(opts: Options) -> str:
    if opts.encoding:
        return opts.encoding
    from .tokens.exact import encoding_for_model

    return encoding_for_model(opts.model) if opts.model else "o200k_base"


def check_exact(opts: Options) -> None:
    """--exact names a counter we have: tiktoken, none, or a provider endpoint (Anthropic's only)."""
    if opts.exact not in ("tiktoken", "none", "anthropic"):
        from .tokens.provider import unsupported_provider

        raise unsupported_provider(opts.exact)


def count_context(transcript: Transcript, opts: Options) -> Counts:
    heur = [heuristic.message_tokens(r.message) if r.message is not None else 0 for r in transcript.records]
    if opts.exact == "none":
        return Counts(heur, None, None)
    from .tokens import exact

    name = _encoding_name(opts)
    enc = exact.get_encoding(name)
    idx = [i for i, r in enumerate(transcript.records) if r.message is not None]
    counted = exact.count_messages([transcript.records[i].message for i in idx], enc)  # type: ignore[misc]
    ex = [0] * len(transcript.records)
    for i, n in zip(idx, counted, strict=True):
        ex[i] = n
    return Counts(heur, ex, name)


def default_factor(opts: Options, counts: Counts) -> float:
    if opts.default_factor is not None:
        return opts.default_factor
    return DEFAULT_EXACT_FACTOR if counts.exact is not None else DEFAULT_HEURISTIC_FACTOR


def calibrate_context(ctx: Context, counts: Counts, opts: Options, state: State | None) -> Calibrated:
    """Apply §5's calibration sources in order: --real-tokens, usage in the transcript, state, default."""
    base = counts.base
    current = sum(base)
    factor0 = default_factor(opts, counts)
    cal = state.calibration if state is not None else None
    # a measured pair only holds for the estimator that made it
    same_estimator = cal is not None and cal.estimator in (None, counts.estimator)

    if opts.exact == "anthropic":
        real = _anthropic_count(ctx.transcript, opts)
        return calibrate(
            current, real=real, last_estimate=current, default_factor=factor0, source="anthropic count_tokens"
        )
    if opts.real_tokens is not None:
        # the figure is for the last request sent: what we wrote last time, if the state knows it
        last = cal.last_estimate if cal is not None and same_estimator and cal.last_estimate else current
        return calibrate(
            current, real=opts.real_tokens, last_estimate=last, default_factor=factor0, source="--real-tokens"
        )
    # usage recorded in the transcript: the last one after the watermark, against the prefix it saw
    records = ctx.transcript.records
    for i in range(len(records) - 1, -1, -1):
        usage = records[i].usage
        if usage is not None and records[i].origin is Origin.INPUT and usage.prompt_tokens > 0:
            prefix = sum(base[:i])
            if prefix > 0:
                return calibrate(
                    current,
                    real=usage.prompt_tokens,
                    last_estimate=prefix,
                    default_factor=factor0,
                    source=f"transcript usage (line {records[i].line}, {usage.source})",
                )
            break
    if cal is not None and same_estimator:
        if cal.real and cal.last_estimate:
            return calibrate(
                current,
                real=cal.real,
                last_estimate=cal.last_estimate,
                default_factor=factor0,
                source="state",
            )
        if cal.factor:
            # the provider has not reported since our last output: keep the factor it last measured
            return calibrate(
                current,
                real=None,
                last_estimate=None,
                default_factor=cal.factor,
                source="state (factor of an earlier request)",
            )
    return calibrate(
        current,
        real=None,
        last_estimate=None,
        default_factor=factor0,
        source="default" if opts.default_factor is None else "--default-factor",
    )


def _anthropic_count(transcript: Transcript, opts: Options) -> int:
    from .tokens.provider import anthropic_count_tokens_for_transcript

    with progress("counting tokens with Anthropic"):
        return anthropic_count_tokens_for_transcript(
            transcript, model=opts.model, api_key=opts.api_key, base_url=opts.base_url, timeout=opts.timeout
        )


# --------------------------------------------------------------------------------------------------
# estimate


@dataclass(slots=True)
class EstimateReport:
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
    extras: dict[str, Any] = field(default_factory=dict)  # the strategy's own keys (describe_strategy)

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
            },
            "window": self.budget.window,
            "window_source": self.budget.window_source,
            "buffer": self.budget.buffer,
            "threshold": self.budget.threshold,
            "summary_budget": self.budget.summary_budget,
            "percent_used": self.percent_used,
            "would_compact": self.would_compact,
            "projected_tokens_after": self.projected_tokens_after,
            "repairs": self.repairs,
            "state": self.state_path,
            "strategy": self.strategy,
            **{k: v for k, v in self.extras.items() if k != "strategy_name"},
        }

    @property
    def strategy(self) -> str:
        return str(self.extras.get("strategy_name", "threshold"))


def _budget(opts: Options) -> Budget:
    return make_budget(opts.window, opts.model, opts.threshold, opts.config_path)


def budget_from_transcript(budget: Budget, opts: Options, records: list[Record]) -> Budget:
    """With no --window and no --model, a window the log itself records (Codex `token_count` carries
    `model_context_window`) beats the built-in default."""
    if opts.window is not None or opts.model is not None or budget.window_source != "default":
        return budget
    for rec in reversed(records):
        if rec.usage is not None and rec.usage.context_window:
            found = make_budget(rec.usage.context_window, None, opts.threshold, opts.config_path)
            return dataclasses.replace(found, window_source=f"transcript (line {rec.line})")
    return budget


def _over_threshold(tokens: int, budget: Budget) -> bool:
    return budget.threshold is not None and budget.threshold > 0 and tokens >= budget.threshold


def estimate(source: Source, opts: Options | None = None) -> EstimateReport:
    """Dry run of §5/§6 on a transcript: counts, calibration, budget and the compaction decision.

    Reads the state (if any) but writes nothing."""
    opts = opts or Options()
    check_exact(opts)
    budget = _budget(opts)
    state_path = resolve_state_path(source, opts, required=False)
    state = None if (state_path is None or opts.reset_state) else load_state(state_path)
    from .fastcount import fast_estimate

    # streaming, same figures; None when only the full path can be sure (rule: fastcount.fast_estimate)
    fast = fast_estimate(source, opts, state, budget, state_path)
    if fast is not None:
        return fast
    inp = InputData.load(source)
    with progress("reading and counting"):  # shown only on a terminal, and only if it takes a while
        ctx = build_context(inp, opts, state, schema=False)
        budget = budget_from_transcript(budget, opts, ctx.transcript.records)
        report = _estimate_context(ctx, opts, state, budget, state_path)
    _describe(report, ctx, opts, budget, state)
    return report


def _describe(
    report: EstimateReport, ctx: Context, opts: Options, budget: Budget, state: State | None
) -> None:
    from .strategies import StrategyInput, describe_strategy

    report.extras = {
        "strategy_name": opts.strategy,
        **describe_strategy(StrategyInput(ctx, opts, budget, state, report, _stderr_warn)),
    }
    if report.would_compact and report.extras.get("tier") == "mask" and "tokens_after_mask" in report.extras:
        # the mask tier is enough: that, not a summary, is what run would write
        report.projected_tokens_after = int(report.extras["tokens_after_mask"])


def _estimate_context(
    ctx: Context, opts: Options, state: State | None, budget: Budget, state_path: Path | None
) -> EstimateReport:
    counts = count_context(ctx.transcript, opts)
    cal = calibrate_context(ctx, counts, opts, state)
    msgs: dict[str, int] = {}
    tool_calls = 0
    chars = 0
    from .model import message_chars

    for rec in ctx.transcript.records:
        if rec.message is None:
            continue
        msgs[rec.message.role.value] = msgs.get(rec.message.role.value, 0) + 1
        tool_calls += len(rec.message.tool_calls())
        chars += message_chars(rec.message)
    would = _over_threshold(cal.tokens, budget)
    projected = cal.tokens
    if would:
        system = _system_tokens(counts.base, ctx.transcript.records)
        cont = heuristic.text_tokens(continuation_text("x" * 400))
        # after a compaction the calibration is reset, so the default factor applies
        projected = math.ceil((system + cont) * default_factor(opts, counts)) + budget.summary_budget
    return EstimateReport(
        format=ctx.transcript.format,
        records=ctx.input_records,
        covered=ctx.covered,
        messages=msgs,
        tool_calls=tool_calls,
        chars=chars,
        heuristic=sum(counts.heuristic),
        exact=sum(counts.exact) if counts.exact is not None else None,
        encoding=counts.encoding,
        calibrated=cal,
        budget=budget,
        would_compact=would,
        projected_tokens_after=projected,
        repairs=len(ctx.repairs),
        state_path=str(state_path) if state_path else None,
    )


# --------------------------------------------------------------------------------------------------
# run


@dataclass(slots=True)
class RunResult:
    transcript: Transcript  # what was (or would be) written
    output_format: str
    compacted: bool
    tokens_before: int
    tokens_after: int
    estimate: EstimateReport
    repairs: list[Any]
    problems: list[Problem]
    outcome: Any = None  # the strategy's outcome (strategies.StrategyOutcome) when it acted
    exit_code: ExitCode = ExitCode.OK
    warnings: list[str] = field(default_factory=list)
    state: State | None = None
    state_path: Path | None = None

    @property
    def summary(self) -> Any:
        """The SummaryResult of the compaction, or None."""
        return getattr(self.outcome, "summary", None) if self.outcome is not None else None

    def lines(self) -> Iterator[bytes]:
        from .formats import lines_in

        return lines_in(self.transcript, self.output_format)


def _output_format(opts: Options, transcript: Transcript, warn: Warn) -> str:
    from .formats import is_unchanged

    target = opts.to or transcript.format
    fmt = get_format(target)
    if not fmt.writable and not (target == transcript.format and is_unchanged(transcript)):
        fallback = fmt.fallback or "openai"
        warn(f"the {target} format cannot be written faithfully; writing {fallback} instead")
        return fallback
    return target


def run(
    source: Source,
    opts: Options | None = None,
    *,
    output: Path | BinaryIO | None = None,
    dry_run: bool = False,
    warn: Warn = _stderr_warn,
) -> RunResult:
    """validate → clean → apply state → estimate → compact if over the threshold → write output and state.

    ``output``: a path (written atomically), a binary stream, or None (nothing written; the caller can use
    ``RunResult.lines()``). With ``dry_run`` nothing is written at all, not even the state.
    """
    opts = opts or Options()
    check_exact(opts)
    budget = _budget(opts)
    state_path = resolve_state_path(source, opts, required=not dry_run)
    inp = InputData.load(source)
    if state_path is None:
        return _run_locked(inp, opts, budget, None, output, dry_run, warn)
    if dry_run:
        return _run_locked(inp, opts, budget, state_path, output, dry_run, warn)
    with state_lock(state_path, timeout=opts.lock_timeout):
        return _run_locked(inp, opts, budget, state_path, output, dry_run, warn)


def _run_locked(
    inp: InputData,
    opts: Options,
    budget: Budget,
    state_path: Path | None,
    output: Path | BinaryIO | None,
    dry_run: bool,
    warn: Warn,
) -> RunResult:
    state: State | None = None
    if state_path is not None and not opts.reset_state:
        state = load_state(state_path)
    if opts.summarizer != "extractive" and not dry_run:
        try:
            _summarizer(opts).check()  # a missing key is a configuration error, reported before any work
        except SummarizerError as exc:
            raise UsageError(str(exc)) from None
    with progress("validating, cleaning and counting"):
        ctx = build_context(inp, opts, state, schema=True)
        budget = budget_from_transcript(budget, opts, ctx.transcript.records)
        report = _estimate_context(ctx, opts, state, budget, state_path)
    _describe(report, ctx, opts, budget, state)
    new_state_obj = state or new_state(ctx.input_format)
    result = RunResult(
        transcript=ctx.transcript,
        output_format=opts.to or ctx.input_format,
        compacted=False,
        tokens_before=report.calibrated.tokens,
        tokens_after=report.calibrated.tokens,
        estimate=report,
        repairs=ctx.repairs,
        problems=ctx.problems,
        state=new_state_obj,
        state_path=state_path,
    )
    from .strategies import StrategyInput, apply_strategy

    outcome = apply_strategy(StrategyInput(ctx, opts, budget, state, report, warn))
    if outcome is not None:
        result.transcript = outcome.transcript
        result.outcome = outcome
        result.compacted = outcome.compacted
    # what we write, estimated as the next request will be: the base for the next calibration
    out_counts = count_context(result.transcript, opts)
    out_base = sum(out_counts.base)
    in_base = report.exact if report.exact is not None else report.heuristic
    if result.compacted and out_base >= in_base:
        # A compaction that does not shrink the context (a large system prompt over a short conversation)
        # would repeat on every call: keep the context as it was and let the size check below speak.
        warn("compaction would not make the context smaller; passing it through")
        result.transcript, result.outcome, result.compacted = ctx.transcript, None, False
        out_counts = count_context(result.transcript, opts)
        out_base = sum(out_counts.base)
    # The factor measured on this very content still holds for its compacted form when judging the fit;
    # only the stored calibration is reset (§5), so the next run cannot loop on a stale factor.
    factor = max(default_factor(opts, out_counts), report.calibrated.factor)
    after = math.ceil(out_base * factor) if result.compacted else report.calibrated.tokens
    result.tokens_after = after
    if not dry_run:
        result.output_format = _output_format(opts, result.transcript, warn)
    if after > budget.window:
        result.exit_code = ExitCode.DOES_NOT_FIT
        result.warnings.append(_does_not_fit_reason(result.transcript, out_counts, factor, budget, after))
    if result.outcome is not None:
        # a strategy may know better why its result cannot fit (e.g. masking alone was not enough)
        result.warnings.extend(getattr(result.outcome, "warnings", []))
        result.exit_code = max(result.exit_code, ExitCode(getattr(result.outcome, "exit_code", ExitCode.OK)))
    elif result.compacted and _over_threshold(after, budget):
        result.warnings.append(
            f"after compaction the context is still {after:,} tokens, over the threshold of "
            f"{budget.threshold:,} (the system prompt is large for this window)"
        )
    if dry_run:
        return result
    _update_state(new_state_obj, inp, ctx, result, out_counts)
    if output is not None:
        write_output(result, output)
    if state_path is not None:
        save_state(state_path, new_state_obj)
    return result


def _system_tokens(base: list[int], records: list[Record]) -> int:
    """Tokens of the system records: they are kept verbatim, so no compaction can shrink them."""
    pairs = zip(base, records, strict=True)
    return sum(c for c, r in pairs if r.message is not None and r.message.role is Role.SYSTEM)


def _does_not_fit_reason(t: Transcript, counts: Counts, factor: float, budget: Budget, after: int) -> str:
    system = _system_tokens(counts.base, t.records)
    if math.ceil(system * factor) >= budget.window:
        return (
            f"the result is {after:,} tokens and does not fit the {budget.window:,}-token window: "
            f"the system prompt alone is about {math.ceil(system * factor):,} tokens"
        )
    return f"the result is {after:,} tokens and does not fit the {budget.window:,}-token window"


def _update_state(state: State, inp: InputData, ctx: Context, result: RunResult, out_counts: Counts) -> None:
    from .state import InputInfo, record_estimate

    if inp.path is not None:
        state.input = InputInfo(path=str(inp.path), format=ctx.input_format)
    if result.outcome is not None:
        result.outcome.commit(state, inp, ctx, result, out_counts)
    # the estimate of what we wrote: the next `calibrate` pairs the provider's figure with it
    record_estimate(state, sum(out_counts.base), out_counts.estimator)


def write_output(result: RunResult, output: Path | BinaryIO) -> None:
    from .atomic import atomic_writer

    if isinstance(output, Path):
        with atomic_writer(output) as fh:
            for line in result.lines():
                fh.write(line)
    else:
        for line in result.lines():
            output.write(line)
        output.flush()


# --------------------------------------------------------------------------------------------------
# calibrate


def record_real_tokens(state_path: Path, prompt_tokens: int, lock_timeout: float = 10.0) -> State:
    """``ctxcompact calibrate``: store what the provider reported for the last request (after-model hook)."""
    if prompt_tokens < 0:
        raise UsageError("--prompt-tokens must be 0 or more")
    from .state import record_real_tokens as _record

    with state_lock(state_path, timeout=lock_timeout):
        state = load_state(state_path)
        if state is None:
            raise StateError(f"no state file at {state_path}: run `ctxcompact run` first")
        _record(state, prompt_tokens)
        save_state(state_path, state)
        return state


def _summarizer(opts: Options) -> Any:
    from .summarizers import get_summarizer

    if opts.summarizer == "extractive":
        return get_summarizer("extractive")
    kwargs: dict[str, Any] = {
        "model": opts.summary_model,
        "api_key": opts.api_key,
        "base_url": opts.base_url,
        "timeout": opts.timeout,
        "max_retries": opts.max_retries,
        "instructions": opts.instructions,
    }
    return get_summarizer(opts.summarizer, **{k: v for k, v in kwargs.items() if v is not None})


__all__ = [
    "Context",
    "EstimateReport",
    "InputData",
    "InputError",
    "RunResult",
    "SummarizerError",
    "build_context",
    "estimate",
    "record_real_tokens",
    "run",
]

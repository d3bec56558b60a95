"""`ctxcompact eval` on one input (docs/guides/eval.md#what-it-reports): compact in memory with
exactly what ``run`` does (``engine.run`` with ``dry_run``: same options, same state rules, nothing written,
not even a state), score what it would write, read back as the next call sees it, against the original; score
the two naive baselines (the tail, the head of each message) at the same budget; and replay the calibration
on the usage the log records."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

from ..convert import lines_in
from ..engine import RunResult, output_format, run
from ..facts.rules import client_file_records
from ..formats import get_format, read_transcript
from ..model import Message, Record, Role, TextBlock, Transcript
from ..options import Options
from ..secrets import scrub_json
from ..source import InputData, Source, is_file
from ..tokens.counts import count_records
from .baseline import heads, truncate
from .calibration import ReplayPoint, replay_calibration
from .handoff import handoff_scores
from .probes import Probe
from .scores import compare, score

UNDERCOUNT = 0.05  # an estimate more than 5 % below the bill is an undercount


def _input(source: Source) -> tuple[Source, bytes]:
    """What to hand ``run`` (a path keeps the state rules of a path) and the input's bytes, read once for
    stdin and streams."""
    if is_file(source):
        return source, InputData.load(source).data
    data = InputData.load(source).data
    return data, data


def read_input(source: Source, opts: Options) -> tuple[Source, bytes, str]:
    """The input for ``run``, its bytes and its format (detected as ``run`` does, with line-numbered errors
    for a bad input)."""
    run_source, data = _input(source)
    fmt = read_transcript(io.BytesIO(data), opts.format, lenient=opts.lenient, schema=True).transcript.format
    return run_source, data, fmt


def original_records(data: bytes, fmt: str, opts: Options) -> list[Record]:
    """The whole input as read (no state applied, nothing cleaned): the compaction is measured against it."""
    return read_transcript(io.BytesIO(data), fmt, lenient=opts.lenient, schema=False).transcript.records


def written_format(opts: Options, transcript: Transcript) -> str:
    """The format ``run`` would write this transcript in (``--to``, else the input's, or its fallback)."""
    return output_format(opts, transcript, lambda _: None)


def written_context(result: RunResult, opts: Options, original: Sequence[Record] = ()) -> Transcript:
    """What the next call sees: the output ``run`` writes, read back by its own format's reader, and the
    project instruction files the client sends itself, as ``original`` (the log the run read) holds them
    (``Format.client_files``: the summary leaves their rules to the client, ``facts.rules.sent_by_client``).
    An append-only log (Claude Code, Codex, ADK events) keeps its lines and records the compaction after them,
    and its reader rebuilds the context the agent will send from there (Codex from the ``compacted`` line's
    ``replacement_history``), so scoring the strategy's records would score what nobody sends."""
    fmt = written_format(opts, result.transcript)
    data = b"".join(line + b"\n" for line in lines_in(result.transcript, fmt))
    written = read_transcript(io.BytesIO(data), fmt, lenient=opts.lenient, schema=False).transcript
    files = get_format(fmt).client_files
    if files and result.compacted:
        text = "\n".join(r.message.text() for r in written.records if r.message is not None)
        written.records.extend(r for r in client_file_records(original, files)
                               if r.message is not None and r.message.text() not in text)
    return written


def _tokens_of(records: Sequence[Record], result: RunResult, opts: Options) -> Any:
    """The run's calibrated count of a subset of ``records`` (each record counted once, by the run's
    counter and calibration)."""
    base = dict(zip((id(r) for r in records), count_records(list(records), opts).base, strict=True))
    cal = result.estimate.calibrated
    return lambda subset: cal.project(sum(base[id(r)] for r in subset))


def baseline_of(result: RunResult, opts: Options, kind: str = "tail") -> tuple[Transcript, int]:
    """A naive baseline (``tail``: truncation; ``head``: the first characters of each message, then
    truncation) of the context ``run`` was given, at the tokens its compaction came to."""
    assert result.context is not None
    context = result.context if kind == "tail" else heads(result.context)
    tokens_of = _tokens_of(context.records, result, opts)
    if not result.compacted:
        return context, tokens_of(context.records)
    truncated = truncate(context, result.tokens_after, tokens_of)
    return truncated, tokens_of(truncated.records)


def summary_tokens(result: RunResult, opts: Options) -> dict[str, Any] | None:
    """The summary's tokens by the window's own counter and calibration, against its budget."""
    summary = result.summary
    if summary is None:
        return None
    rec = Record(index=-1, line=0, raw=None, data=None, message=Message(Role.USER, [TextBlock(summary.text)]))
    cal = result.estimate.calibrated
    n = count_records([rec], opts).base[0]
    tokens = cal.project(n) - cal.project(0)  # the summary's own part, not the hidden part of the request
    budget = result.estimate.budget.summary_budget
    return {"tokens": tokens, "budget": budget, "within": tokens <= budget, "chars": len(summary.text)}


def calibration_of(points: Sequence[ReplayPoint]) -> dict[str, Any] | None:
    """How well the estimate before each recorded request matched its bill; None when the log records none.

    The first request is reported apart (``first``): nothing before it says how large the prompt the log
    does not hold is (docs/concepts/calibration.md#calibration), so it measures the default, not the
    calibration. ``mape``, ``undercounts`` and ``worst`` are over the requests after it (null with one)."""
    if not points:
        return None
    later = list(points[1:])
    errors = [p.error for p in later]
    return {
        "points": len(points),
        "first": _point(points[0]),
        "mape": round(sum(abs(e) for e in errors) / len(errors), 4) if errors else None,
        "undercounts": sum(e < -UNDERCOUNT for e in errors),
        "worst": _point(min(later, key=lambda p: p.error)) if later else None,
    }


def _point(p: ReplayPoint) -> dict[str, Any]:
    return {"line": p.line, "predicted": p.predicted, "real": p.real, "error": round(p.error, 4)}


def _ratio(before: int, after: int) -> float:
    return round(after / before, 4) if before else 1.0


def evaluate(
    source: Source,
    opts: Options | None = None,
    probes: Sequence[Probe] = (),
    *,
    calibration: bool = True,
    judge: str | None = None,
) -> dict[str, Any]:
    """The `eval --json` object for one input (docs/guides/eval.md#what-it-reports)."""
    opts = opts or Options()
    run_source, data = _input(source)
    warnings: list[str] = []
    result = run(run_source, opts, dry_run=True, warn=warnings.append)
    assert result.context is not None
    fmt = result.context.format
    original = original_records(data, fmt, opts)
    window = result.estimate.budget.window
    after = result.tokens_after
    summary = result.summary
    out: dict[str, Any] = {
        "file": str(source) if is_file(source) else "-",
        "format": fmt,
        "strategy": opts.strategy,
        "summarizer": summary.summarizer if summary is not None else None,
        "compacted": result.compacted,
        "tokens": {
            "before": result.tokens_before,
            "after": after,
            "ratio": _ratio(result.tokens_before, after),
        },
        "window": window,
        "fits": after <= window,
    }
    written = written_context(result, opts, original)
    out.update(score(original, written, probes, written_format(opts, result.transcript)))
    out["handoff"] = handoff_scores(compare(original, written))
    out["summary_budget"] = summary_tokens(result, opts)
    base, base_tokens = baseline_of(result, opts, "tail")
    out["baseline"] = {
        "tokens": base_tokens,
        "fits": base_tokens <= window,
        **score(original, base, probes, written_format(opts, base)),
    }
    head, head_tokens = baseline_of(result, opts, "head")
    out["baseline_head"] = {"tokens": head_tokens, "fits": head_tokens <= window,
                            **score(original, head, probes, validate=False)}
    out["calibration"] = calibration_of(replay_calibration(run_source, opts)) if calibration else None
    if judge:
        from .judge import judge as ask_judge  # the SDKs load only here

        out["judge"] = ask_judge(judge, probes, compare(original, written).text, opts)
    out["warnings"] = warnings + result.warnings
    return scrub_json(out)  # eval quotes the transcript (identifiers, requests, rules): never a credential

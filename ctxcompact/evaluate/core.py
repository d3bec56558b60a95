"""`ctxcompact eval` on one input (README "Measuring a compaction: ctxcompact eval"): compact in memory with
exactly what ``run`` does (``engine.run`` with ``dry_run``: same options, same state rules, nothing written,
not even a state), score the result against the original, score the naive truncation baseline at the same
budget, and replay the calibration on the usage the log records."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

from ..engine import RunResult, output_format, run
from ..formats import read_transcript
from ..model import Record, Transcript
from ..options import Options
from ..secrets import scrub_json
from ..source import InputData, Source, is_file
from ..tokens.counts import count_records
from .baseline import truncate
from .calibration import ReplayPoint, replay_calibration
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


def _tokens_of(result: RunResult, opts: Options) -> Any:
    """The run's calibrated count of a subset of the context's records (each record counted once)."""
    assert result.context is not None
    base = dict(
        zip(
            (id(r) for r in result.context.records),
            count_records(result.context.records, opts).base,
            strict=True,
        )
    )
    cal = result.estimate.calibrated
    return lambda records: cal.project(sum(base[id(r)] for r in records))


def baseline_of(result: RunResult, opts: Options) -> tuple[Transcript, int]:
    """Naive truncation of the context ``run`` was given, to the tokens its compaction came to."""
    assert result.context is not None
    if not result.compacted:
        return result.context, result.tokens_before
    tokens_of = _tokens_of(result, opts)
    truncated = truncate(result.context, result.tokens_after, tokens_of)
    return truncated, tokens_of(truncated.records)


def calibration_of(points: Sequence[ReplayPoint]) -> dict[str, Any] | None:
    """How well the estimate before each recorded request matched its bill; None when the log records none.

    The first request is reported apart (``first``): nothing before it says how large the prompt the log
    does not hold is (README "Token estimation and calibration"), so it measures the default, not the
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
    """The `eval --json` object for one input (README "Measuring a compaction: ctxcompact eval")."""
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
    out.update(score(original, result.transcript, probes, written_format(opts, result.transcript)))
    base, base_tokens = baseline_of(result, opts)
    out["baseline"] = {
        "tokens": base_tokens,
        "fits": base_tokens <= window,
        **score(original, base, probes, written_format(opts, base)),
    }
    out["calibration"] = calibration_of(replay_calibration(run_source, opts)) if calibration else None
    if judge:
        from .judge import judge as ask_judge  # the SDKs load only here

        out["judge"] = ask_judge(judge, probes, compare(original, result.transcript).text, opts)
    out["warnings"] = warnings + result.warnings
    return scrub_json(out)  # eval quotes the transcript (identifiers, requests, rules): never a credential

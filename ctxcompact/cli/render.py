"""What the commands print: the estimate table, the run's one-line summary, the dry-run report, JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from ..plugins import EXTRACTS, SUMMARIZERS

if TYPE_CHECKING:  # annotations only: rendering must not load the engine before a command runs
    from ..engine import RunResult
    from ..report import EstimateReport
    from ..summarizers.base import SummaryResult

ROW = "{:<40} {:<11} {:>9} {:>12} {:>12} {:>12} {:>7} {:>7}"


def to_json(obj: Any) -> str:
    return orjson.dumps(obj, option=orjson.OPT_INDENT_2).decode()



def render_estimate(r: EstimateReport) -> str:
    d = r.to_json()
    t = d["tokens"]
    msgs = ", ".join(f"{k} {v}" for k, v in sorted(d["messages"].items())) or "none"
    threshold = f"{d['threshold']:,}" if d["threshold"] else "disabled"
    rows = [
        ("format", d["format"]),
        (
            "records",
            f"{d['records']:,}"
            + (f" ({d['covered_by_summary']:,} covered by the summary)" if d["covered_by_summary"] else ""),
        ),
        ("messages", msgs),
        ("tool calls", f"{d['tool_calls']:,}"),
        ("characters", f"{d['chars']:,}"),
        ("heuristic tokens", f"{t['heuristic']:,}  (ceil(chars/4))"),
        ("exact tokens", f"{t['exact']:,}  ({t['encoding']})" if t["exact"] is not None else "not counted"),
        ("calibrated tokens", f"{t['calibrated']:,}"),
        ("correction", f"{_correction(d['correction'])}  from {d['correction']['source']}"),
        ("window", f"{d['window']:,}  ({d['window_source']})"),
        ("buffer", f"{d['buffer']:,}"),
        ("threshold", threshold),
        ("window used", f"{d['percent_used']:.1f} %"),
        ("would compact", "yes" if d["would_compact"] else
         "no (over the threshold, but a summary cannot make it smaller and fit)" if d["over_threshold"]
         else "no"),
        ("after compaction", f"≈ {d['projected_tokens_after']:,} tokens" if d["would_compact"] else "-"),
    ]
    if d.get("maskable_tokens") is not None:
        freed = f"{d['maskable_tokens']:,} tokens in {d['maskable_results']:,} tool results"
        rows.append(("masking would free", f"{freed} (--prune, --strategy mask)"))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def _correction(c: dict[str, Any]) -> str:
    """``×1.250``, or with a measured hidden prompt ``16,020 hidden + ×1.000 per token``."""
    if c.get("hidden"):
        return f"{c['hidden']:,} hidden + ×{c['slope']:.3f} per token"
    return f"×{c['factor']:.3f}"


def compaction_line(result: RunResult) -> str:
    """One line on stderr saying what run did: summarized, or masked."""
    records = result.estimate.records - result.estimate.covered
    change = f"{result.tokens_before:,} → {result.tokens_after:,} tokens"
    s = result.summary
    if s is None:
        masked = result.outcome.masked if result.outcome is not None else 0
        return f"masked {masked} tool results: {change}"
    how = s.summarizer + (" (fallback)" if s.fallback else "")
    return f"compacted {records} records: {change}, summary by {how}{summary_details(s)}"


def summary_details(s: SummaryResult) -> str:
    """What the check of an LLM summary did, how many requests and how long it took, and the usage."""
    parts = []
    if s.check is not None:
        if s.check["verdict"] == "rejected":
            parts.append(f"check rejected it: {s.check['reason']}")
        else:
            parts.append("check " + (_added(s.check["added"]) if s.check["added"] else "passed"))
    if s.window is not None:
        parts.append(f"{s.window:,}-token window ({s.window_source})")
    if s.chunks > 1:
        parts.append(f"{s.chunks} chunks")
    if s.input_tokens is not None or s.output_tokens is not None:
        def n(x: int | None) -> str:
            return f"{x:,}" if x is not None else "?"

        parts.append(f"{n(s.input_tokens)} tokens in, {n(s.output_tokens)} out")
    if not SUMMARIZERS.has(s.summarizer, EXTRACTS) or s.fallback:  # (the facts themselves take no time)
        parts.append(f"{s.duration_s:.1f} s")
    return f" ({'; '.join(parts)})" if parts else ""


def _added(added: dict[str, int]) -> str:
    words = {"rules": "rule", "todos": "todo", "files": "file"}
    out = []
    for kind, n in added.items():
        if kind == "latest_request":
            out.append("pinned the latest request")
        elif kind == "last_error":
            out.append("pinned the last error")
        else:
            out.append(f"pinned {n} {words.get(kind, kind)}{'' if n == 1 else 's'}")
    return ", ".join(out)


def repairs_line(repairs: list[Any]) -> str:
    """One line on stderr saying what ``run`` repaired, by kind in order of first appearance
    (docs/reference/cli.md#ctxcompact-run-file: every repair is reported; `clean --report` lists each one)."""
    by_kind: dict[str, int] = {}
    for r in repairs:
        by_kind[r.kind] = by_kind.get(r.kind, 0) + 1
    kinds = ", ".join(f"{kind.replace('_', ' ')} {n}" for kind, n in by_kind.items())
    return f"repaired {len(repairs)} thing{'s' if len(repairs) != 1 else ''} in the input: {kinds}"


def run_json(result: RunResult, *, dry_run: bool, output: str | None) -> dict[str, Any]:
    """``run --json`` and ``run --dry-run --json``: what the run did (or would do), one object
    (docs/guides/hooks.md#run-json-for-scripts lists the keys)."""
    est = result.estimate.to_json()
    s = result.summary
    outcome = result.outcome
    records_out, kept = result.records_written()
    by_kind: dict[str, int] = {}
    for r in result.repairs:
        by_kind[r.kind] = by_kind.get(r.kind, 0) + 1
    decision = "pass" if not result.compacted else "summarize" if s is not None else "mask"
    facts = s.facts if s is not None and s.facts else {}
    return {
        "decision": decision,
        "dry_run": dry_run,
        "would_compact": result.compacted,
        "tokens_before": result.tokens_before,
        "tokens_after": result.tokens_after,
        "records_in": result.estimate.records,
        "records_out": records_out,
        "repairs": [str(r) for r in result.repairs],
        "repairs_by_kind": by_kind,
        "summarizer": s.summarizer if s is not None else None,
        "tier": outcome.tier if outcome is not None else None,
        "summary": None if s is None else {
            "kind": s.summarizer,
            "model": s.model,
            "fallback": s.fallback,
            "fallback_reason": s.fallback_reason,
            "chars": len(s.text),
            "truncated": s.truncated,
            "chunks": s.chunks,
            "check": s.check,
            "input_tokens": s.input_tokens,
            "output_tokens": s.output_tokens,
        },
        "kept": {
            "input_records": kept,
            "summarized_records": outcome.covered if outcome is not None and s is not None else 0,
            "masked_results": outcome.masked if outcome is not None else 0,
            "facts": {k: len(v) for k, v in sorted(facts.items()) if isinstance(v, (list, dict)) and v},
        },
        "output": None if dry_run else (output or "-"),
        "state": None if dry_run or result.state_path is None else str(result.state_path),
        "exit_code": int(result.exit_code),
        "warnings": result.warnings,
        "estimate": est,
    }


def render_dry_run(result: RunResult) -> str:
    lines = [render_estimate(result.estimate), ""]
    if result.compacted:
        out_records = len(result.transcript.records)
        lines.append(f"run would act: {compaction_line(result)} ({out_records} records out)")
    else:
        lines.append(f"run would pass the transcript through ({len(result.transcript.records)} records)")
    for repair in result.repairs:
        lines.append(f"repair: {repair}")
    for warning in result.warnings:
        lines.append(f"warning: {warning}")
    lines.append("nothing written (--dry-run)")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------


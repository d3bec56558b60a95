"""`eval --replay` (docs/guides/eval.md#replay-replay): grow the transcript record by record as
the agent did and call ``run`` whenever the agent would have called the model (before each assistant turn),
with a real state in a temporary directory, so compaction happens as often as the window forces it."""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..engine import run
from ..model import Record, Role, Transcript, token_text
from ..options import Options
from .core import original_records, read_input, written_context, written_format
from .handoff import in_flight_score
from .probes import Probe
from .scores import compare, latest_request_score, rules_score, score


def turn_starts(records: Sequence[Record]) -> list[int]:
    """Positions of the records that begin an assistant turn (the model was called just before them)."""
    out = []
    previous: Role | None = None
    for i, rec in enumerate(records):
        if rec.message is None:
            continue
        if rec.message.role is Role.ASSISTANT and previous is not Role.ASSISTANT:
            out.append(i)
        previous = rec.message.role
    return out


def replay(source: Any, opts: Options | None = None, probes: Sequence[Probe] = (),
           on_turn: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """The replay object of `eval --json`: turns, compactions, max_tokens, window, ignored_usage (the lines
    whose recorded bill was for the uncompacted session, not learned), the per-turn series of
    context tokens (what each request would have carried) and the final scores against everything before.
    ``on_turn(done, total)`` is called after each replayed turn (a progress bar)."""
    opts = opts or Options()
    _, data, fmt = read_input(source, opts)
    original = original_records(data, fmt, opts)
    with tempfile.TemporaryDirectory(prefix="ctxcompact-eval-") as tmp:
        log, state = Path(tmp) / "session.jsonl", Path(tmp) / "session.ctxstate.json"
        ropts = dataclasses.replace(
            opts, state_path=state, use_state=True, reset_state=False, format=fmt, keep_trailing_results=True
        )
        series: list[dict[str, Any]] = []
        ignored: set[int] = set()  # lines whose bill is for the uncompacted session (not learned)
        window = 0
        starts = turn_starts(original)
        for done, i in enumerate(starts, 1):
            log.write_bytes(data[: original[i].offset])
            result = run(log, ropts, output=None, warn=lambda _: None)
            ignored.update(line for line, _ in result.estimate.calibrated.ignored)
            window = result.estimate.budget.window
            point: dict[str, Any] = {
                "line": original[i].line,
                "tokens": result.tokens_after,
                "compacted": result.compacted,
            }
            if result.compacted:
                point["recall"] = _recall(original[:i], written_context(result, ropts, original[:i]), probes)
            series.append(point)
            if on_turn is not None:
                on_turn(done, len(starts))
        log.write_bytes(data)
        final = run(log, ropts, output=None, warn=lambda _: None)
        ignored.update(line for line, _ in final.estimate.calibrated.ignored)
        window = final.estimate.budget.window
        written = final.transcript  # (made from the log on first read: before the folder goes)
    return {
        "turns": len(series),
        "curve": curve([p["recall"] for p in series if "recall" in p]),
        "compactions": sum(p["compacted"] for p in series) + int(final.compacted),
        "max_tokens": max([p["tokens"] for p in series] + [final.tokens_after]),
        "window": window,
        # the original's bills after a compaction are for the context it did not compact: never learned
        # (docs/concepts/calibration.md#usage-that-is-not-for-the-written-context)
        "ignored_usage": sorted(ignored),
        "series": series,
        "final": {
            "tokens": final.tokens_after,
            "compacted": final.compacted,
            **score(original, written, probes, written_format(opts, written)),
        },
    }


def _recall(prefix: Sequence[Record], seen: Transcript, probes: Sequence[Probe]) -> dict[str, Any]:
    """What the next call sees right after one compaction, against the session so far: the probes whose
    answer the session had shown by then (``answerable``) and how many of them it still sees, the user's
    rules and the latest request verbatim, and the work in flight (the hook is called inside tool loops)."""
    shown = "\n".join(t for r in prefix if r.message is not None for t in token_text(r.message)[0])
    answerable = [p for p in probes if p.found_in(shown)]
    c = compare(prefix, seen)
    rules = rules_score(c)
    flight = in_flight_score(c)
    return {
        "answerable": len(answerable),
        "found": sum(p.found_in(c.text) for p in answerable),
        "rules": rules["found"],
        "rules_kept": rules["kept_verbatim"],
        "latest_request_kept": latest_request_score(c)["kept_verbatim"],
        "in_flight": flight["present"],  # None when the session so far does not end inside a tool loop
        "in_flight_trimmed": flight.get("trimmed", 0) > 0,  # too large for its share: trimmed, with a marker
    }


def curve(points: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The recall after the 1st, 2nd, … compaction: one entry per compaction, in order."""
    return [{"compaction": k, **p} for k, p in enumerate(points, start=1)]

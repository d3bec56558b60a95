"""`eval --replay` (README "Measuring a compaction: ctxcompact eval"): grow the transcript record by record as
the agent did and call ``run`` whenever the agent would have called the model (before each assistant turn),
with a real state in a temporary directory, so compaction happens as often as the window forces it."""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..engine import run
from ..model import Record, Role
from ..options import Options
from .core import original_records, read_input, written_format
from .probes import Probe
from .scores import score


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
    """The replay object of `eval --json`: turns, compactions, max_tokens, window, the per-turn series of
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
        window = 0
        starts = turn_starts(original)
        for done, i in enumerate(starts, 1):
            log.write_bytes(data[: original[i].offset])
            result = run(log, ropts, output=None, warn=lambda _: None)
            window = result.estimate.budget.window
            series.append(
                {"line": original[i].line, "tokens": result.tokens_after, "compacted": result.compacted}
            )
            if on_turn is not None:
                on_turn(done, len(starts))
        log.write_bytes(data)
        final = run(log, ropts, output=None, warn=lambda _: None)
        window = final.estimate.budget.window
    return {
        "turns": len(series),
        "compactions": sum(p["compacted"] for p in series) + int(final.compacted),
        "max_tokens": max([p["tokens"] for p in series] + [final.tokens_after]),
        "window": window,
        "series": series,
        "final": {
            "tokens": final.tokens_after,
            "compacted": final.compacted,
            **score(original, final.transcript, probes, written_format(opts, final.transcript)),
        },
    }

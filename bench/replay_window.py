"""Replays real logs as a growing session (`eval --replay`: `run` before each model call, the state carried)
at several windows with each strategy, and checks the promise of the product: the context the next call would
carry is never over the window unless `run` said it cannot fit (exit 5, docs/reference/exit-codes.md).

Prints per log, window and strategy: the model calls, compactions, the largest context, the calls over the
window `run` let through (must be 0) and the calls where it exited 5. The logs: every one with a probe set
(tests/data/probes/sets.json) or in tests/data/real-corpus.json (those whose text is intact).

    python bench/replay_window.py [--windows 30000,55000,100000] [--strategies threshold,...] [FILE ...]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"
STRATEGIES = ("threshold", "sliding-window", "mask")


def corpus() -> list[Path]:
    """The logs with a probe set, then the intact logs of real-corpus.json, each once."""
    sets = json.loads((DATA / "probes" / "sets.json").read_text(encoding="utf-8"))["sets"]
    manifest = json.loads((DATA / "real-corpus.json").read_text(encoding="utf-8"))["logs"]
    names = [s["log"] for s in sets] + [e["file"] for e in manifest if not e["redacted"]]
    return [DATA / n for n in dict.fromkeys(names)]


def replay_steps(log: Path, window: int, strategy: str) -> list[dict[str, Any]]:
    """Each model call of the replay: its line (-1: the whole log), the tokens the call would carry, whether
    `run` compacted, its exit code."""
    from ctxcompact.engine import run
    from ctxcompact.evaluate.core import original_records, read_input
    from ctxcompact.evaluate.replay import turn_starts
    from ctxcompact.options import Options

    opts = Options(window=window, strategy=strategy)
    _, data, fmt = read_input(log, opts)
    original = original_records(data, fmt, opts)
    out: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="ctxcompact-bench-") as tmp:
        path, state = Path(tmp) / "s.jsonl", Path(tmp) / "s.ctxstate.json"
        ropts = dataclasses.replace(opts, state_path=state, use_state=True, reset_state=False, format=fmt,
                                    keep_trailing_results=True)
        for i in [*turn_starts(original), None]:
            path.write_bytes(data if i is None else data[: original[i].offset])
            r = run(path, ropts, output=None, warn=lambda _: None)
            out.append({"line": original[i].line if i is not None else -1, "tokens": r.tokens_after,
                        "compacted": r.compacted, "exit": int(r.exit_code)})
    return out


def summarize(steps: list[dict[str, Any]], window: int) -> dict[str, Any]:
    from ctxcompact.errors import ExitCode

    over = [s for s in steps if s["tokens"] > window and s["exit"] != ExitCode.DOES_NOT_FIT]
    return {"calls": len(steps), "compactions": sum(s["compacted"] for s in steps),
            "max_tokens": max(s["tokens"] for s in steps),
            "over_window": [(s["line"], s["tokens"]) for s in over],
            "exit5": sum(s["exit"] == ExitCode.DOES_NOT_FIT for s in steps)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--windows", default="30000,55000,100000")
    ap.add_argument("--strategies", default=",".join(STRATEGIES))
    ap.add_argument("--json", type=Path, help="write every row to this file")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(REPO))
    windows = [int(w) for w in args.windows.split(",")]
    rows = []
    started = time.monotonic()
    print(f"{'log':<58} {'window':>7} {'strategy':<15} {'calls':>5} {'comp':>4} {'max':>8} {'over':>4} "
          f"{'exit5':>5}")
    for log in args.files or corpus():
        for window in windows:
            for strategy in args.strategies.split(","):
                name = str(log.relative_to(DATA) if log.is_relative_to(DATA) else log)
                row = {"log": name, "window": window, "strategy": strategy,
                       **summarize(replay_steps(log, window, strategy), window)}
                rows.append(row)
                print(f"{name:<58} {window:>7,} {strategy:<15} {row['calls']:>5} {row['compactions']:>4} "
                      f"{row['max_tokens']:>8,} {len(row['over_window']):>4} {row['exit5']:>5}", flush=True)
    over = sum(len(r["over_window"]) for r in rows)
    calls = sum(r["calls"] for r in rows)
    print(f"\n{len(rows)} replays, {calls} model calls, {sum(r['compactions'] for r in rows)} compactions, "
          f"{sum(r['exit5'] for r in rows)} exit 5, over the window without exit 5: {over} "
          f"({time.monotonic() - started:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())

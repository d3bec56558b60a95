"""Recall over successive compactions of a growing session (issue 23 items 4-5).

The log is cut into ``--steps`` growing prefixes (the agent appends to its log between hook calls); `run`
goes on each prefix with the same state, at a window that makes every step compact. After each compaction
the context the next call would see (system + summary + continuation + what follows the watermark) is
scored against every original record it replaced: identifiers (evaluate.identifiers), the user's rules
verbatim, the latest request verbatim; and the summary's tokens as the window counts them (tiktoken
o200k_base times the run's calibration) against its budget. Usage records are stripped first, so a log's
own billing does not decide when it compacts.

    python bench/growth.py tests/data/codex/localpush-rollout-tools.jsonl --window 12000 --steps 4
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import tempfile
from pathlib import Path

import orjson

from ctxcompact import api
from ctxcompact.evaluate.core import original_records
from ctxcompact.evaluate.scores import compare, identifiers_score, latest_request_score, rules_score
from ctxcompact.tokens.calibration import fit_factor
from ctxcompact.tokens.exact import count_text


def _drop_usage(value: object) -> object:
    if isinstance(value, dict):
        return {k: _drop_usage(v) for k, v in value.items() if k != "usage"}
    if isinstance(value, list):
        return [_drop_usage(v) for v in value]
    return value


def strip_usage(line: bytes) -> bytes:
    """The line without what the provider billed (usage, Codex's token_count events): the bench measures
    the summary, not the calibration a log's real usage would drive."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        return line
    payload = obj.get("payload") if isinstance(obj, dict) else None
    if isinstance(payload, dict) and payload.get("type") == "token_count":
        return b""
    return orjson.dumps(_drop_usage(obj)) + b"\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--window", type=int, default=12000)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--show", action="store_true", help="print each summary")
    args = ap.parse_args()
    lines = [strip_usage(ln) for ln in Path(args.log).read_bytes().splitlines(keepends=True)]
    lines = [ln for ln in lines if ln]
    tmp = Path(tempfile.mkdtemp(prefix="ctxgrowth-"))
    try:
        src, out = tmp / "log.jsonl", tmp / "out.jsonl"
        n = 0
        print(f"{'step':>4} {'lines':>6} {'compacted':>9} {'ids kept':>12} {'recall':>7} {'rules':>7} "
              f"{'latest':>6} {'summary':>8} {'budget':>6}")
        for step in range(1, args.steps + 1):
            cut = len(lines) * step // args.steps
            src.write_bytes(b"".join(lines[:cut]))
            opts = api.Options(window=args.window, to="openai")  # the context itself, not an append-only log
            result = api.run(src, opts, output=out, warn=lambda _m: None)
            if not result.compacted:
                print(f"{step:>4} {cut:>6} {'no':>9}")
                continue
            n += 1
            original = original_records(src.read_bytes(), result.estimate.format, opts)
            c = compare(original, result.transcript)
            ids = identifiers_score(c)
            rules = rules_score(c)
            latest = latest_request_score(c)
            summary = result.summary
            assert summary is not None
            cal = result.estimate.calibrated
            rate = cal.slope if cal.slope is not None else fit_factor(cal.factor, cal.default)
            tokens = math.ceil(count_text(summary.text) * rate)  # as the window counts (Calibrated.cost)
            budget = result.estimate.budget.summary_budget
            recall = f"{ids['recall']:.0%}" if ids["recall"] is not None else "-"
            print(f"{step:>4} {cut:>6} {n:>9} {ids['kept']:>5}/{ids['total']:<6} {recall:>7} "
                  f"{rules['kept_verbatim']}/{rules['found']:<5} {latest['kept_verbatim']!s:>6} "
                  f"{tokens:>8} {budget:>6}")
            if args.show:
                print(summary.text)
    finally:
        shutil.rmtree(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Incremental cost: the second `run` on a transcript that grew by 5 records, against the first.

The first `run` on a 100 MB transcript compacts it (the extractive summary) and writes the state with the
watermark and the covered prefix's byte length, SHA-256 and token counts. Then 5 records are appended (a
request, a tool call, its result, an answer, a new request) and `run` goes again with the same state: it
hashes the covered prefix to check it, parses and counts only the new records, and passes the small context
through. Both are timed as whole processes; the first with --reset-state so each repeat starts over.

    python bench/incremental.py              # 100 MB, first run x2, second run x5
    python bench/incremental.py --mb 10
"""

from __future__ import annotations

import argparse
import shutil
import sys

import orjson
from common import OUT, Case, ctxcompact, header, measure, table, transcript

GROWTH = [
    {"role": "user", "content": "Now run the whole test suite and tell me what still fails."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_incr_1",
                "type": "function",
                "function": {"name": "run_shell", "arguments": '{"command": "pytest -q"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_incr_1", "content": "412 passed, 3 failed in 38.2s"},
    {"role": "assistant", "content": "Three tests still fail, all in test_parser.py; looking at them next."},
    {"role": "user", "content": "Go ahead."},
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=100.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--first-runs", type=int, default=2)
    ap.add_argument("--second-runs", type=int, default=5)
    args = ap.parse_args(argv)

    src = transcript(args.mb, args.seed)
    work = OUT / "incremental"
    work.mkdir(parents=True, exist_ok=True)
    base, grown, state, out = (
        work / "base.jsonl",
        work / "grown.jsonl",
        work / "state.json",
        work / "out.jsonl",
    )
    shutil.copyfile(src, base)
    shutil.copyfile(src, grown)
    with grown.open("ab") as f:
        for rec in GROWTH:
            f.write(orjson.dumps(rec) + b"\n")
    mb = base.stat().st_size / 1e6
    header(f"3. incremental run ({mb:.0f} MB transcript, then grown by {len(GROWTH)} records)")
    first = Case(
        "first run (parse, validate, count, compact)",
        ctxcompact("run", str(base), "--state", str(state), "--reset-state", "-o", str(out)),
    )
    second = Case(
        "second run (prefix hashed, 5 records parsed)",
        ctxcompact("run", str(grown), "--state", str(state), "-o", str(out)),
    )
    measure([first], args.first_runs, warmup=0)
    measure([second], args.second_runs, warmup=1)  # the state is the first run's: every repeat is alike
    rows = []
    for c in (first, second):
        rows.append(
            [
                c.name,
                f"{c.wall:.3f}" if c.ok else "n/a",
                c.spread if c.ok else c.error(),
                f"{c.cpu:.3f}" if c.ok else "",
                f"{c.rss:.0f}" if c.ok else "",
            ]
        )
    table(rows, ["case (whole process)", "wall s (median)", "min-max", "cpu s", "peak RSS MiB"])
    if first.ok and second.ok:
        ratio = second.wall / first.wall
        print(f"\nsecond / first = {ratio:.1%} (target <= 10 %: {'met' if ratio <= 0.10 else 'NOT met'})")
        st = orjson.loads(state.read_bytes())
        print(
            f"state: watermark {st['watermark']} records, covered prefix {st['fingerprint']['bytes']:,} bytes"
        )
    return 0 if first.ok and second.ok else 1


if __name__ == "__main__":
    sys.exit(main())

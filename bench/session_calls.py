"""The message-list ``Session``'s cost per call as its list grows (issue 25, item 1: a call pays for its new
messages only): a framework's before-model hook calls ``compact(messages, session=s)`` on every model call
with the list grown by the last turn. A session is grown to each size by calls that add one turn (a request,
a tool call, its result, an answer), then the next calls at that size are timed (process time, the median).

    python bench/session_calls.py                    # sizes 200, 1000, 2000 messages
    python bench/session_calls.py --sizes 200 --calls 5 --only 200   # one size (for callgrind)
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import ctxcompact
from ctxcompact.options import Options


def turn(t: int, chars: int) -> list[dict[str, Any]]:
    """One turn of a coding agent: a request, a tool call, its result, an answer."""
    body = (f"def handle_{t}(request):\n    return process(request, retries={t})\n" * 40)[:chars]
    call = {"id": f"call_{t}", "type": "function",
            "function": {"name": "read_file", "arguments": f'{{"path": "src/m{t}.py"}}'}}
    return [{"role": "user", "content": f"Turn {t}: explain handle_{t} in src/m{t}.py."},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{t}", "content": body},
            {"role": "assistant", "content": f"handle_{t} forwards to process() with {t} retries."}]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="200,1000,2000")
    ap.add_argument("--calls", type=int, default=5, help="timed calls at each size")
    ap.add_argument("--chars", type=int, default=600, help="characters of each tool result")
    ap.add_argument("--exact", default="tiktoken", choices=["tiktoken", "none"])
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    opts = Options(window=10_000_000, exact=args.exact, keep_trailing_results=True)
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    session = ctxcompact.Session()
    ctxcompact.compact(msgs + turn(-1, args.chars), options=opts)  # warm-up: imports, tokenizer, schemas
    t = 0
    grow_s = 0.0
    for size in sizes:
        while len(msgs) < size:
            msgs += turn(t, args.chars)
            t += 1
            t0 = time.process_time()
            ctxcompact.compact(msgs, session=session, options=opts)
            grow_s += time.process_time() - t0
        times = []
        for _ in range(args.calls):
            msgs += turn(t, args.chars)
            t += 1
            t0 = time.process_time()
            r = ctxcompact.compact(msgs, session=session, options=opts)
            times.append((time.process_time() - t0) * 1000)
            assert not r.compacted
        print(f"{len(msgs):5d} messages: per call median {statistics.median(times):7.2f} ms "
              f"(min {min(times):.2f})", flush=True)
    print(f"growing calls in all: {grow_s:.2f} s process time")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

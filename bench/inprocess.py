"""The hook's cost per call in process (issue 27): ``ctxcompact.compact(messages, session=s)`` on a
coding-agent history of about 250 KB that is below the threshold, the call a framework's before-model hook
makes on every model call. Prints the median and the 90th percentile of 50 calls (target: median under 20 ms).

    python bench/inprocess.py                 # 250 KB, 50 calls, tiktoken counts (the default)
    python bench/inprocess.py --kb 1000 --exact none

Each call is given a list one turn longer than the last (the agent's history grows), with one session, the
way a hook sees it; a stateless call (no session) is timed too.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import ctxcompact
from ctxcompact.options import Options


def history(kb: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent. " * 20}]
    t = 0
    while sum(len(str(m)) for m in out) < kb * 1024:
        out.append({"role": "user", "content": f"Turn {t}: look at src/m{t}.py and fix handle_{t}."})
        out.append({"role": "assistant", "content": None, "tool_calls": [{
            "id": f"call_{t}", "type": "function",
            "function": {"name": "read_file", "arguments": f'{{"path": "src/m{t}.py"}}'}}]})
        out.append({"role": "tool", "tool_call_id": f"call_{t}",
                    "content": f"def handle_{t}(req):\n    return process(req, retries={t})\n" * 25})
        out.append({"role": "assistant", "content": f"handle_{t} forwards to process() with {t} retries."})
        t += 1
    return out


def timed(calls: int, msgs: list[dict[str, Any]], opts: Options,
          session: ctxcompact.Session | None) -> list[float]:
    times = []
    for k in range(calls):
        cur = [*msgs, {"role": "user", "content": f"next step {k}"}, {"role": "assistant", "content": "ok"}]
        msgs = cur
        t0 = time.perf_counter()
        r = ctxcompact.compact(cur, session=session, options=opts)
        times.append((time.perf_counter() - t0) * 1000)
        assert not r.compacted, "the history must stay below the threshold"
    return times


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kb", type=int, default=250)
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--exact", default="tiktoken", choices=["tiktoken", "none"])
    args = ap.parse_args(argv)
    msgs = history(args.kb)
    size = sum(len(ctxcompact_line(m)) for m in msgs)
    opts = Options(window=1_000_000, exact=args.exact, keep_trailing_results=True)
    ctxcompact.compact(msgs, options=opts)  # warm-up: imports, tokenizer, schemas
    print(f"history: {len(msgs)} messages, {size / 1024:.0f} KB as JSONL; exact={args.exact}; "
          f"{args.calls} calls each")
    for name, session in (("session (in memory)", ctxcompact.Session()), ("stateless", None)):
        times = timed(args.calls, msgs, opts, session)
        p90 = statistics.quantiles(times, n=10)[-1]
        print(f"{name:22s} median {statistics.median(times):6.1f} ms   p90 {p90:6.1f} ms   "
              f"max {max(times):6.1f} ms")
    return 0


def ctxcompact_line(m: dict[str, Any]) -> bytes:
    import orjson

    return orjson.dumps(m) + b"\n"


if __name__ == "__main__":
    raise SystemExit(main())

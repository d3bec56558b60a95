"""Where the time goes, step by step, in one process: `estimate` (read lines, decode, the whole pipeline)
and the steps of `run` (read, parse + schema, clean, ranks, tokenize, summarize, hash, write).

Each step is timed alone (``time.perf_counter`` around the same calls the pipeline makes), so the figures
add up to roughly a whole `run`, start-up aside.

    python bench/where.py            # 100 MB
    python bench/where.py --mb 10
"""

from __future__ import annotations

import argparse
import hashlib
import io
import sys
import time
from collections.abc import Callable
from typing import Any

import orjson
from common import OUT, header, table, transcript


def timed(rows: list[list[str]], name: str, fn: Callable[[], Any], total_mb: float) -> Any:
    start = time.perf_counter()
    result = fn()
    s = time.perf_counter() - start
    rows.append([name, f"{s:.2f}", f"{total_mb / s:.0f}" if s > 0 else ""])
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=100.0)
    args = ap.parse_args(argv)
    path = transcript(args.mb)
    mb = path.stat().st_size / 1e6

    from ctxcompact import engine, run_setup
    from ctxcompact.clean import clean
    from ctxcompact.context import Context
    from ctxcompact.formats import read_transcript, write_transcript
    from ctxcompact.options import Options
    from ctxcompact.pipeline import estimate_context
    from ctxcompact.reader import iter_lines_at
    from ctxcompact.source import InputData
    from ctxcompact.strategies import get_strategy
    from ctxcompact.strategies.base import StrategyInput
    from ctxcompact.tokens import exact
    from ctxcompact.tokens.counts import count_records

    header(f"where the time goes ({mb:.0f} MB openai transcript, one process, seconds)")
    rows: list[list[str]] = []

    def read_lines() -> None:
        with path.open("rb") as f:
            for _ in iter_lines_at(f):
                pass

    def decode() -> None:
        with path.open("rb") as f:
            for _, _, raw in iter_lines_at(f):
                orjson.loads(raw)

    timed(rows, "estimate: read lines", read_lines, mb)
    timed(rows, "estimate: read lines + orjson decode", decode, mb)
    timed(rows, "estimate: the whole pipeline, --exact none",
          lambda: engine.estimate(str(path), Options(exact="none", use_state=False)), mb)

    inp = timed(rows, "run: read the file (InputData)", lambda: InputData.load(str(path)), mb)
    timed(rows, "run: SHA-256 of the whole file", lambda: hashlib.sha256(inp.data).hexdigest(), mb)
    res = timed(rows, "run: parse into the model, no schema", lambda: read_transcript(io.BytesIO(inp.data),
                                                                                       schema=False), mb)
    timed(rows, "run: parse into the model + JSON Schema", lambda: read_transcript(io.BytesIO(inp.data)), mb)
    cleaned = timed(rows, "run: clean", lambda: clean(res.transcript), mb)
    timed(rows, "run: tiktoken ranks (parse + Encoding)", lambda: exact.get_encoding("o200k_base"), mb)
    opts = Options(use_state=False)
    counts = timed(rows, "run: tokenize (count_records)",
                   lambda: count_records(cleaned.transcript.records, opts), mb)
    ctx = Context(cleaned.transcript, len(res.transcript.records), 0, len(inp.data), 0, [])
    budget = run_setup.budget_for(opts)
    report = estimate_context(ctx, opts, None, budget, None)
    del counts
    si = StrategyInput(ctx, opts, budget, None, report, lambda m: None)
    strategy = get_strategy(opts.strategy)
    outcome = timed(rows, "run: compact (extractive summary)", lambda: strategy.apply(si), mb)
    t = outcome.transcript if outcome is not None else cleaned.transcript
    timed(rows, "run: write the output", lambda: (OUT / "where_out.jsonl").write_bytes(b"".join(
        write_transcript(t))), mb)
    table(rows, ["step", "seconds", "MB/s"])
    return 0


if __name__ == "__main__":
    sys.exit(main())

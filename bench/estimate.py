"""Heuristic estimate (`estimate --exact none`) against the floor of just parsing the JSON, and its memory.

Generates (or reuses) bench/out/openai_<MB>mb_seed<seed>.jsonl and times, as whole processes, in turn:

  floor      python: orjson.loads over every line, nothing else
  estimate   ctxcompact estimate --exact none --json --no-state FILE   (the streaming fast path)
  full path  the same report through the full model (build_context + clean), for comparison

Prints MB/s, CPU, peak RSS and the throughput ratio estimate/floor (target: >= 60 %). Peak RSS of the
estimate on files of two sizes shows memory bounded by the largest record, not the file. ``--stats`` also
prints the numbers behind calibration.DEFAULT_EXACT_FACTOR (o200k per chars/4 token, cl100k vs o200k,
framing).

    python bench/estimate.py               # 100 MB, 5 runs
    python bench/estimate.py --mb 5 --runs 3
"""

from __future__ import annotations

import argparse
import sys

import orjson
from common import PY, TEXTS_PRELUDE, Case, ctxcompact, header, measure, table, transcript

FLOOR = """
import sys, orjson
n = 0
with open(sys.argv[1], "rb") as f:
    for line in f:
        if line.strip():
            orjson.loads(line)
            n += 1
print(n)
"""

FULL = """
import sys
from ctxcompact import engine
from ctxcompact.options import Options
from ctxcompact import streaming
streaming.STREAMING_FROM_BYTES = 1 << 62  # the held route
r = engine.estimate(sys.argv[1], Options(exact="none", use_state=False))
print(r.heuristic)
"""

# The numbers behind calibration.DEFAULT_EXACT_FACTOR, from the text of every message.
STATS = TEXTS_PRELUDE + """
o200k, cl100k = get_encoding("o200k_base"), get_encoding("cl100k_base")
sample, size = [], 0
for t in texts:
    if size >= int(sys.argv[2]):
        break
    sample.append(t)
    size += len(t)
print(orjson.dumps({
    "messages": len(texts), "chars": sum(map(len, texts)),
    "o200k": sum(len(o200k.encode_ordinary(t)) for t in texts),
    "heuristic": sum((len(t) + 3) // 4 for t in texts),
    "o200k_sample": sum(len(o200k.encode_ordinary(t)) for t in sample),
    "cl100k_sample": sum(len(cl100k.encode_ordinary(t)) for t in sample),
}).decode())
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=100.0, help="size of the generated transcript (default 100)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--no-full", action="store_true", help="skip the (slow) full-path comparison")
    ap.add_argument("--stats", action="store_true", help="also print the calibration numbers")
    ap.add_argument("--sample-mb", type=float, default=10.0, help="text sampled for the cl100k comparison")
    args = ap.parse_args(argv)

    path = transcript(args.mb, args.seed)
    small = transcript(max(9.0, args.mb / 10), args.seed)  # still streamed (streaming.STREAMING_FROM_BYTES)
    mb = path.stat().st_size / 1e6
    header(f"1. heuristic estimate vs the orjson floor ({mb:.0f} MB openai transcript)")
    cases = [
        Case("floor: orjson.loads per line", [PY, "-c", FLOOR, str(path)]),
        Case(
            "estimate --exact none",
            ctxcompact("estimate", "--exact", "none", "--json", "--no-state", str(path)),
        ),
        Case(
            f"estimate --exact none, {small.stat().st_size / 1e6:.0f} MB file",
            ctxcompact("estimate", "--exact", "none", "--json", "--no-state", str(small)),
        ),
    ]
    if not args.no_full:
        cases.append(Case("full path (model + clean), same report", [PY, "-c", FULL, str(path)]))
    measure(cases, args.runs)
    floor, est = cases[0], cases[1]
    rows = []
    for c in cases:
        if not c.ok:
            rows.append([c.name, "n/a", "", "", "", c.error()])
            continue
        size = small.stat().st_size / 1e6 if c is cases[2] else mb
        rows.append(
            [c.name, f"{c.wall:.3f}", c.spread, f"{size / c.wall:.0f}", f"{c.cpu:.3f}", f"{c.rss:.0f}"]
        )
    table(rows, ["case (whole process)", "wall s (median)", "min-max", "MB/s", "cpu s", "peak RSS MiB"])
    if floor.ok and est.ok:
        ratio = floor.wall / est.wall
        verdict = "met" if ratio >= 0.60 else "NOT met"
        print(f"\nthroughput estimate / floor = {ratio:.0%} (target >= 60 %: {verdict})")
        print(
            f"peak RSS: {est.rss:.0f} MiB on {mb:.0f} MB vs {cases[2].rss:.0f} MiB on "
            f"{small.stat().st_size / 1e6:.0f} MB (streaming: memory follows the largest record, "
            "not the file)"
        )
    if len(cases) > 3 and cases[3].ok and est.ok:
        print(
            f"fast path vs full path: {cases[3].wall / est.wall:.1f}x faster, "
            f"{cases[3].rss / est.rss:.0f}x less memory"
        )

    if args.stats:
        from common import run_once

        s = run_once([PY, "-c", STATS, str(path), str(int(args.sample_mb * 1e6))])
        if s.code == 0:
            st = orjson.loads(s.stdout)
            msgs = st["messages"]
            framing = 3 * msgs + 3  # OpenAI chat format: 3 tokens per message + 3 to prime the reply
            print("\ncalibration numbers (see ctxcompact/tokens/calibration.py):")
            print(f"  messages {msgs}, chars {st['chars']}, o200k tokens {st['o200k']}")
            print(f"  o200k tokens per ceil(chars/4) token: {st['o200k'] / max(1, st['heuristic']):.3f}")
            print(
                f"  cl100k / o200k on a {args.sample_mb:g} MB sample: "
                f"{st['cl100k_sample'] / max(1, st['o200k_sample']):.3f}"
            )
            print(
                "  per-message framing (3/message + 3) as a share of o200k: "
                f"{framing / max(1, st['o200k']):.2%}"
            )
    return 0 if all(c.ok for c in cases) else 1


if __name__ == "__main__":
    sys.exit(main())

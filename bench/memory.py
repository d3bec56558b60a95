"""Memory: peak RSS of `run` (extractive summarizer) and of `estimate` against the file's size, and where the
memory of `run` goes, step by step.

By default on the 100 MB transcript; --gb 1 builds a 1 GB transcript (ten copies of the 100 MB one, call ids
renamed per copy so they stay unique) and runs once on it, for the report (minutes, several GB of RAM).

  run           ctxcompact run FILE --no-state -o OUT            (validate, clean, count, compact, write)
  estimate      ctxcompact estimate --exact none / tiktoken       (streaming: bounded by the largest record)
  steps         in one process: RSS after reading the bytes, parsing the model, cleaning, counting

    python bench/memory.py             # 100 MB
    python bench/memory.py --gb 1      # the 1 GB run (once)
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import orjson
from common import OUT, PY, Case, ctxcompact, header, measure, run_once, table, transcript

STEPS = """
import io, sys, orjson
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20
steps = [("interpreter + ctxcompact imported", 0.0)]
from ctxcompact.source import InputData
from ctxcompact.tokens.counts import count_records
from ctxcompact.formats import read_transcript
from ctxcompact.clean import clean
from ctxcompact.options import Options
steps[0] = (steps[0][0], rss())
inp = InputData.load(sys.argv[1]); steps.append(("InputData: the whole file as bytes", rss()))
res = read_transcript(io.BytesIO(inp.data), "auto", schema=False)
steps.append(("model: records (raw line bytes + decoded dicts + blocks)", rss()))
cleaned = clean(res.transcript); steps.append(("clean (copies only what it changes)", rss()))
counts = count_records(cleaned.transcript.records, Options(exact="tiktoken"))
steps.append(("exact counts (ranks + one batch of token ids)", rss()))
print(orjson.dumps(steps).decode())
"""


# gen_openai's ids are call_<seed hex><8 digits>: a prefix per copy keeps them unique
CONCAT = """
import sys
src, dst, copies = sys.argv[1], sys.argv[2], int(sys.argv[3])
data = open(src, "rb").read()
with open(dst, "wb") as f:
    for k in range(copies):
        f.write(data if k == 0 else data.replace(b'"call_1', f'"call_c{k}x'.encode()))
"""


def gigabyte(src: Path, copies: int) -> Path:
    path = OUT / f"openai_{copies * 100}mb_concat.jsonl"
    if path.exists():
        return path
    print(f"building {path.name} from {copies} copies of {src.name} …", file=sys.stderr, flush=True)
    tmp = path.with_name(path.name + ".tmp")
    # in a child: on Linux a child's peak RSS starts at its parent's size when forked, so the bench
    # process itself must stay small or it would inflate every figure it measures
    subprocess.run([PY, "-c", CONCAT, str(src), str(tmp), str(copies)], check=True)
    tmp.replace(path)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=100.0)
    ap.add_argument("--gb", type=int, default=0, help="build an N GB transcript and run once on it")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--no-steps", action="store_true")
    args = ap.parse_args(argv)
    path = transcript(args.mb)
    if args.gb:
        path = gigabyte(path, args.gb * 10)
    size = path.stat().st_size / 2**20
    header(f"4. memory ({path.stat().st_size / 1e6:.0f} MB = {size:.0f} MiB openai transcript)")
    out = OUT / "memory_out.jsonl"
    cases = [
        Case(
            "run (extractive), --no-state", ctxcompact("run", str(path), "--no-state", "-o", str(out), "-q")
        ),
        Case(
            "estimate --exact none",
            ctxcompact("estimate", "--exact", "none", "--no-state", "--json", str(path)),
        ),
        Case("estimate --exact tiktoken", ctxcompact("estimate", "--no-state", "--json", str(path))),
    ]
    measure(cases, args.runs, warmup=0)
    rows = []
    for c in cases:
        if c.ok:
            rows.append([c.name, f"{c.wall:.1f}", f"{c.rss:.0f}", f"{c.rss / size:.2f}x"])
        else:
            rows.append([c.name, "n/a", "", c.error()])
    table(rows, ["case (whole process)", "wall s", "peak RSS MiB", "peak / file size"])
    run = cases[0]
    if run.ok:
        verdict = "met" if run.rss / size < 1.5 else "NOT met"
        print(f"\nrun: peak RSS {run.rss / size:.2f}x the file (target < 1.5x: {verdict})")
    longest = max(len(line) for line in path.open("rb")) / 2**20
    print(
        f"largest record: {longest:.2f} MiB; estimate peaks: "
        + ", ".join(f"{c.name} {c.rss:.0f} MiB" for c in cases[1:] if c.ok)
    )
    if not args.no_steps and not args.gb:
        s = run_once([PY, "-c", STEPS, str(path)])
        if s.code == 0:
            print("\nwhere the memory of run goes (resident MiB after each step, one process):")
            prev = 0.0
            for name, mib in orjson.loads(s.stdout):
                print(f"  {mib:7.0f}  (+{mib - prev:5.0f})  {name}")
                prev = mib
        else:
            print(f"steps failed: {s.stderr.decode()[-300:]}")
    return 0 if all(c.ok for c in cases) else 1


if __name__ == "__main__":
    sys.exit(main())

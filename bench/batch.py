"""Many transcripts: `ctxcompact estimate DIR --json` (all cores) against a shell loop that starts the CLI
once per file, in files per second.

Generates 1,000 small openai transcripts (~20 kB each, different seeds) in bench/out/many/ once. The loop is
timed over the first --loop-files of them (a process per file costs the same for each; 1,000 would take
minutes) and its rate compared with the batch's over all 1,000. Both use the same --exact mode.

    python bench/batch.py                      # --exact none
    python bench/batch.py --exact tiktoken
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from common import OUT, Case, ctxcompact, gen_openai, header, measure, table


def corpus(n: int, kb: float) -> Path:
    root = OUT / f"many_{n}x{kb:g}kb"
    done = root / ".complete"
    if not done.exists():
        print(f"generating {n} transcripts in {root} …", file=sys.stderr, flush=True)
        root.mkdir(parents=True, exist_ok=True)
        for i in range(n):
            gen_openai.write(root / f"session_{i:04d}.jsonl", kb / 1000, seed=1000 + i)
        done.write_text("")
    return root


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--kb", type=float, default=20.0)
    ap.add_argument("--loop-files", type=int, default=100)
    ap.add_argument("--exact", choices=["none", "tiktoken"], default="none")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args(argv)
    root = corpus(args.files, args.kb)
    files = sorted(root.glob("*.jsonl"))
    loop_files = files[: args.loop_files]
    header(f"6. many transcripts ({len(files)} files of ~{args.kb:g} kB, --exact {args.exact})")
    cmd = shlex.join(ctxcompact("estimate", "--exact", args.exact, "--no-state", "--json"))
    names = " ".join(shlex.quote(str(f)) for f in loop_files)
    loop = f'for f in {names}; do {cmd} "$f" >/dev/null; done'
    cases = [
        Case(
            f"estimate DIR --json (all cores), {len(files)} files",
            ctxcompact("estimate", str(root), "--exact", args.exact, "--no-state", "--json"),
        ),
        Case(
            f"estimate DIR --json --jobs 1, {len(files)} files",
            ctxcompact("estimate", str(root), "--exact", args.exact, "--no-state", "--json", "--jobs", "1"),
        ),
        Case(f"shell loop, a process per file, {len(loop_files)} files", ["sh", "-c", loop]),
    ]
    measure(cases, args.runs)
    counts = [len(files), len(files), len(loop_files)]
    rows = []
    for c, n in zip(cases, counts, strict=True):
        if c.ok:
            rows.append(
                [c.name, f"{c.wall:.2f}", c.spread, f"{n / c.wall:.0f}", f"{c.cpu:.2f}", f"{c.rss:.0f}"]
            )
        else:
            rows.append([c.name, "n/a", c.error(), "", "", ""])
    table(rows, ["case (whole process)", "wall s (median)", "min-max", "files/s", "cpu s", "peak RSS MiB"])
    if all(c.ok for c in cases):
        rate = [n / c.wall for c, n in zip(cases, counts, strict=True)]
        print(
            f"\nbatch (all cores) = {rate[0] / rate[2]:.0f}x the shell loop's files/s; "
            f"all cores vs --jobs 1: {rate[0] / rate[1]:.2f}x"
        )
        lines = cases[0].samples[-1].stdout.splitlines()
        print(f"rows printed: {len(lines) - 1} + totals")
    return 0 if all(c.ok for c in cases) else 1


if __name__ == "__main__":
    sys.exit(main())

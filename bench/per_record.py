"""Memory per record (issue 19, "memory per record"): peak RSS of `validate`, `estimate` and `run` on a file
of many tiny lines, against the same commands on an empty-ish file, per record.

    .venv/bin/python bench/per_record.py                 # 200,000 lines (~6.5 MB), seconds
    .venv/bin/python bench/per_record.py --lines 2000000 # the issue's 2 million lines (65 MB), minutes, GBs

Each command runs in a child; its peak RSS is ``ru_maxrss`` of ``os.wait4`` (what ``/usr/bin/time -v``
reports). "per record" = (peak − peak on a 2-line file) / lines; "× file" = peak / file size.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

LINES = (b'{"role":"user","content":"hi"}\n', b'{"role":"assistant","content":"ok"}\n')
COMMANDS = {
    "validate": ["validate"],
    "estimate --exact none": ["estimate", "--exact", "none", "--window", "1000000000"],
    "estimate": ["estimate", "--window", "1000000000"],
    "run --no-state": ["run", "--no-state", "--exact", "none", "--window", "1000000000"],
}


def make(path: Path, lines: int) -> None:
    pair = LINES[0] + LINES[1]
    with open(path, "wb") as f:
        f.write(pair * (lines // 2))


def peak_mib(args: list[str]) -> float:
    with open(os.devnull, "wb") as devnull:
        proc = subprocess.Popen([sys.executable, "-m", "ctxcompact", *args], stdout=devnull,
                                stderr=subprocess.PIPE)
        assert proc.stderr is not None
        err = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"{args}: {err.decode(errors='replace')}")
    return usage.ru_maxrss / 1024  # KiB on Linux


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lines", type=int, default=200_000)
    ap.add_argument("--only", nargs="*", help="command names to run (default: all)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        small, big = Path(tmp) / "small.jsonl", Path(tmp) / "big.jsonl"
        make(small, 2)
        make(big, args.lines)
        size = big.stat().st_size
        print(f"{args.lines:,} lines, {size / 2**20:.1f} MiB\n")
        print("| command | peak | × file | per record |\n|---|---|---|---|")
        for name, cmd in COMMANDS.items():
            if args.only and name not in args.only:
                continue
            base = peak_mib([cmd[0], str(small), *cmd[1:]])
            peak = peak_mib([cmd[0], str(big), *cmd[1:]])
            per = (peak - base) * 2**20 / args.lines
            print(f"| {name} | {peak:,.0f} MiB | {peak * 2**20 / size:.1f} | {per:,.0f} B |", flush=True)


if __name__ == "__main__":
    main()

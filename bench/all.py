"""Run every bench of issue 9 in turn and keep the report: ``python bench/all.py``.

Each section is one script of this folder (each also runs alone, see bench/README.md). The combined output
goes to stdout and to bench/out/results.md. Inputs are generated into bench/out/ on first use (100 MB by
default; nothing larger unless --gb1 asks for the 1 GB memory run).

    python bench/all.py            # everything at 100 MB (about 10 minutes on 2 cores)
    python bench/all.py --quick    # 10 MB, fewer runs (about 2 minutes)
    python bench/all.py --gb1      # also the 1 GB memory run (several minutes, ~7 GB of RAM)
    python bench/all.py --issue18  # only issue 18's table (bench/hook.py), on each shape, ~5 minutes
    python bench/all.py --table    # issue 25's table on four shapes (bench/table.py) and the per-stage
                                   # profile of the compacting run (bench/stages.py), ~40 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

from common import HERE, OUT, PY, machine


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--gb1", action="store_true")
    ap.add_argument("--issue18", action="store_true", help="only the hook's cost per call (bench/hook.py)")
    ap.add_argument("--table", action="store_true",
                    help="only issue 25's table (bench/table.py) and the stage profile (bench/stages.py)")
    ap.add_argument("--no-clis", action="store_true", help="skip installing and timing ttok / count-tokens")
    args = ap.parse_args(argv)
    mb = ["--mb", "10"] if args.quick else []
    few = args.quick
    steps: list[list[str]] = [
        ["estimate.py", *mb, "--runs", "3" if few else "7"],
        ["exact.py", *mb, "--runs", "1" if few else "3", *(["--no-clis"] if args.no_clis else [])],
        ["incremental.py", *mb, "--first-runs", "1" if few else "2", "--second-runs", "3" if few else "5"],
        ["memory.py", *mb],
        ["startup.py", "--runs", "10" if few else "30"],
        ["where.py", *mb],
        ["batch.py", "--files", "200" if few else "1000", "--loop-files", "20" if few else "100",
         "--runs", "1" if few else "3"],
    ]
    if args.issue18:
        steps = [["hook.py", *mb]]
    if args.table:
        table = ["--mb", "2", "--big-mb", "0", "--runs", "1"] if args.quick else []
        steps = [["table.py", *table, *(["--gb1"] if args.gb1 else [])],
                 ["stages.py", "--mb", "2" if args.quick else "5"]]
    elif args.gb1:
        steps.append(["memory.py", "--gb", "1", "--no-steps"])
    OUT.mkdir(exist_ok=True)
    report = [f"# ctxcompact bench, {machine()}\n"]
    status = 0
    for step in steps:
        start = time.perf_counter()
        print(f"\n>>> python bench/{' '.join(step)}", flush=True)
        argv = [PY, str(HERE / step[0]), *step[1:]]
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        sys.stdout.write(proc.stdout)
        sys.stderr.write(proc.stderr)
        report.append(f"\n<!-- python bench/{' '.join(step)}: {time.perf_counter() - start:.0f} s -->\n")
        report.append(proc.stdout)
        status = status or proc.returncode
    (OUT / "results.md").write_text("".join(report))
    print(f"\nreport written to {OUT / 'results.md'}")
    return status


if __name__ == "__main__":
    sys.exit(main())

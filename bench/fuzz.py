"""Fuzz campaign (issue 19): mutate real logs and run every ctxcompact command on each mutant in-process.

    .venv/bin/python bench/fuzz.py --campaign 2000              # 2,000 mutants on every core
    .venv/bin/python bench/fuzz.py --campaign 500 --seed 7 --save   # also minimize and keep new crashes
    .venv/bin/python bench/fuzz.py --campaign 300 --small --json out.json

Mutants are deterministic in (``--seed``, mutant number). ``--small`` uses the bounded sizes of the pytest
run (seeds cut to 40 lines, strings up to 200 k characters); the default takes whole seeds and strings up to
2 M characters. ``--save`` minimizes each crashing mutant by line deletion and adds it to ``tests/data/fuzz``
(one per crash signature), which ``tests/cli/test_fuzz.py`` replays (the harness is
``tests/fuzz_harness.py``). The summary counts internal errors per command and per mutation class. Exit 1
when any mutant crashed.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import fuzz_harness as harness


def _work(args: tuple[int, int, int, bool, float, list[str] | None]) -> harness.Report:
    start, count, seed, small, timeout, commands = args
    limits = harness.PYTEST_LIMITS if small else harness.CAMPAIGN_LIMITS
    return harness.campaign(count, seed, limits, start=start, commands=commands, timeout=timeout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--campaign", type=int, default=300, metavar="N", help="number of mutants")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start", type=int, default=0, help="first mutant number")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--small", action="store_true", help="bounded sizes (as the pytest run)")
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds per command before 'timeout'")
    ap.add_argument("--only", action="append", choices=list(harness.COMMANDS), help="commands to run")
    ap.add_argument("--save", action="store_true", help="minimize crashing mutants into tests/data/fuzz")
    ap.add_argument("--json", metavar="PATH", help="write every finding as JSON")
    a = ap.parse_args()

    t0 = time.monotonic()
    jobs = max(1, min(a.jobs, a.campaign))
    # interleaved slices of 10 so each worker gets a similar mix
    slices = [(s, min(10, a.start + a.campaign - s), a.seed, a.small, a.timeout, a.only)
              for s in range(a.start, a.start + a.campaign, 10)]
    report = harness.Report()
    if jobs == 1:
        for sl in slices:
            report.merge(_work(sl))
    else:
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            for part in pool.imap_unordered(_work, slices):
                report.merge(part)
                print(f"\r{report.mutants}/{a.campaign} mutants, {len(report.crashing)} crashes",
                      end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
    report.seconds = time.monotonic() - t0
    print(report.summary())
    if a.json:
        Path(a.json).write_text(json.dumps({"mutants": report.mutants, "runs": report.runs,
                                            "seconds": round(report.seconds, 1),
                                            "findings": [f.to_json() for f in report.findings]}, indent=1))
    if a.save:
        saved = 0
        known = {e["signature"] for e in harness.load_manifest()["entries"]}
        for mutant, finding in report.crashing:
            if finding.signature in known:
                continue
            small = harness.minimize_finding(mutant, finding)
            if harness.save_to_corpus(small, finding, a.seed) is not None:
                saved += 1
            known.add(finding.signature)
        print(f"saved {saved} new crashing inputs to {harness.CORPUS}")
    return 1 if any(f.kind != "timeout" for f in report.findings) else 0


if __name__ == "__main__":
    raise SystemExit(main())

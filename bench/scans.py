"""Linear text scans (issue 19, "quadratic paths"): every adversarial case of ``tests/scan_cases.py`` timed
at n, 2n, 4n, … (best of 3, in-process), with the ratio of each doubling: about 2 is linear, 4 quadratic.

    .venv/bin/python bench/scans.py                 # each case from its test size, 3 doublings
    .venv/bin/python bench/scans.py --scale 4 --doublings 4    # the long campaign: 4× larger, 4 doublings
    .venv/bin/python bench/scans.py --old           # also the patterns as they were, at small sizes
    .venv/bin/python bench/scans.py --only "tiktoken path"    # the cases whose name holds the text

``--old`` swaps the three old patterns back in (the error-line ``^\\s*``, the injected span's
``(?:\\s[^>]*)?>``, the unbounded URL scheme) and times them from n = 2,500: they are quadratic, so larger
sizes take minutes. Not a test: prints a table, exit 0 (the suite's bounded check is
``tests/facts/test_linear_scans.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import re
import sys
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import scan_cases

from ctxcompact.evaluate import identifiers
from ctxcompact.facts import files, outcomes, text


@contextlib.contextmanager
def old_patterns() -> Iterator[None]:
    """The three patterns as they were before issue 19, swapped in for the duration."""
    saved = (outcomes._ERROR_LINE, text._remove_injected, files._URL, identifiers._URL)
    old_span = re.compile(rf"<({text._TAG_ALT})(?:\s[^>]*)?>.*?(?:</\1\s*>|\Z)", re.S)
    outcomes._ERROR_LINE = re.compile(outcomes._ERROR_LINE.pattern.replace(r"^[^\S\n]*", r"^\s*"), re.M)
    text._remove_injected = lambda s: old_span.sub("", s)  # type: ignore[assignment]
    files._URL = re.compile(r"\b[a-zA-Z][\w+.-]*://\S+")
    identifiers._URL = re.compile(r"\b[a-zA-Z][\w+.-]*://[^\s<>\"'`)\]]+")
    try:
        yield
    finally:
        outcomes._ERROR_LINE, text._remove_injected, files._URL, identifiers._URL = saved  # type: ignore


def table(start: dict[str, int], doublings: int, label: str, only: str = "") -> None:
    print(f"\n{label}")
    print("| case | n | time at n … | ratios |\n|---|---|---|---|")
    for case in scan_cases.CASES:
        if only not in case.name:
            continue
        n0 = start[case.name]
        times = [scan_cases.best_time(case, n0 * 2**k) for k in range(doublings + 1)]
        ratios = " ".join(f"{b / max(a, 1e-9):.1f}" for a, b in itertools.pairwise(times))
        shown = " → ".join(f"{t:.3f}s" for t in times)
        print(f"| {case.name} | {n0:,} | {shown} | {ratios} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every case's starting size")
    ap.add_argument("--doublings", type=int, default=3)
    ap.add_argument("--old", action="store_true", help="also time the old patterns (small sizes)")
    ap.add_argument("--only", default="", help="only the cases whose name holds this text")
    args = ap.parse_args()
    table({c.name: max(1, int(c.n * args.scale)) for c in scan_cases.CASES}, args.doublings, "now", args.only)
    if args.old:
        with old_patterns():
            table({c.name: 2_500 for c in scan_cases.CASES}, 2, "the patterns before issue 19")


if __name__ == "__main__":
    main()

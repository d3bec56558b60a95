"""Replays every provider usage recorded in real logs (tests/data/**/ and tests/data/real/**/): each request
estimated from what was known before it, exactly as `run` would have, against what the provider billed.
Prints, per log: the points, the mean absolute error and how many points were more than 5 % under the bill,
for the affine model `run` uses and, side by side, the earlier rule (one factor from the last usage, never
below it). The first request of a log has nothing before it to learn from (only the default factor), so the
figures are over the requests after it; the first is shown apart. Targets
(docs/concepts/calibration.md#calibration): mean error ≤ 3
%, > 5 % under at ≤ 15 % of the points.

    python bench/calibration.py [--exact none] [FILE ...]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def earlier_rule(points: list[tuple[int, int]], visible: int) -> int:
    """The rule before the affine model: factor = clamp(real / visible, 1, 5) of the last request, never
    below its real figure."""
    if not points:
        return math.ceil(visible * 1.25)
    v, r = points[-1]
    factor = min(5.0, max(1.0, r / v)) if v else 1.25
    return max(r, math.ceil(visible * factor))


def _corpus() -> list[Path]:
    """The real logs of tests/data/real-corpus.json whose text is intact: a log whose publisher replaced the
    conversation by placeholders keeps its usage figures but not what they measured."""
    import json

    manifest = json.loads((REPO / "tests" / "data" / "real-corpus.json").read_text(encoding="utf-8"))
    skipped = [e["file"] for e in manifest["logs"] if e["redacted"] and e["usage_points"]]
    if skipped:
        print(f"skipped, text redacted by the publisher: {', '.join(skipped)}\n")
    return [REPO / "tests" / "data" / e["file"] for e in manifest["logs"] if not e["redacted"]]


def _shown(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--exact", default="tiktoken", choices=["tiktoken", "none"])
    args = ap.parse_args(argv)
    from ctxcompact import api
    from ctxcompact.evaluate.calibration import replay_calibration

    files = [Path(f) for f in args.files] or _corpus()
    opts = api.Options(exact=args.exact, use_state=False)
    print("| log | points | mean error (affine) | > 5 % under | mean error (earlier rule) | > 5 % under | "
          "first request |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    totals: list[tuple[float, float]] = []
    for path in files:
        try:
            replay = replay_calibration(path, opts)
        except api.InputError as exc:
            print(f"| {_shown(path)} | error: {exc} | | | | |")
            continue
        if not replay:
            continue
        done: list[tuple[int, int]] = []
        old = []
        for p in replay:
            old.append((earlier_rule(done, p.visible) - p.real) / p.real)
            done.append((p.visible, p.real))
        new = [p.error for p in replay][1:]
        old = old[1:]
        totals.extend(zip(new, old, strict=True))
        print(f"| {_shown(path)} | {len(replay)} | {_row(new)} | {_row(old)} | "
              f"{replay[0].error:+.0%} |")
    if totals:
        affine, earlier = [a for a, _ in totals], [b for _, b in totals]
        print(f"| all logs | {len(totals)} | {_row(affine)} | {_row(earlier)} | |")
    return 0


def _row(errors: list[float]) -> str:
    if not errors:
        return "- | -"
    n = len(errors)
    under = sum(e < -0.05 for e in errors)
    return f"{sum(abs(e) for e in errors) / n:.1%} | {under} ({under / n:.0%})"


if __name__ == "__main__":
    sys.exit(main())

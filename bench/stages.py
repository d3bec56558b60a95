"""Where the compacting `run` spends its time, stage by stage, on each shape: cProfile of one whole `run`
process, its functions grouped by the ctxcompact module they belong to (so it does not depend on the
engine's internals: a function moved between modules moves between stages only if it changes module).

Stages (by module; see STAGES): start-up (imports), read (source, reader, formats' parsers, the model),
validate (schemacheck, validate, jsonschema), clean, count (tokens/*, tiktoken), decide (engine, context,
budget, report, calibration), state (state files, fingerprint, count cache), facts (facts/*), summary
(strategies/*, summarizers/*: render and fit), write (atomic, paths, the formats' writers), cli.

Time spent outside ctxcompact (a builtin, the standard library, orjson, regex) is charged to the ctxcompact
functions that called it, in proportion to the time each caller spent in it (cProfile's caller table), so
``orjson.loads`` called by a format's reader counts as read. Profiling slows Python code more than C code:
the shares are the figures, not the seconds.

    python bench/stages.py                          # 20 MB per shape, each shape once
    python bench/stages.py --mb 5 --shapes mid --top 15
"""

from __future__ import annotations

import argparse
import pstats
import shutil
import sys
from collections import defaultdict
from pathlib import Path

from common import OUT, PY, child_env, header, run_once
from hook import shape_file

# (path fragment inside ctxcompact/, stage): the first match wins
STAGES: list[tuple[str, str]] = [
    ("formats/", "read"), ("source.py", "read"), ("reader.py", "read"), ("model.py", "read"),
    ("convert.py", "read"),
    ("schemacheck.py", "validate"), ("validate.py", "validate"),
    ("clean.py", "clean"), ("clean_part.py", "clean"),
    ("tokens/calibration.py", "decide"), ("tokens/usage.py", "decide"), ("tokens/", "count"),
    ("state/calibration.py", "decide"), ("state/", "state"),
    ("engine.py", "decide"), ("route_", "decide"), ("run_setup.py", "decide"), ("run_write.py", "write"),
    ("context.py", "decide"), ("budget.py", "decide"), ("report.py", "decide"),
    ("options.py", "decide"),
    ("facts/", "facts"),
    ("strategies/", "summary"), ("summarizers/", "summary"),
    ("atomic.py", "write"), ("paths.py", "write"),
    ("cli/", "cli"), ("api.py", "cli"), ("progress.py", "cli"),
]
ORDER = ["start-up", "read", "validate", "clean", "count", "decide", "state", "facts", "summary", "write",
         "cli", "other"]
WRITERS = ("write", "dump", "serialize", "_line_bytes", "to_line")
PACKAGES = {"jsonschema": "validate", "tiktoken": "count"}

Func = tuple[str, int, str]


def stage_of_own(func: Func) -> str | None:
    """The stage of a ctxcompact function by its module, None for anything else."""
    path, _, name = func
    if name == "<module>" or path.startswith("<frozen importlib"):
        return "start-up"
    if "/ctxcompact/" not in path:
        for pkg, stage in PACKAGES.items():
            if f"/{pkg}/" in path:
                return stage
        return None
    rel = path.split("/ctxcompact/", 1)[1]
    for frag, stage in STAGES:
        if rel.startswith(frag) or rel == frag:
            if stage == "read" and rel.startswith("formats/") and name.lstrip("_").startswith(WRITERS):
                return "write"
            return stage
    return "other"


def group(stats: pstats.Stats) -> tuple[dict[str, float], dict[Func, float]]:
    """Seconds per stage, and per ctxcompact function: each function's self time, plus the time of what it
    called outside ctxcompact (charged to the callers in proportion to the time spent under each)."""
    raw = stats.stats  # type: ignore[attr-defined]
    memo: dict[Func, dict[Func, float]] = {}

    def owners(func: Func, seen: frozenset[Func]) -> dict[Func, float]:
        """The ctxcompact functions (or start-up, a package) ``func``'s time is charged to, with fractions."""
        if func in memo:
            return memo[func]
        if stage_of_own(func) is not None:
            out: dict[Func, float] = {func: 1.0}
        else:
            callers = {c: v for c, v in raw[func][4].items() if c in raw}
            weights = {c: v[2] for c, v in callers.items()}
            if sum(weights.values()) <= 0:
                weights = {c: v[3] for c, v in callers.items()}
            total = sum(weights.values())
            acc: dict[Func, float] = defaultdict(float)
            if total <= 0 or func in seen:
                acc[func] = 1.0
            else:
                for caller, w in weights.items():
                    for owner, f in owners(caller, seen | {func}).items():
                        acc[owner] += w / total * f
            out = dict(acc)
        memo[func] = out
        return out

    stages: dict[str, float] = defaultdict(float)
    funcs: dict[Func, float] = defaultdict(float)
    for func, (_cc, _nc, tt, _ct, _callers) in raw.items():
        for owner, f in owners(func, frozenset()).items():
            funcs[owner] += tt * f
            stages[stage_of_own(owner) or "other"] += tt * f
    return dict(stages), dict(funcs)


def profile_shape(shape: str, mb: float, window: str) -> tuple[float, dict[str, float], pstats.Stats]:
    src = shape_file(shape, mb)
    work = OUT / f"profile_{shape}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    prof = work / "run.prof"
    argv = [PY, "-m", "cProfile", "-o", str(prof), "-m", "ctxcompact", "run", str(src), "--state",
            str(work / "s.json"), "--window", window, "-o", str(work / "out.jsonl")]
    # warm the bytecode cache first, so start-up is not charged for compiling
    run_once([PY, "-m", "ctxcompact", "--help"], env=child_env())
    s = run_once(argv, env=child_env())
    if s.code != 0:
        raise SystemExit(f"{shape}: exit {s.code}: {s.stderr.decode(errors='replace')[-500:]}")
    stats = pstats.Stats(str(prof))
    stages, _ = group(stats)
    return s.wall, stages, stats


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=20.0)
    ap.add_argument("--shapes", default="small,mid,huge,agent")
    ap.add_argument("--window", default="200000")
    ap.add_argument("--top", type=int, default=8,
                    help="also print the N ctxcompact functions of most time")
    args = ap.parse_args(argv)
    shapes = args.shapes.split(",")
    header(f"per-stage profile of the compacting `run` (extractive, window {args.window}), {args.mb:g} MB")
    results = {}
    for s in shapes:
        print(f"profiling {s} …", file=sys.stderr, flush=True)
        results[s] = profile_shape(s, args.mb, args.window)
    print("\nSeconds of the profiled process per stage (share of the total); profiling inflates Python "
          "code.\n")
    print("| stage | " + " | ".join(shapes) + " |")
    print("|---|" + "---|" * len(shapes))
    totals = {s: sum(results[s][1].values()) or 1.0 for s in shapes}
    for st in ORDER:
        if not any(results[s][1].get(st, 0) > 0.0005 for s in shapes):
            continue
        secs = {s: results[s][1].get(st, 0) for s in shapes}
        cells = [f"{secs[s]:.2f} s ({secs[s] / totals[s]:.0%})" for s in shapes]
        print(f"| {st} | " + " | ".join(cells) + " |")
    print("| total (profiled) | " + " | ".join(f"{totals[s]:.2f} s" for s in shapes) + " |")
    if args.top:
        for s in shapes:
            _, funcs = group(results[s][2])
            ours = ((t, f) for f, t in funcs.items() if "/ctxcompact/" in f[0])
            top = sorted(ours, reverse=True)[:args.top]
            print(f"\n{s}: ctxcompact functions by time (their own, and what they called outside ctxcompact)")
            for t, (path, line, name) in top:
                print(f"  {t:7.3f} s  {Path(path).parent.name}/{Path(path).name}:{line} {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

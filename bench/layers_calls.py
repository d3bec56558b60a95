"""The hook's calls after a state's layers (sliding-window events, masking), two trees side by side.

On ``bench/out/openai_<mb>mb_seed1.jsonl``: a ``run --strategy sliding-window`` (or ``--strategy mask``) on
the file's first lines, then default calls (below the threshold) on the file less 10 lines, less 5, and
whole, each tree in its own folder, the trees' calls in turn (A B A B …), ``--runs`` times. Prints each call's
CPU-s and peak RSS per tree, and whether the outputs are identical (SHA-256). With ``--repeat N``, the third
call is also timed inside one process per tree (import aside: the call itself, what start-up hides), N
times from the same state, in three alternating rounds. ``--then sliding-window``: the later calls are
sliding-window calls too (the hook of a sliding-window setup; with ``--back 15`` the first run reads all but
the last 15 lines, so the later calls have no event due: they pass through).

    python bench/layers_calls.py --base /work/main --mb 10 --runs 2
    python bench/layers_calls.py --base /work/main --mb 10 --runs 2 --then sliding-window --back 15
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sys
import tempfile
from pathlib import Path

from common import PY, REPO, child_env, machine, run_once, transcript

# the third call again and again from a copy of the folder before it (``argv``: tree, copy, folder, N)
REPEAT = """
import os, shutil, sys, time
from pathlib import Path
tree, snap, work, n = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
kw = {"strategy": sys.argv[5]} if len(sys.argv) > 5 else {}
sys.path.insert(0, tree)
from ctxcompact import engine
from ctxcompact.options import Options
ts = []
for _ in range(n):
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(snap, work)
    t = time.process_time()
    engine.run(work / "t.jsonl", Options(window=2_000_000, **kw), output=work / "out.jsonl",
               warn=lambda m: None)
    ts.append(time.process_time() - t)
print(" ".join(f"{x:.3f}" for x in ts[1:]))
"""


def _lines(src: Path, dst: Path, n: int) -> None:
    with open(src, "rb") as f, open(dst, "wb") as out:
        for i, line in enumerate(f):
            if i >= n:
                break
            out.write(line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", type=Path, required=True, help="the other tree (its ctxcompact package)")
    ap.add_argument("--mb", type=float, default=10)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--first", type=float, default=0.5, help="the share of the lines the first run reads")
    ap.add_argument("--strategy", default="sliding-window", choices=["sliding-window", "mask"])
    ap.add_argument("--repeat", type=int, default=0, help="time the third call in process N times")
    ap.add_argument("--then", default=None, choices=["sliding-window"],
                    help="the later calls' strategy (default: the default)")
    ap.add_argument("--back", type=int, default=0, help="the first run reads all but this many lines")
    args = ap.parse_args()
    src = transcript(args.mb)
    with open(src, "rb") as f:
        total = sum(1 for _ in f)
    first = total - args.back if args.back else int(total * args.first)
    then = ["--strategy", args.then] if args.then else []
    trees = {"base": args.base.resolve(), "this": REPO}
    steps = [("first call after it", total - 10), ("second", total - 5), ("third", total)]
    cpu: dict[tuple[str, str], list[float]] = {}
    rss: dict[tuple[str, str], list[float]] = {}
    same = True
    print(machine())
    keep = Path(tempfile.mkdtemp())
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            dirs = {name: Path(tmp) / name for name in trees}
            for d in dirs.values():
                d.mkdir()
            # (each child runs in its folder: ``python -m`` puts the folder it starts in first on the path,
            # which from a worktree would be that tree's package whatever PYTHONPATH says)
            for name, tree in trees.items():
                t = dirs[name] / "t.jsonl"
                _lines(src, t, first)
                s = run_once([PY, "-m", "ctxcompact", "run", str(t), "--strategy", args.strategy,
                              "--window", "2000000", "-o", str(dirs[name] / "out.jsonl")],
                             env=child_env(PYTHONPATH=str(tree)), cwd=dirs[name])
                assert s.code == 0, s.stderr[-500:]
            for label, n in steps:
                digests = set()
                for name, tree in trees.items():
                    t = dirs[name] / "t.jsonl"
                    _lines(src, t, n)
                    out = dirs[name] / "out.jsonl"
                    if n == total and args.repeat:
                        shutil.rmtree(keep / name, ignore_errors=True)
                        shutil.copytree(dirs[name], keep / name)
                    argv = [PY, "-m", "ctxcompact", "run", str(t), *then, "--window", "2000000", "-o",
                            str(out)]
                    s = run_once(argv, env=child_env(PYTHONPATH=str(tree)), cwd=dirs[name])
                    assert s.code == 0, s.stderr[-500:]
                    cpu.setdefault((label, name), []).append(s.cpu)
                    rss.setdefault((label, name), []).append(s.rss_mb)
                    digests.add(hashlib.sha256(out.read_bytes()).hexdigest())
                same = same and len(digests) == 1
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"{args.strategy} on the first {first} of {total} lines ({src.name}), then "
          f"{args.then or 'default'} calls")
    print(f"| call | {' | '.join(trees)} |\n|---|---|---|")
    for label, _ in steps:
        cells = []
        for name in trees:
            c, r = cpu[(label, name)], rss[(label, name)]
            cells.append(f"{min(c):.2f}-{max(c):.2f} CPU-s, {max(r):.0f} MiB")
        print(f"| {label} | {' | '.join(cells)} |")
    for _ in range(3 if args.repeat else 0):
        for name, tree in trees.items():
            s = run_once([PY, "-c", REPEAT, str(tree), str(keep / name), str(keep / f"{name}.work"),
                          str(args.repeat + 1), *then[1:]], env=child_env())
            assert s.code == 0, s.stderr[-500:]
            print(f"third call in process, {name}: {s.stdout.decode().strip()} CPU-s")
    shutil.rmtree(keep, ignore_errors=True)
    print("outputs identical" if same else "OUTPUTS DIFFER")
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()

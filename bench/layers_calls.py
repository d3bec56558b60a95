"""The hook's calls after a state's layers (sliding-window events, masking), two trees side by side.

On ``bench/out/openai_<mb>mb_seed1.jsonl``: a ``run --strategy sliding-window`` (or ``--strategy mask``) on
the file's first lines, then default calls (below the threshold) on the file less 10 lines, less 5, and
whole, each tree in its own folder, the trees' calls in turn (A B A B …), ``--runs`` times. Prints each call's
CPU-s and peak RSS per tree, and whether the outputs are identical (SHA-256).

    python bench/layers_calls.py --base /work/main --mb 10 --runs 2
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sys
import tempfile
from pathlib import Path

from common import PY, REPO, child_env, machine, run_once, transcript


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
    args = ap.parse_args()
    src = transcript(args.mb)
    with open(src, "rb") as f:
        total = sum(1 for _ in f)
    first = int(total * args.first)
    trees = {"base": args.base.resolve(), "this": REPO}
    steps = [("first call after it", total - 10), ("second", total - 5), ("third", total)]
    cpu: dict[tuple[str, str], list[float]] = {}
    rss: dict[tuple[str, str], list[float]] = {}
    same = True
    print(machine())
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            dirs = {name: Path(tmp) / name for name in trees}
            for d in dirs.values():
                d.mkdir()
            for name, tree in trees.items():
                t = dirs[name] / "t.jsonl"
                _lines(src, t, first)
                s = run_once([PY, "-m", "ctxcompact", "run", str(t), "--strategy", args.strategy,
                              "--window", "2000000", "-o", str(dirs[name] / "out.jsonl")],
                             env=child_env(PYTHONPATH=str(tree)))
                assert s.code == 0, s.stderr[-500:]
            for label, n in steps:
                digests = set()
                for name, tree in trees.items():
                    t = dirs[name] / "t.jsonl"
                    _lines(src, t, n)
                    out = dirs[name] / "out.jsonl"
                    argv = [PY, "-m", "ctxcompact", "run", str(t), "--window", "2000000", "-o", str(out)]
                    s = run_once(argv, env=child_env(PYTHONPATH=str(tree)))
                    assert s.code == 0, s.stderr[-500:]
                    cpu.setdefault((label, name), []).append(s.cpu)
                    rss.setdefault((label, name), []).append(s.rss_mb)
                    digests.add(hashlib.sha256(out.read_bytes()).hexdigest())
                same = same and len(digests) == 1
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"{args.strategy} on the first {first} of {total} lines ({src.name}), then default calls")
    print(f"| call | {' | '.join(trees)} |\n|---|---|---|")
    for label, _ in steps:
        cells = []
        for name in trees:
            c, r = cpu[(label, name)], rss[(label, name)]
            cells.append(f"{min(c):.2f}-{max(c):.2f} CPU-s, {max(r):.0f} MiB")
        print(f"| {label} | {' | '.join(cells)} |")
    print("outputs identical" if same else "OUTPUTS DIFFER")
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()

"""Issue 25's table: every row on four shapes of transcript, each against a baseline timed in the same run,
with the target and ✓/✗ per cell.

Shapes (bench/hook.py generates them into bench/out/, deterministically): ``small`` (many ~200 B records),
``mid`` (~1.4 KB records), ``huge`` (a few ~1 MB tool results), ``agent`` (bench/gen_openai.py's coding
agent). Rows (whole processes, medians of --runs, the two cases of a row run in turn A B A B …):

  start-up      `run` on a 250 KB session below the threshold, no state ÷ `ctxcompact --help`
  below         second `run` after 5 appended records, below the threshold ÷ the first `run`
  after         second `run` after 5 appended records, after a compaction ÷ the compacting `run`
  compacting    the compacting `run` (extractive) ÷ `estimate` (exact) on the same file and window
  heuristic     `estimate --exact none` ÷ a bare orjson line parse, as throughput (MB/s ÷ MB/s)
  exact         `estimate` (exact o200k) ÷ `ttok` (bench/out/clivenv, never a project dependency), as speed
  RSS           peak RSS of the compacting `run` at --mb and at --big-mb (and 1 GB with --gb1)
  per record    peak RSS per record of `run` on 200,000 two-field lines (shape-free: one figure)

Every ratio is printed as wall-clock (the targets') and CPU (less sensitive to other work on shared cores).
Nothing fails on a missed target.

    python bench/all.py --table                      # the whole table, 20 MB shapes, RSS at 100 MB
    python bench/table.py --mb 2 --big-mb 0 --runs 1 # a quick check that everything runs
    python bench/table.py --shapes mid --rows compacting,heuristic
    python bench/table.py --rows heuristic,exact --against /tmp/main-src   # also another source tree's code

``--against DIR`` also times the compacting, heuristic and exact rows with the ctxcompact of the source tree
DIR (``PYTHONPATH=DIR``; e.g. ``git archive main | tar -x -C DIR``) in the same run, on the same inputs and
against the same baselines, and prints its row beside this tree's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import orjson
from common import OUT, PY, Case, child_env, ctxcompact, header, measure, run_once
from hook import FLOOR, GROWTH, _clean_prefix, shape_file

ROWS = ("startup", "below", "after", "compacting", "heuristic", "exact", "rss", "per_record")
TARGETS = {
    "startup": ("`run` on a 250 KB session below the threshold, no state ÷ `--help`", "≤ 2×",
                lambda r: r <= 2),
    "below": ("second `run` after 5 appended records, below the threshold ÷ the first", "≤ 0.1×",
              lambda r: r <= 0.1),
    "after": ("second `run` after 5 appended records, after a compaction ÷ the compacting run", "≤ 0.03×",
              lambda r: r <= 0.03),
    "compacting": ("the compacting `run` (extractive) ÷ `estimate`", "≤ 1.5×", lambda r: r <= 1.5),
    "heuristic": ("`estimate --exact none` ÷ a bare orjson line parse (throughput)", "≥ 0.6×",
                  lambda r: r >= 0.6),
    "exact": ("`estimate` (exact) ÷ `ttok` (speed)", "≥ 2×", lambda r: r >= 2),
}
WINDOW_BIG = "1000000000"  # a window the whole file stays below
WINDOW = "200000"  # a window every shape's file is over: the run compacts


class Cell:
    """One figure of the table: a ratio (wall and CPU) and what it was made of."""

    def __init__(self, ratio: float | None, detail: str, ok: bool | None, cpu: float | None = None) -> None:
        self.ratio, self.detail, self.ok, self.cpu = ratio, detail, ok, cpu

    def text(self) -> str:
        if self.ratio is None:
            return self.detail
        mark = "" if self.ok is None else (" ✓" if self.ok else " ✗")
        cpu = f" (cpu {self.cpu:.2f})" if self.cpu is not None else ""
        return f"{self.ratio:.2f}{mark}{cpu}"


def _fail(*cases: Case) -> Cell:
    return Cell(None, "; ".join(c.error() for c in cases if not c.ok) or "n/a", None)


def _ratio(key: str, a: Case, b: Case, invert: bool = False) -> Cell:
    """a ÷ b (or b ÷ a: a speed) on wall time, with the CPU ratio beside it."""
    if not (a.ok and b.ok):
        return _fail(a, b)
    r, c = (b.wall / a.wall, b.cpu / a.cpu) if invert else (a.wall / b.wall, a.cpu / b.cpu)
    detail = f"{a.name} {a.wall:.3f} s (cpu {a.cpu:.3f}) · {b.name} {b.wall:.3f} s (cpu {b.cpu:.3f})"
    return Cell(r, detail, TARGETS[key][2](r), c)


def _alternate(a: Case, b: Case, runs: int, before_a: Callable[[], None], warmup: bool = True,
               before_b: Callable[[], None] | None = None) -> None:
    """A B A B …, ``before_a`` (``before_b``) restoring A's (B's) starting files before each of its runs (its
    time not counted)."""
    for i in range(runs + (1 if warmup else 0)):
        before_a()
        sa = run_once(a.argv, stdin=a.stdin, env=a.env)
        if before_b is not None:
            before_b()
        sb = run_once(b.argv, stdin=b.stdin, env=b.env)
        if i >= (1 if warmup else 0):
            a.samples.append(sa)
            b.samples.append(sb)


def _snapshot(work: Path, pattern: str) -> Callable[[], None]:
    """A function putting back the files matching ``pattern`` as they are now (and removing newer ones)."""
    saved = {p: p.read_bytes() for p in work.glob(pattern) if p.is_file()}

    def restore() -> None:
        for p in work.glob(pattern):
            if p not in saved:
                p.unlink()
        for p, data in saved.items():
            p.write_bytes(data)
    return restore


def _grow(src: Path, dst: Path) -> None:
    shutil.copyfile(src, dst)
    with dst.open("ab") as f:
        f.writelines(orjson.dumps(rec) + b"\n" for rec in GROWTH)


def _below_cases(work: Path, base: Path, grown: Path, tag: str, env: dict[str, str] | None
                 ) -> tuple[Case, Case, Callable[[], None], Callable[[], None]]:
    """The below row's cases (second run, first run) of one tree (``tag``: its names' suffix, ``env``: its
    PYTHONPATH), with their own state, and what to do before each: B (the first run) leaves the state the
    second run starts from; it is restored before each A, and each B starts from nothing (else it finds the
    counts the second run left, and is no first run)."""
    mine = tag.replace(" @", ".")  # "" or ".against"
    name = f"below{mine}.state.json"
    st = work / name
    first = Case(f"first run{tag}", ctxcompact("run", str(base), "--state", str(st), "--window", WINDOW_BIG,
                                               "-o", str(work / f"below{mine}1.jsonl")), env=env)
    second = Case(f"second run{tag}", ctxcompact("run", str(grown), "--state", str(st), "--window",
                                                 WINDOW_BIG, "-o", str(work / f"below{mine}2.jsonl")),
                  env=env)
    measure([first], 1, warmup=0)
    restore = _snapshot(work, f"{name}*")
    first.samples = []

    def start_cold() -> None:
        for p in work.glob(f"{name}*"):
            p.unlink()
    return second, first, restore, start_cold


def bench_shape(shape: str, mb: float, runs: int, rows: set[str], ttok: Path | None,
                log: Callable[[str], None], against: Path | None = None) -> dict[str, Cell]:
    """The cells of ``shape``; with ``against``, also ``<row>@against``: the row with that tree's code."""
    other = child_env(PYTHONPATH=str(against)) if against is not None else None
    src = shape_file(shape, mb)
    work = OUT / f"table_{shape}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    size_mb = src.stat().st_size / 1e6
    cells: dict[str, Cell] = {}
    base, grown = work / "base.jsonl", work / "grown.jsonl"
    shutil.copyfile(src, base)
    _grow(src, grown)

    if "startup" in rows:
        small = work / "small.jsonl"
        _clean_prefix(src, 250_000, small)
        help_ = Case("--help", ctxcompact("--help"))
        run_small = Case(f"run {small.stat().st_size / 1e3:.0f} KB",
                         ctxcompact("run", str(small), "--no-state", "--window", WINDOW_BIG,
                                    "-o", str(work / "small.out.jsonl")))
        # (with ``against``, that tree's two cases in the same rounds: each round runs all four in turn)
        theirs = [] if other is None else [
            Case(f"{run_small.name} @against", run_small.argv, env=other),
            Case("--help @against", help_.argv, env=other)]
        measure([run_small, help_, *theirs], max(runs, 5))
        cells["startup"] = _ratio("startup", run_small, help_)
        log(f"{shape} startup: {cells['startup'].detail}")
        if theirs:
            cells["startup@against"] = _ratio("startup", theirs[0], theirs[1])
            log(f"{shape} startup @against: {cells['startup@against'].detail}")

    if "below" in rows:
        trees = [("", None)] + ([(" @against", other)] if other is not None else [])
        pairs = [_below_cases(work, base, grown, tag, env) for tag, env in trees]
        for _ in range(runs):  # (the trees take turns, run by run)
            for second, first, restore, start_cold in pairs:
                _alternate(second, first, 1, restore, warmup=False, before_b=start_cold)
        for (tag, _env), (second, first, _r, _c) in zip(trees, pairs, strict=True):
            key = "below" + ("@against" if tag else "")
            cells[key] = _ratio("below", second, first)
            log(f"{shape} below{tag}: {cells[key].detail}")

    compacting = Case("compacting run", ctxcompact("run", str(base), "--state", str(work / "c.state.json"),
                                                   "--window", WINDOW, "-o", str(work / "c1.jsonl")))
    if rows & {"after", "compacting", "rss"}:
        estimate = Case("estimate", ctxcompact("estimate", str(base), "--no-state", "--window", WINDOW))
        _alternate(compacting, estimate, runs, _snapshot(work, "c.state.json*"), warmup=False)
        if not compacting.samples[-1].stderr.count(b"compact"):
            said = compacting.samples[-1].stderr[-300:]
            log(f"{shape}: the compacting run did not say it compacted: {said!r}")
        cells["compacting"] = _ratio("compacting", compacting, estimate)
        log(f"{shape} compacting: {cells['compacting'].detail}")
        if other is not None:
            c_other = Case("compacting run @against", ctxcompact(
                "run", str(base), "--state", str(work / "co.state.json"), "--window", WINDOW, "-o",
                str(work / "co1.jsonl")), env=other)
            e_other = Case("estimate @against", ctxcompact("estimate", str(base), "--no-state", "--window",
                                                            WINDOW), env=other)
            _alternate(c_other, e_other, runs, _snapshot(work, "co.state.json*"), warmup=False)
            cells["compacting@against"] = _ratio("compacting", c_other, e_other)
            log(f"{shape} compacting @against: {cells['compacting@against'].detail}")
        restore = _snapshot(work, "c.state.json*")  # as the compacting run left it
        after = Case("after", ctxcompact("run", str(grown), "--state", str(work / "c.state.json"), "--window",
                                         WINDOW, "-o", str(work / "c2.jsonl")))
        theirs_after = None
        if other is not None:  # after that tree's own compacting run, from the state it left
            restore_theirs = _snapshot(work, "co.state.json*")
            theirs_after = Case("after @against", ctxcompact(
                "run", str(grown), "--state", str(work / "co.state.json"), "--window", WINDOW, "-o",
                str(work / "co2.jsonl")), env=other)
        for _ in range(runs):
            restore()
            measure([after], 1, warmup=0)
            if theirs_after is not None:
                restore_theirs()
                measure([theirs_after], 1, warmup=0)
        cells["after"] = _ratio("after", after, compacting)
        log(f"{shape} after: {cells['after'].detail}")
        if theirs_after is not None:
            cells["after@against"] = _ratio("after", theirs_after, c_other)
            log(f"{shape} after @against: {cells['after@against'].detail}")

    if "heuristic" in rows:
        none = Case("estimate --exact none",
                    ctxcompact("estimate", str(base), "--no-state", "--exact", "none"))
        floor = Case("orjson line parse", [PY, "-c", FLOOR, str(base)])
        none_other = Case("estimate --exact none @against",
                          ctxcompact("estimate", str(base), "--no-state", "--exact", "none"), env=other)
        measure([none, floor, *([none_other] if other is not None else [])], runs)
        cells["heuristic"] = _ratio("heuristic", none, floor, invert=True)
        if other is not None:
            cells["heuristic@against"] = _ratio("heuristic", none_other, floor, invert=True)
            log(f"{shape} heuristic @against: {cells['heuristic@against'].detail}")
        if none.ok:
            cells["heuristic"].detail += f" · {size_mb / none.wall:.0f} MB/s"
        log(f"{shape} heuristic: {cells['heuristic'].detail}")

    if "exact" in rows:
        if ttok is None:
            cells["exact"] = Cell(None, "ttok not installable", None)
        else:
            from exact import fill_cache

            env = child_env(TIKTOKEN_CACHE_DIR=str(fill_cache()))
            exact = Case("estimate", ctxcompact("estimate", str(base), "--no-state"), env=env)
            tt = Case("ttok", [str(ttok), "-m", "gpt-4o"], stdin=base, env=env)
            others = [] if against is None else [Case("estimate @against", ctxcompact(
                "estimate", str(base), "--no-state"), env={**env, "PYTHONPATH": str(against)})]
            measure([exact, tt, *others], runs)
            cells["exact"] = _ratio("exact", exact, tt, invert=True)
            if others:
                cells["exact@against"] = _ratio("exact", others[0], tt, invert=True)
                log(f"{shape} exact @against: {cells['exact@against'].detail}")
        log(f"{shape} exact: {cells['exact'].detail}")

    if "rss" in rows:
        cells["rss"] = Cell(None, f"{compacting.rss:.0f} MiB" if compacting.ok else compacting.error(), None)
    return cells


def big_rss(shape: str, mb: float) -> Cell:
    """Peak RSS of one compacting run on the shape at ``mb`` MB (≤ 150 MiB at 100 MB, ≤ 300 MiB at 1 GB)."""
    src = shape_file(shape, mb)
    work = OUT / f"table_{shape}"
    work.mkdir(parents=True, exist_ok=True)
    st = work / "big.state.json"
    for p in work.glob("big.state.json*"):
        p.unlink()
    case = Case("compacting run", ctxcompact("run", str(src), "--state", str(st), "--window", WINDOW, "-o",
                                             str(work / "big.out.jsonl")))
    measure([case], 1, warmup=0)
    if not case.ok:
        return _fail(case)
    limit = 150 if mb <= 100 else 300
    return Cell(None, f"{case.rss:.0f} MiB {'✓' if case.rss <= limit else '✗'}", case.rss <= limit)


def per_record(exact: str, lines: int = 200_000) -> Cell:
    """(peak RSS of `run --exact EXACT` on ``lines`` two-field lines − on 2 lines) ÷ lines."""
    pair = b'{"role":"user","content":"hi"}\n{"role":"assistant","content":"ok"}\n'
    with tempfile.TemporaryDirectory() as tmp:
        peaks = []
        for n in (2, lines):
            path = Path(tmp) / f"{n}.jsonl"
            path.write_bytes(pair * (n // 2))
            case = Case("run", ctxcompact("run", str(path), "--no-state", "--window", WINDOW_BIG, "--exact",
                                          exact, "-o", os.devnull))
            measure([case], 1, warmup=0)
            if not case.ok:
                return _fail(case)
            peaks.append(case.rss)
    per = (peaks[1] - peaks[0]) * 2**20 / lines
    return Cell(None, f"{per:,.0f} B ({peaks[1]:.0f} MiB) {'✓' if per <= 200 else '✗'}", per <= 200)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=20.0, help="size of each shape (the issue's: 20 MB)")
    ap.add_argument("--big-mb", type=float, default=100.0, help="the second RSS size (0: skip)")
    ap.add_argument("--gb1", action="store_true", help="also the RSS of a 1 GB run (agent shape only)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--shapes", default="small,mid,huge,agent")
    ap.add_argument("--rows", default=",".join(ROWS))
    ap.add_argument("--against", type=Path, help="also time the ctxcompact of this source tree, row by row")
    args = ap.parse_args(argv)
    shapes = args.shapes.split(",")
    rows = set(args.rows.split(","))

    ttok = None
    if "exact" in rows:
        from exact import cli_venv

        bindir = cli_venv()
        ttok = bindir / "ttok" if bindir else None

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    # inputs are made in a child: a parent grown by generating 100 MB would lend every child its peak RSS
    # (Linux starts a forked child's maximum RSS at the parent's size)
    sizes = [args.mb, *([args.big_mb] if "rss" in rows and args.big_mb else [])]
    make = ("import sys; from hook import shape_file\n"
            "for s in sys.argv[2:]:\n    shape_file(s, float(sys.argv[1]))")
    for mb in sizes:
        subprocess.run([PY, "-c", make, str(mb), *shapes], check=True, cwd=Path(__file__).parent)
    header(f"issue 25's table: {args.mb:g} MB per shape, medians of {args.runs}")
    # first, while this process is smallest (see above)
    per_rec = {e: per_record(e) for e in ("tiktoken", "none")} if "per_record" in rows else {}
    results = {s: bench_shape(s, args.mb, args.runs, rows, ttok, log, args.against) for s in shapes}
    if "rss" in rows and args.big_mb:
        for s in shapes:
            big = big_rss(s, args.big_mb)
            small = results[s].get("rss")
            results[s]["rss"] = Cell(None, f"{small.detail if small else '?'} → {big.detail}", big.ok)
            log(f"{s} rss: {results[s]['rss'].detail}")
    head = ["what", *shapes, "target"]
    print("\nEach cell: wall-clock ratio, ✓/✗ against the target, (the CPU-time ratio).\n")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for key in ROWS:
        if key not in rows or key == "per_record":
            continue
        if key == "rss":
            what, target = f"`run` peak RSS (compacting), {args.mb:g} MB → {args.big_mb:g} MB", "≤ 150 MiB"
        else:
            what, target = TARGETS[key][0], TARGETS[key][1]
        cells = [results[s][key].text() if key in results[s] else "" for s in shapes]
        print("| " + " | ".join([what, *cells, target]) + " |")
        if any(f"{key}@against" in results[s] for s in shapes):
            cells = [results[s][f"{key}@against"].text() if f"{key}@against" in results[s] else ""
                     for s in shapes]
            print("| " + " | ".join([f"{what}, with {args.against}", *cells, target]) + " |")
    if "per_record" in rows:
        for exact, cell in per_rec.items():
            what = f"peak RSS per record of `run --exact {exact}` (200,000 two-field lines)"
            print(f"| {what} | {cell.detail} |"
                  + " |" * (len(shapes) - 1) + " ≤ 200 B |")
    if args.gb1:
        from memory import gigabyte

        path = gigabyte(shape_file("agent", 100), 10)
        case = Case("run 1 GB",
                    ctxcompact("run", str(path), "--no-state", "--window", WINDOW, "-o", os.devnull))
        measure([case], 1, warmup=0)
        text = f"{case.rss:.0f} MiB {'✓' if case.rss <= 300 else '✗'}" if case.ok else case.error()
        print(f"| `run` peak RSS at 1 GB (agent) | {text} |" + " |" * (len(shapes) - 1) + " ≤ 300 MiB |")
    print("\nDetails (medians, whole processes):\n")
    for s in shapes:
        for key, cell in results[s].items():
            if cell.ratio is not None:
                print(f"- {s} · {key}: {cell.detail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Exact o200k counts: ctxcompact against raw tiktoken on the same extracted text, and against the popular
token-counting CLIs (`ttok`, `count-tokens`) on the same file, side by side.

The CLIs are installed in the bench's own venv (bench/out/clivenv, `pip install ttok count-tokens`), never as
project dependencies. tiktoken would download its encodings on first use; instead TIKTOKEN_CACHE_DIR points at
bench/out/tiktoken-cache, filled from ctxcompact's own SHA-256-verified ranks (the file names are tiktoken's:
sha1 of the download URL), so every tool counts offline with the same ranks.

Cases, whole processes, in turn, median of --runs:

  ctxcompact      ctxcompact estimate --exact tiktoken --json --no-state FILE
  raw threads     python: extract each message's text, tiktoken encode_ordinary_batch (its thread pool)
  raw processes   python: extract, then encode_ordinary on one forked process per core (the all-cores ceiling)
  ttok            ttok -m gpt-4o < FILE            (the whole file as one text, one thread)
  count-tokens    count-tokens -e o200k_base -q FILE

The raw cases must give exactly ctxcompact's count (checked and printed). The CLIs count the file's raw
JSON text (quotes, escapes, keys), so their counts differ; throughput is compared in MB of the file per
second.

    python bench/exact.py              # 100 MB, 3 runs
    python bench/exact.py --mb 10 --runs 3 --no-clis
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
from pathlib import Path

import orjson
from common import OUT, PY, TEXTS_PRELUDE, Case, child_env, ctxcompact, header, measure, table, transcript

EXTRACT = TEXTS_PRELUDE + """
enc = get_encoding("o200k_base")
"""

RAW_THREADS = (
    EXTRACT
    + """
print(sum(len(ids) for ids in enc.encode_ordinary_batch(texts)))
"""
)

RAW_PROCESSES = (
    EXTRACT
    + """
import multiprocessing
def count(r):
    return sum(len(enc.encode_ordinary(t)) for t in texts[r[0]:r[1]])
n, k = len(texts), len(os.sched_getaffinity(0)) * 4
with multiprocessing.get_context("fork").Pool(len(os.sched_getaffinity(0))) as pool:
    print(sum(pool.map(count, [(n * i // k, n * (i + 1) // k) for i in range(k)])))
"""
)

URLS = {
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
}
VENV = OUT / "clivenv"
CACHE = OUT / "tiktoken-cache"


def fill_cache() -> Path:
    """tiktoken's cache, filled from our verified ranks: offline, and the same ranks for every tool."""
    from ctxcompact.tokens.exact import _read_ranks_file

    CACHE.mkdir(parents=True, exist_ok=True)
    for name, url in URLS.items():
        target = CACHE / hashlib.sha1(url.encode()).hexdigest()
        if not target.exists():
            target.write_bytes(_read_ranks_file(name))  # SHA-256 checked against tiktoken's pinned hash
    return CACHE


def cli_venv() -> Path | None:
    """bench/out/clivenv with ttok and count-tokens, made once; None when pip cannot install them."""
    if not (VENV / "bin" / "ttok").exists() or not (VENV / "bin" / "count-tokens").exists():
        print("installing ttok and count-tokens into bench/out/clivenv …", file=sys.stderr, flush=True)
        try:
            subprocess.run([PY, "-m", "venv", str(VENV)], check=True)
            subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", "ttok", "count-tokens"], check=True)
        except (OSError, subprocess.CalledProcessError) as exc:
            print(f"cannot install the CLIs ({exc}); skipping them", file=sys.stderr)
            return None
    return VENV / "bin"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=100.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-clis", action="store_true", help="skip ttok and count-tokens")
    args = ap.parse_args(argv)

    path = transcript(args.mb, args.seed)
    mb = path.stat().st_size / 1e6
    env = child_env(TIKTOKEN_CACHE_DIR=str(fill_cache()))
    header(f"2. exact o200k counts ({mb:.0f} MB openai transcript)")
    cases = [
        Case(
            "ctxcompact estimate --exact tiktoken",
            ctxcompact("estimate", "--exact", "tiktoken", "--json", "--no-state", str(path)),
            env=env,
        ),
        Case("raw tiktoken, encode_ordinary_batch threads", [PY, "-c", RAW_THREADS, str(path)], env=env),
        Case("raw tiktoken, a forked process per core", [PY, "-c", RAW_PROCESSES, str(path)], env=env),
    ]
    bindir = None if args.no_clis else cli_venv()
    if bindir is not None:
        cases.append(
            Case("ttok -m gpt-4o < FILE", [str(bindir / "ttok"), "-m", "gpt-4o"], stdin=path, env=env)
        )
        cases.append(
            Case(
                "count-tokens -e o200k_base -q FILE",
                [str(bindir / "count-tokens"), "-e", "o200k_base", "-q", str(path)],
                env=env,
            )
        )
    measure(cases, args.runs)
    ours = cases[0]
    counts: dict[str, int | None] = {}
    rows = []
    for c in cases:
        if not c.ok:
            rows.append([c.name, "n/a", "", "", "", "", "", c.error()])
            continue
        out = c.samples[-1].stdout
        n = orjson.loads(out)["tokens"]["exact"] if c is ours else int(out.split()[-1].replace(b",", b""))
        counts[c.name] = n
        rows.append(
            [
                c.name,
                f"{c.wall:.2f}",
                c.spread,
                f"{mb / c.wall:.1f}",
                f"{c.cpu:.2f}",
                f"{c.rss:.0f}",
                f"{ours.wall and c.wall / ours.wall:.2f}x",
                f"{n:,}",
            ]
        )
    table(
        rows,
        [
            "case (whole process)",
            "wall s (median)",
            "min-max",
            "MB/s",
            "cpu s",
            "peak RSS MiB",
            "time / ctxcompact",
            "tokens",
        ],
    )
    if not ours.ok:
        return 1
    ok = True
    print()
    for c in cases[1:3]:
        if c.ok:
            same = counts[c.name] == counts[ours.name]
            ok = ok and same
            print(
                f"{c.name}: {'identical count' if same else 'COUNT DIFFERS'}; ctxcompact throughput = "
                f"{c.wall / ours.wall:.0%} of it (target >= 85 %)"
            )
    for c in cases[3:]:
        if c.ok:
            print(f"{c.name}: ctxcompact is {c.wall / ours.wall:.1f}x its throughput (target >= 1.5x)")
    return 0 if ok and all(c.ok for c in cases) else 1


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark token estimation on a large OpenAI transcript, against the floor of just parsing the JSON.

Generates (or reuses) bench/out/openai_<MB>mb.jsonl and runs, each in its own child process so that time and
peak RSS are its own (``os.wait4`` returns the child's rusage, as /usr/bin/time does):

  (a) floor       orjson.loads over every line, nothing else
  (b) heuristic   ctxcompact estimate --exact none --json FILE
  (c) tiktoken    ctxcompact estimate --exact tiktoken --json FILE
  (d) raw         tiktoken encode_ordinary_batch over the text extracted from every message (one batch,
                  tiktoken's own threads); the time of the encode call alone is shown beside the total
  (e) ours        the same text through ctxcompact.tokens.exact.count_texts (bounded batches, lengths only)

and prints MB/s (of the file), peak RSS and both as ratios to the floor. It also prints the numbers behind
calibration.DEFAULT_EXACT_FACTOR: o200k tokens per ceil(chars/4) token, cl100k vs o200k on a sample, and the
share of per-message framing tokens.

    python bench/estimate.py            # 100 MB
    python bench/estimate.py --mb 5     # quick run
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import gen_openai  # noqa: E402  (sibling script)

FLOOR = """
import sys, orjson
n = 0
with open(sys.argv[1], "rb") as f:
    for line in f:
        if line.strip():
            orjson.loads(line)
            n += 1
print(orjson.dumps({"lines": n}).decode())
"""

# Extracts each message's token text the way ctxcompact.model.token_text does for the openai format (content
# text, tool-call names and arguments), then one encode_ordinary_batch call over all of it.
RAW = """
import sys, time, orjson
from ctxcompact.tokens.exact import count_texts, get_encoding
mode = sys.argv[2]
t0 = time.perf_counter()
texts = []
for line in open(sys.argv[1], "rb"):
    if not line.strip():
        continue
    m = orjson.loads(line)
    parts = []
    c = m.get("content")
    if isinstance(c, str):
        parts.append(c)
    elif isinstance(c, list):
        parts.extend(p.get("text", "") for p in c if isinstance(p, dict))
    for call in m.get("tool_calls") or ():
        parts.append(call["function"]["name"])
        parts.append(call["function"]["arguments"])
    texts.append("\\n".join(parts))
enc = get_encoding("o200k_base")
t1 = time.perf_counter()
if mode == "ours":
    counts = count_texts(texts, enc)
else:
    counts = [len(ids) for ids in enc.encode_ordinary_batch(texts)]
t2 = time.perf_counter()
if mode == "stats":  # calibration numbers (an untimed extra run)
    sample, size = [], 0
    for t in texts:
        if size >= int(sys.argv[3]):
            break
        sample.append(t)
        size += len(t)
    stats = {
        "messages": len(texts), "chars": sum(len(t) for t in texts), "o200k": sum(counts),
        "heuristic": sum((len(t) + 3) // 4 for t in texts),
        "o200k_sample": sum(len(ids) for ids in enc.encode_ordinary_batch(sample)),
        "cl100k_sample": sum(len(ids) for ids in get_encoding("cl100k_base").encode_ordinary_batch(sample)),
    }
else:
    stats = {"extract_s": t1 - t0, "encode_s": t2 - t1, "o200k": sum(counts)}
print(orjson.dumps(stats).decode())
"""


@dataclass
class Run:
    name: str
    seconds: float
    rss_mb: float
    ok: bool
    stdout: bytes
    note: str = ""


def run_child(name: str, argv: list[str]) -> Run:
    """Run ``argv``; wall time and the child's own peak RSS (ru_maxrss, KiB on Linux)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        try:
            proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        except OSError as exc:
            return Run(name, 0.0, 0.0, False, b"", f"cannot start: {exc}")
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)  # already reaped; keep Popen consistent
        seconds = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    rss_mb = usage.ru_maxrss / 1024 if sys.platform != "darwin" else usage.ru_maxrss / 2**20
    note = ""
    if proc.returncode != 0:
        lines = stderr.decode("utf-8", "replace").strip().splitlines()
        note = f"exit {proc.returncode}: {lines[-1] if lines else '(no message)'}"
    return Run(name, seconds, rss_mb, proc.returncode == 0, stdout, note)


def cli_run(name: str, exact: str, path: Path) -> Run:
    run = run_child(
        name, [sys.executable, "-m", "ctxcompact", "estimate", "--exact", exact, "--json", str(path)]
    )
    if not run.ok:
        missing = any(s in run.note for s in ("No module named", "No such command", "ModuleNotFoundError"))
        hint = "the estimate command does not exist yet" if missing else "ctxcompact estimate failed"
        run.note = f"{hint} ({run.note})"
        return run
    # --check style exit codes are not used here; a non-JSON stdout means the command is not the one we expect
    try:
        report = orjson.loads(run.stdout)
        tokens = report.get("tokens", {})
        run.note = f"heuristic={tokens.get('heuristic')} exact={tokens.get('exact')}"
    except orjson.JSONDecodeError:
        run.ok = False
        run.note = "estimate --json did not print JSON"
    return run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=100.0, help="size of the generated transcript (default 100)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--file", type=Path, help="benchmark this transcript instead of generating one")
    ap.add_argument("--sample-mb", type=float, default=10.0, help="text sampled for the cl100k comparison")
    args = ap.parse_args(argv)

    if args.file:
        path = args.file
    else:
        path = HERE / "out" / f"openai_{args.mb:g}mb_seed{args.seed}.jsonl"
        if not path.exists():
            print(f"generating {path} …", file=sys.stderr)
            gen_openai.write(path, args.mb, args.seed)
    size_mb = path.stat().st_size / 1e6
    print(f"file: {path} ({size_mb:.1f} MB)")

    runs = [
        run_child("(a) orjson.loads per line (floor)", [sys.executable, "-c", FLOOR, str(path)]),
        cli_run("(b) estimate --exact none", "none", path),
        cli_run("(c) estimate --exact tiktoken", "tiktoken", path),
        run_child("(d) raw tiktoken encode_ordinary_batch", [sys.executable, "-c", RAW, str(path), "raw"]),
        run_child("(e) tokens.exact.count_texts (chunked)", [sys.executable, "-c", RAW, str(path), "ours"]),
    ]
    floor = runs[0]
    for r in runs[3:]:
        if r.ok:
            raw = orjson.loads(r.stdout)
            r.note = (
                f"encode call alone {raw['encode_s']:.1f} s = {size_mb / raw['encode_s']:.1f} MB/s; "
                f"o200k tokens {raw['o200k']}"
            )

    print(f"{'case':<42} {'seconds':>8} {'MB/s':>7} {'peak RSS MB':>12} {'time/floor':>11} {'RSS/floor':>10}")
    for r in runs:
        if not r.ok:
            print(f"{r.name:<42} {'n/a':>8}   {r.note}")
            continue
        t_ratio = r.seconds / floor.seconds if floor.ok and floor.seconds else float("nan")
        m_ratio = r.rss_mb / floor.rss_mb if floor.ok and floor.rss_mb else float("nan")
        print(
            f"{r.name:<42} {r.seconds:>8.2f} {size_mb / r.seconds:>7.1f} {r.rss_mb:>12.0f} "
            f"{t_ratio:>10.1f}x {m_ratio:>9.1f}x"
        )
        if r.note:
            print(f"{'':<42} {r.note}")

    extra = run_child(
        "stats", [sys.executable, "-c", RAW, str(path), "stats", str(int(args.sample_mb * 1e6))]
    )
    stats = orjson.loads(extra.stdout) if extra.ok else None
    if stats:
        msgs = stats["messages"]
        framing = 3 * msgs + 3  # OpenAI chat format: 3 tokens per message + 3 to prime the reply
        print()
        print("calibration numbers (see ctxcompact/tokens/calibration.py):")
        print(f"  messages {msgs}, chars {stats['chars']}, o200k tokens {stats['o200k']}")
        print(f"  o200k tokens per ceil(chars/4) token: {stats['o200k'] / max(1, stats['heuristic']):.3f}")
        print(
            f"  cl100k / o200k on a {args.sample_mb:g} MB sample: "
            f"{stats['cl100k_sample'] / max(1, stats['o200k_sample']):.3f}"
        )
        print(
            f"  per-message framing (3/message + 3) as a share of o200k: "
            f"{framing / max(1, stats['o200k']):.2%}"
            f" ({stats['o200k'] / max(1, msgs):.0f} o200k tokens per message)"
        )
    return 0 if all(r.ok for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())

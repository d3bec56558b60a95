"""Shared helpers of the bench scripts: generated inputs, timed child processes, medians and tables.

Every figure is a whole process (start-up included), timed from outside: wall clock around the child, and the
child's own CPU time and peak RSS from ``os.wait4`` (what ``/usr/bin/time -v`` reports). Cases are run in
turn (A B C A B C …) after one warm-up each, and the median is quoted, so a drift in the machine's speed
(other work on shared cores) hits every case alike.
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
OUT = HERE / "out"
PY = sys.executable

sys.path.insert(0, str(HERE))
import gen_openai  # noqa: E402  (sibling script)


def child_env(**extra: str) -> dict[str, str]:
    """The environment of timed children: bytecode caches on (as in any installed package), kept out of the
    source tree, and no CTXCOMPACT_* setting leaking in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXCOMPACT_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(OUT / "pycache")
    env.update(extra)
    return env


def transcript(mb: float, seed: int = 1) -> Path:
    """bench/out/openai_<mb>mb_seed<seed>.jsonl, generated once."""
    path = OUT / f"openai_{mb:g}mb_seed{seed}.jsonl"
    if not path.exists():
        print(f"generating {path.name} …", file=sys.stderr, flush=True)
        gen_openai.write(path, mb, seed)
    return path


@dataclass
class Sample:
    wall: float
    cpu: float
    rss_mb: float
    code: int
    stdout: bytes
    stderr: bytes


def run_once(
    argv: list[str], *, stdin: Path | None = None, env: dict[str, str] | None = None, cwd: Path | None = None
) -> Sample:
    """Run ``argv`` once: wall seconds, user+system seconds and peak RSS (MiB) of the child.

    Linux starts a forked child's peak RSS at the parent's size, kept across exec: the bench processes
    load no large data themselves, or every child would report at least that much."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        fin = open(stdin, "rb") if stdin else subprocess.DEVNULL  # noqa: SIM115
        try:
            start = time.perf_counter()
            proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=fin, env=env or child_env(), cwd=cwd)
            _, status, usage = os.wait4(proc.pid, 0)
            wall = time.perf_counter() - start
        finally:
            if stdin:
                fin.close()  # type: ignore[union-attr]
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        rss = usage.ru_maxrss / 1024 if sys.platform != "darwin" else usage.ru_maxrss / 2**20
        return Sample(wall, usage.ru_utime + usage.ru_stime, rss, proc.returncode, out.read(), err.read())


@dataclass
class Case:
    name: str
    argv: list[str]
    stdin: Path | None = None
    env: dict[str, str] | None = None
    samples: list[Sample] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.samples) and all(s.code == 0 for s in self.samples)

    @property
    def wall(self) -> float:
        return statistics.median(s.wall for s in self.samples)

    @property
    def cpu(self) -> float:
        return statistics.median(s.cpu for s in self.samples)

    @property
    def rss(self) -> float:
        return statistics.median(s.rss_mb for s in self.samples)

    @property
    def spread(self) -> str:
        walls = [s.wall for s in self.samples]
        return f"{min(walls):.3f}-{max(walls):.3f}"

    def error(self) -> str:
        bad = next((s for s in self.samples if s.code != 0), None)
        if bad is None:
            return ""
        lines = bad.stderr.decode("utf-8", "replace").strip().splitlines()
        return f"exit {bad.code}: {lines[-1] if lines else '(no message)'}"


def measure(cases: list[Case], runs: int, warmup: int = 1) -> list[Case]:
    """Run the cases in turn, ``warmup`` uncounted rounds then ``runs`` counted ones."""
    for i in range(warmup + runs):
        for case in cases:
            s = run_once(case.argv, stdin=case.stdin, env=case.env)
            if i >= warmup:
                case.samples.append(s)
    return cases


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    load = f", load {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""
    return (
        f"{cpu}, {cores} cores{load}, Python {platform.python_version()}, "
        f"{time.strftime('%Y-%m-%d', time.gmtime())}"
    )


def header(title: str) -> None:
    print(f"\n## {title}\n")
    print(f"machine: {machine()}")


def table(rows: list[list[str]], head: list[str]) -> None:
    """A Markdown table (docs/measurements/performance.md quotes these)."""
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print("| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)) + " |")


def ctxcompact(*args: str) -> list[str]:
    """The installed console script (what users run), else ``python -m ctxcompact``."""
    script = Path(PY).parent / "ctxcompact"
    return [str(script), *args] if script.exists() else [PY, "-m", "ctxcompact", *args]


# A child-script prelude: `texts` = the token-bearing text of every message of the openai file argv[1]
# (content, tool names and arguments), the text the exact-count benches tokenize.
TEXTS_PRELUDE = """
import sys, time, orjson, os
from ctxcompact.tokens.exact import get_encoding
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
        parts += [call["function"]["name"], call["function"]["arguments"]]
    texts.append("\\n".join(parts))
"""

"""Write a realistic OpenAI Chat Completions transcript of about N MB (JSONL), deterministically from a seed.

The shape is a coding agent's: one system prompt, then turns of a user request, assistant messages with tool
calls (often several in parallel), one ``tool`` message per call with a result of widely varied size (source
code, JSON, logs, directory listings, errors), and an assistant answer. Some text is non-ASCII.

    python bench/gen_openai.py --mb 100 -o bench/out/openai_100mb.jsonl
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

SYSTEM = (
    "You are a careful coding agent working in a Linux container. Use the tools to read, search and edit "
    "files and to run commands. Prefer small, verified steps; run the tests after every change. "
    "Answer in the user's language."
)

USER_REQUESTS = [
    "The CI is red on main, can you find out why test_parser fails and fix it?",
    "Add retry with exponential backoff to the HTTP client in src/net/client.py.",
    "Refactor the config loader so that environment variables override the file.",
    "Bitte prüfe, warum der Export nach CSV Umlaute (ä, ö, ü, ß) kaputt macht.",
    "Pourquoi le service met-il 3 secondes à démarrer ? Profile le démarrage.",
    "ログ出力が二重になっている原因を調べて修正してください。",
    "Write tests for the rate limiter edge cases (burst, refill, clock skew).",
    "Upgrade the project to Python 3.12 and fix the deprecation warnings.",
    "The migration 0042 fails on Postgres 16; make it idempotent.",
    "Summarise what changed in the last 20 commits and flag anything risky.",
]

TOOLS = ["read_file", "run_shell", "grep", "list_dir", "http_get", "write_file"]

WORDS = [
    *("alpha", "beta", "gamma", "delta", "config", "parser", "token", "window", "buffer", "request"),
    *("response", "retry", "cache", "index", "session", "state", "record", "message", "handler"),
    *("client", "server", "worker", "queue", "result", "error", "value", "limit"),
]
UNICODE_BITS = ["naïve", "café", "Straße", "東京", "данные", "→", "✓", "😀", "≥", "Ω"]


def _ident(rng: random.Random) -> str:
    return "_".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3)))


def _code(rng: random.Random, lines: int) -> str:
    out = [f'"""Module {_ident(rng)}: {" ".join(rng.choices(WORDS, k=6))}."""', "", "import os", ""]
    while len(out) < lines:
        name = _ident(rng)
        args = ", ".join(_ident(rng) for _ in range(rng.randint(0, 3)))
        out.append(f"def {name}({args}) -> dict[str, int]:")
        out.append(f'    """{" ".join(rng.choices(WORDS, k=rng.randint(4, 12)))}."""')
        for _ in range(rng.randint(2, 8)):
            var = _ident(rng)
            out.append(f"    {var} = {{'{rng.choice(WORDS)}': {rng.randint(0, 10**6)}, 'n': len({var!r})}}")
            if rng.random() < 0.3:
                out.append(f"    if {var}['n'] > {rng.randint(1, 99)}:  # {rng.choice(UNICODE_BITS)}")
                out.append(f"        raise ValueError(f'{rng.choice(WORDS)} {{{var}}} too large')")
        out.append(f"    return {var}")
        out.append("")
    return "\n".join(f"{i + 1:>5}\t{line}" for i, line in enumerate(out[:lines]))


def _json(rng: random.Random, items: int) -> str:
    rows = [
        {
            "id": rng.randint(1, 10**9),
            "name": _ident(rng),
            "status": rng.choice(["ok", "failed", "pending", "skipped"]),
            "duration_ms": round(rng.random() * 5000, 3),
            "tags": rng.sample(WORDS, k=rng.randint(0, 4)),
            "owner": {"login": _ident(rng), "email": f"{rng.choice(WORDS)}@example.com"},
            "note": rng.choice([None, " ".join(rng.choices(WORDS + UNICODE_BITS, k=8))]),
        }
        for _ in range(items)
    ]
    return orjson.dumps({"total": items, "items": rows}, option=orjson.OPT_INDENT_2).decode()


def _log(rng: random.Random, lines: int) -> str:
    levels = ["INFO", "INFO", "INFO", "DEBUG", "WARN", "ERROR"]
    out = []
    for i in range(lines):
        lvl = rng.choice(levels)
        day, hour, minute = rng.randint(1, 28), rng.randint(0, 23), rng.randint(0, 59)
        ts = f"2026-01-{day:02d}T{hour:02d}:{minute:02d}:{i % 60:02d}Z"
        out.append(f"{ts} {lvl:<5} [{_ident(rng)}] {' '.join(rng.choices(WORDS, k=rng.randint(3, 12)))}")
        if lvl == "ERROR" and rng.random() < 0.5:
            out.append("Traceback (most recent call last):")
            for _ in range(rng.randint(2, 5)):
                out.append(
                    f'  File "/app/src/{_ident(rng)}.py", line {rng.randint(1, 900)}, in {_ident(rng)}'
                )
            out.append(f"{rng.choice(['KeyError', 'TimeoutError', 'ValueError'])}: '{_ident(rng)}'")
    return "\n".join(out)


def _listing(rng: random.Random, entries: int) -> str:
    return "\n".join(
        f"{rng.choice(['-rw-r--r--', 'drwxr-xr-x'])} {rng.randint(0, 10**6):>8} src/{_ident(rng)}.py"
        for _ in range(entries)
    )


def _size(rng: random.Random) -> int:
    """Tool-result size in bytes: mostly 200 B-10 kB, a long tail to ~200 kB."""
    return int(min(250_000, max(40, rng.lognormvariate(7.6, 1.4))))


def _tool_result(rng: random.Random, tool: str) -> str:
    size = _size(rng)
    if rng.random() < 0.05:
        return f"Error: {rng.choice(['command timed out after 120s', 'No such file or directory', 'exit 1'])}"
    if tool in ("read_file", "write_file"):
        return _code(rng, max(3, size // 45))
    if tool == "http_get":
        return _json(rng, max(1, size // 260))
    if tool == "list_dir":
        return _listing(rng, max(1, size // 40))
    if tool == "grep":
        return "\n".join(
            f"src/{_ident(rng)}.py:{rng.randint(1, 999)}: {_ident(rng)}" for _ in range(size // 35 + 1)
        )
    return _log(rng, max(1, size // 80))


def _arguments(rng: random.Random, tool: str) -> dict[str, Any]:
    if tool == "run_shell":
        return {"command": rng.choice(["pytest -x -q", "git log --oneline -20", "make build", "ls -la"])}
    if tool == "grep":
        return {"pattern": _ident(rng), "path": "src/", "regex": rng.random() < 0.5}
    if tool == "http_get":
        return {"url": f"https://api.example.com/v1/{_ident(rng)}?page={rng.randint(1, 9)}"}
    if tool == "write_file":
        return {"path": f"src/{_ident(rng)}.py", "content": _code(rng, rng.randint(5, 60))}
    return {"path": f"src/{_ident(rng)}.py"}


def messages(seed: int, target_bytes: int) -> Iterator[dict[str, Any]]:
    """Messages until about ``target_bytes`` of JSONL have been produced."""
    rng = random.Random(seed)
    written = 0
    call_no = 0

    def emit(m: dict[str, Any]) -> dict[str, Any]:
        nonlocal written
        written += len(orjson.dumps(m)) + 1
        return m

    yield emit({"role": "system", "content": SYSTEM})
    while written < target_bytes:
        request = rng.choice(USER_REQUESTS)
        if rng.random() < 0.2:
            yield emit({"role": "user", "content": [{"type": "text", "text": request}]})
        else:
            yield emit({"role": "user", "content": request})
        for _step in range(rng.randint(1, 6)):
            n_calls = rng.choices([1, 2, 3, 4, 6], weights=[55, 20, 12, 8, 5])[0]
            calls: list[dict[str, Any]] = []
            for _ in range(n_calls):
                call_no += 1
                tool = rng.choice(TOOLS)
                calls.append(
                    {
                        "id": f"call_{seed:x}{call_no:08d}",
                        "type": "function",
                        "function": {"name": tool, "arguments": orjson.dumps(_arguments(rng, tool)).decode()},
                    }
                )
            thought = (
                f"Let me check {_ident(rng)} {rng.choice(UNICODE_BITS)}." if rng.random() < 0.6 else None
            )
            yield emit({"role": "assistant", "content": thought, "tool_calls": calls})
            for call in calls:
                result = _tool_result(rng, call["function"]["name"])
                yield emit({"role": "tool", "tool_call_id": call["id"], "content": result})
            if written >= target_bytes:  # stop after whole steps: every call answered, the turn closed
                break
        answer = " ".join(rng.choices(WORDS + UNICODE_BITS, k=rng.randint(10, 120)))
        yield emit({"role": "assistant", "content": f"Done. {answer}"})


def write(path: Path, mb: float, seed: int = 1) -> int:
    """Write the transcript to ``path``; returns its size in bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as f:
        for m in messages(seed, int(mb * 1_000_000)):
            f.write(orjson.dumps(m) + b"\n")
    tmp.replace(path)
    return path.stat().st_size


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=100.0, help="approximate size in MB (10^6 bytes)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-o", "--output", type=Path, required=True)
    args = ap.parse_args(argv)
    if args.mb <= 0:
        ap.error("--mb must be positive")
    size = write(args.output, args.mb, args.seed)
    print(f"wrote {args.output} ({size / 1e6:.1f} MB)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

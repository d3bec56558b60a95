"""Start-up: `ctxcompact --help` and `ctxcompact estimate --exact none` on a small file, median of many runs,
beside a bare `python -c pass` (the interpreter's own start-up, which no change of ours can remove).

Also lists which heavy modules each command imports (tiktoken, jsonschema, the SDKs must load only when a
command needs them) and the slowest imports of the estimate command (`python -X importtime`).

    python bench/startup.py            # 30 runs each
"""

from __future__ import annotations

import argparse
import sys

from common import PY, REPO, Case, child_env, ctxcompact, header, measure, run_once, table

HEAVY = ("tiktoken", "jsonschema", "anthropic", "openai", "httpx", "pydantic")
PROBE = f"""
import sys
HEAVY = {HEAVY!r}
sys.argv = ["ctxcompact", *sys.argv[1:]]
try:
    from ctxcompact.cli import main
    main()
except SystemExit:
    pass
finally:
    heavy = sorted({{m.split(".")[0] for m in sys.modules}} & set(HEAVY))
    sys.stderr.write("HEAVY " + ",".join(heavy) + "\\n")
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args(argv)
    small = REPO / "samples" / "openai-session.jsonl"
    header(f"5. start-up (median of {args.runs} runs)")
    commands = {
        "ctxcompact --help": ["--help"],
        f"ctxcompact estimate --exact none {small.name}": [
            "estimate",
            "--exact",
            "none",
            "--no-state",
            str(small),
        ],
        f"ctxcompact estimate (tiktoken) {small.name}": ["estimate", "--no-state", str(small)],
    }
    cases = [Case("python -c pass", [PY, "-c", "pass"])]
    cases += [Case(name, ctxcompact(*cargs)) for name, cargs in commands.items()]
    measure(cases, args.runs, warmup=2)
    rows = []
    for c in cases:
        heavy = ""
        if c.name in commands:
            probe = run_once([PY, "-c", PROBE, *commands[c.name]])
            found = [ln for ln in probe.stderr.decode().splitlines() if ln.startswith("HEAVY")]
            line = found[-1] if found else "HEAVY ?"
            heavy = line[6:] or "none"
        rows.append([c.name, f"{c.wall * 1000:.0f}", f"{c.spread}", f"{c.rss:.0f}", heavy])
    table(rows, ["command (whole process)", "wall ms (median)", "min-max s", "peak RSS MiB", "heavy imports"])
    for c in cases[1:3]:
        print(f"{c.name}: {c.wall * 1000:.0f} ms (target < 150 ms: {'met' if c.wall < 0.150 else 'NOT met'})")
    imp = run_once([PY, "-X", "importtime", "-m", "ctxcompact", *commands[cases[2].name]], env=child_env())
    timed: list[tuple[int, str]] = []
    for line in imp.stderr.decode().splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            timed.append((int(parts[1]), parts[2].rstrip()))
    top = [r for r in timed if not r[1].startswith("  ")]  # top-level imports only
    top.sort(reverse=True)
    print("\nslowest top-level imports of `estimate --exact none` (cumulative ms):")
    for us, name in top[:8]:
        print(f"  {us / 1000:6.1f}  {name.strip()}")
    return 0 if all(c.ok for c in cases) else 1


if __name__ == "__main__":
    sys.exit(main())

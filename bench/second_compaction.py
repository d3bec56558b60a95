"""What an agent log's second compaction costs (issue 25): a Claude Code log, a Codex rollout or ADK events
compacted once with a state, the output put in the input's place (docs/guides/claude-code-codex.md), the
client's next lines appended, then the measured call: the compaction after the state's covered prefix.

    python bench/second_compaction.py claude-code 20 --against DIR [--runs 3] [--window 100000] [--older]

DIR is another tree of ctxcompact (``git archive`` of main): both trees' calls run in turn (A B A B) on a copy
of the same files, after one warm-up each; medians of CPU seconds and peak RSS. The first compaction is made
once, by this tree; the state given to the other tree has no fingerprint ``history`` (a tree from before it
does not know the key); ``--older``: this tree's too (the compaction that meets a state written before the
key, which decides it). The outputs of both are compared (byte for byte) after the runs, and the ``history``
each tree's state then says is printed.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import gen_agent  # noqa: E402  (sibling script)
from common import OUT, PY, REPO, child_env, machine, run_once  # noqa: E402


def _more(kind: str, log: bytes, size: int) -> bytes:
    """What the client writes after resuming ``log``: ``gen_agent``'s turns renamed apart from the log's,
    a Claude Code root chained on the log's last line."""
    if kind == "adk":  # (after the last event: the compaction's, a millisecond after the log's last)
        return gen_agent.adk(size, at=orjson.loads(log.splitlines()[-1])["timestamp"] + 1, tag="more")
    if kind == "codex":
        lines = gen_agent.codex(size).splitlines(keepends=True)[1:]  # (no second session_meta)
        return b"".join(re.sub(rb'"call_id":"([^"]+)"', rb'"call_id":"\1-more"', line) for line in lines)
    tip = orjson.loads(log.splitlines()[-1])["uuid"].encode()
    made = gen_agent._UUID.sub(lambda m: b"f" + m.group(0)[1:], gen_agent.claude_code(size))  # (apart)
    made = gen_agent._IDS.sub(lambda m: b'"' + m.group(1) + b'more"', made)
    return made.replace(b'"parentUuid":null', b'"parentUuid":"' + tip + b'"', 1)


def _call(tree: Path, work: Path, window: int) -> list[str]:
    return [PY, "-m", "ctxcompact", "run", str(work / "t.jsonl"), "--window", str(window), "-o",
            str(work / "out.jsonl")]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=["claude-code", "codex", "adk"])
    ap.add_argument("mb", type=float)
    ap.add_argument("--against", type=Path, required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--window", type=int, default=100_000)
    ap.add_argument("--more-mb", type=float, default=1.0)
    ap.add_argument("--older", action="store_true", help="this tree's state without the key too")
    args = ap.parse_args()
    root = OUT / f"second_{args.kind}_{args.mb:g}mb"
    snap = root / "snapshot"
    if not (snap / "t.jsonl").exists():
        snap.mkdir(parents=True, exist_ok=True)
        make = {"codex": gen_agent.codex, "adk": gen_agent.adk}.get(args.kind, gen_agent.claude_code)
        (snap / "t.jsonl").write_bytes(make(int(args.mb * 1024 * 1024)))
        first = run_once(_call(REPO, snap, args.window), env=child_env(PYTHONPATH=str(REPO)), cwd=REPO)
        assert first.code == 0, first.stderr.decode()
        log = (snap / "out.jsonl").read_bytes()
        (snap / "t.jsonl").write_bytes(log + _more(args.kind, log, int(args.more_mb * 1024 * 1024)))
        (snap / "out.jsonl").unlink()
    trees = {"this": REPO, "against": args.against.resolve()}
    for tree in trees.values():  # (the package each child imports: its tree's, not an installed one)
        where = run_once([PY, "-c", "import ctxcompact; print(ctxcompact.__file__)"],
                         env=child_env(PYTHONPATH=str(tree)), cwd=tree)
        assert where.stdout.decode().startswith(str(tree)), where.stdout
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
    for i in range(1 + args.runs):
        for name, tree in trees.items():
            work = root / name
            shutil.rmtree(work, ignore_errors=True)
            shutil.copytree(snap, work)
            if name == "against" or args.older:  # (a tree from before the key, or its state)
                state = work / "t.jsonl.ctxstate.json"
                kept = orjson.loads(state.read_bytes())
                kept["fingerprint"].pop("history", None)
                state.write_bytes(orjson.dumps(kept))
            # (cwd: ``python -m`` imports from it first)
            s = run_once(_call(tree, work, args.window), env=child_env(PYTHONPATH=str(tree)), cwd=tree)
            assert s.code == 0, s.stderr.decode()
            if i:
                samples[name].append((s.cpu, s.rss_mb))
    same = (root / "this" / "out.jsonl").read_bytes() == (root / "against" / "out.jsonl").read_bytes()
    size = (snap / "t.jsonl").stat().st_size / 2**20
    print(f"{machine()}\n{args.kind}, {size:.1f} MB, window {args.window}, {args.runs} runs, "
          f"outputs the same: {same}")
    for name in trees:
        kept = orjson.loads((root / name / "t.jsonl.ctxstate.json").read_bytes())
        said = kept["fingerprint"].get("history")
        print(f"{name:8} its state's history after the call: {said}")
    for name in trees:
        cpu = statistics.median(c for c, _ in samples[name])
        rss = statistics.median(r for _, r in samples[name])
        each = [round(c, 2) for c, _ in samples[name]]
        print(f"{name:8} CPU {cpu:6.2f} s  peak RSS {rss:7.1f} MiB  (CPU {each})")


if __name__ == "__main__":
    main()

"""Large agent logs for the bench: a real fixture's turns repeated until the file reaches a size.

    python bench/gen_agent.py codex 15 bench/out/codex-15mb.jsonl
    python bench/gen_agent.py claude-code 15 bench/out/claude-15mb.jsonl
    python bench/gen_agent.py adk 15 bench/out/adk-15mb.jsonl

Codex: tests/data/codex/localpush-rollout-tools.jsonl, its session_meta once, then its other lines over and
over, each repetition's call ids suffixed (no id repeats). Claude Code:
tests/data/claude-code/codemie-sync-tracking-excerpt.jsonl, each repetition's uuids, tool ids and message ids
renamed, its root line chained to the last line of the repetition before (one active branch through it all).
ADK: tests/data/genai/adk-docs-run.jsonl's events (a call, its response, the answer) after a user's request,
over and over, each repetition's ids suffixed and its timestamps 10 s after the one before.
"""

from __future__ import annotations

import re
import sys
import uuid
from pathlib import Path

import orjson

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
_CALL_ID = re.compile(rb'"call_id":"([^"]+)"')
_UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_IDS = re.compile(rb'"((?:toolu|msg|req)_[A-Za-z0-9_]+)"')
_NS = uuid.UUID("6ba7b811-9dad-11d1-80b4-00c04fd430c8")


def codex(size: int) -> bytes:
    lines = (DATA / "codex" / "localpush-rollout-tools.jsonl").read_bytes().splitlines(keepends=True)
    head, body = lines[0], lines[1:]
    out, n, k = [head], len(head), 0
    while n < size:
        for line in body:
            line = _CALL_ID.sub(lambda m, k=k: b'"call_id":"' + m.group(1) + b"-%d\"" % k, line)
            out.append(line)
            n += len(line)
        k += 1
    return b"".join(out)


def claude_code(size: int) -> bytes:
    source = DATA / "claude-code" / "codemie-sync-tracking-excerpt.jsonl"
    lines = source.read_bytes().splitlines(keepends=True)
    out: list[bytes] = []
    n, k, last = 0, 0, None
    while n < size:
        def rename(m: re.Match[bytes], k: int = k) -> bytes:
            return str(uuid.uuid5(_NS, f"{k}:{m.group(0).decode()}")).encode()

        first = True  # (the root: the one line with no parent)
        for line in lines:
            line = _IDS.sub(lambda m, k=k: b'"' + m.group(1) + b"x%d\"" % k, _UUID.sub(rename, line))
            if first and last is not None and b'"parentUuid":null' in line:
                line = line.replace(b'"parentUuid":null', b'"parentUuid":"' + last + b'"', 1)
                first = False
            got = re.search(rb'"uuid":"([^"]+)"', line)
            if got is not None and b'"isSidechain":true' not in line:
                last = got.group(1)
            out.append(line)
            n += len(line)
        k += 1
    return b"".join(out)


def adk(size: int, at: float = 1_743_712_220.0, tag: str = "") -> bytes:
    """ADK events from timestamp ``at`` on (``tag``: in every id, so that two logs' ids differ)."""
    lines = [orjson.loads(line) for line in (DATA / "genai" / "adk-docs-run.jsonl").read_bytes().splitlines()]
    first = lines[0]["timestamp"]
    out, n, k = [], 0, 0
    while n < size:
        stamp = at + 10 * k
        text = f"What is the weather in New York ({tag}{k})?"
        ask = {"content": {"parts": [{"text": text}], "role": "user"},
               "invocationId": f"e-{tag}{k}", "author": "user", "actions": {}, "id": f"u-{tag}{k}",
               "timestamp": stamp}
        made = [ask]
        for line in lines:
            event = orjson.loads(orjson.dumps(line))
            event["id"] = f"{event['id']}-{tag}{k}"
            event["invocationId"] = f"e-{tag}{k}"
            event["timestamp"] = stamp + line["timestamp"] - first + 0.001
            for part in event["content"]["parts"]:
                for key in ("functionCall", "functionResponse"):
                    if key in part:
                        part[key]["id"] = f"{part[key]['id']}-{tag}{k}"
            made.append(event)
        for event in made:
            line = orjson.dumps(event) + b"\n"
            out.append(line)
            n += len(line)
        k += 1
    return b"".join(out)


def main() -> None:
    kind, mb, path = sys.argv[1], float(sys.argv[2]), Path(sys.argv[3])
    make = {"codex": codex, "claude-code": claude_code, "adk": adk}[kind]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(make(int(mb * 1024 * 1024)))


if __name__ == "__main__":
    main()

"""A rewind in a Claude Code log: what the calls after it cost, and when that stops.

A rewind (Esc Esc, an edited message) appends a line whose `parentUuid` is an older line, so the lines after
that older one are off the active branch. The streamed reader checks the branch and sends such a file to the
held route (docs/concepts/state.md), until a `compact_boundary` after the fork leaves it in the history.

This makes `gen_agent.py`'s Claude Code log of N MB, a first call on it, then, with a state and the count
cache, four calls below the threshold after one appended user line each, in two cases: the line chained to
the last line (no rewind), and the first one chained 200 messages back (a rewind: the first of the four
calls is the one that reads it first). Then a compaction of the rewound log, its
output put in the log's place as the recipe does, and three more calls. CPU seconds of each call, in-process
(the imports are paid once), and the route it took.

    PYTHONPATH=. python bench/rewind.py            # 10 MB
    PYTHONPATH=. python bench/rewind.py --mb 20
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
from gen_agent import claude_code

from ctxcompact import engine
from ctxcompact.options import Options


def _user(template: dict[str, Any], uuid: str, parent: str, text: str) -> bytes:
    line = {**template, "uuid": uuid, "parentUuid": parent, "message": {"role": "user", "content": text}}
    return orjson.dumps(line) + b"\n"


def _calls(path: Path, state: Path, template: dict[str, Any], parent: str, window: int, n: int,
           tag: str) -> list[tuple[float, bool]]:
    out = []
    for i in range(n):
        with path.open("ab") as f:
            f.write(_user(template, f"{tag}-{i}", parent, f"and now step {i}"))
        parent = f"{tag}-{i}"
        t = time.process_time()
        r = engine.run(path, Options(window=window, state_path=state), output=path.with_suffix(".out"),
                       warn=lambda m: None)
        out.append((time.process_time() - t, r.streamed is not None))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=10)
    ap.add_argument("--no-compaction", action="store_true", help="only the calls before a compaction")
    args = ap.parse_args()
    data = claude_code(int(args.mb * 1024 * 1024))
    objs = [orjson.loads(line) for line in data.splitlines()]
    main_chain = [o for o in objs if o.get("uuid") and o.get("type") in ("user", "assistant")
                  and not o.get("isSidechain")]
    template = next(o for o in main_chain
                    if o["type"] == "user" and isinstance(o["message"].get("content"), str))
    big = 1_000_000_000
    with tempfile.TemporaryDirectory() as tmp:
        for rewound in (False, True):
            path, state = Path(tmp) / "log.jsonl", Path(tmp) / "log.state.json"
            path.write_bytes(data)
            for p in Path(tmp).glob("log.state*"):
                p.unlink()
            engine.run(path, Options(window=big, state_path=state), output=path.with_suffix(".out"),
                       warn=lambda m: None)
            first = main_chain[-200 if rewound else -1]["uuid"]
            calls = _calls(path, state, template, first, big, 4, "a")  # (the first: the rewind's line)
            name = "after a rewind" if rewound else "no rewind"
            print(f"{name:>32}: " + ", ".join(f"{s:.3f} CPU-s ({'streamed' if st else 'held'})"
                                              for s, st in calls))
        if args.no_compaction:
            return
        # the rewound log compacted, its output put in place: the boundary leaves the fork in the history
        tokens = engine.run(path, Options(window=big, state_path=state), output=None, dry_run=True,
                            warn=lambda m: None).tokens_before
        window = tokens  # over the threshold (80 % of the window): it compacts
        r = engine.run(path, Options(window=window, state_path=state), output=path.with_suffix(".out"),
                       warn=lambda m: None)
        assert r.compacted
        shutil.move(path.with_suffix(".out"), path)
        lines = path.read_bytes().splitlines()
        last = [orjson.loads(line) for line in lines if b'"uuid"' in line][-1]["uuid"]
        calls = _calls(path, state, template, last, window, 3, "c")
        print(f"{'after its compaction':>32}: " + ", ".join(
            f"{s:.3f} CPU-s ({'streamed' if st else 'held'})" for s, st in calls))


if __name__ == "__main__":
    main()

"""Two `ctxcompact run` processes on one transcript and state at the same time: the lock serialises them,
so exactly one compacts and the other applies its summary (no lost update, no double compaction), and a
progress indicator appears only on a terminal."""

from __future__ import annotations

import io
import subprocess
import sys
import time
from pathlib import Path

import orjson
from helpers import coding_session, jsonl, sys_msg, user

from ctxcompact.progress import progress


def test_two_concurrent_runs_compact_once(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"
    log.write_bytes(jsonl([sys_msg("agent"), *coding_session(30, tool_chars=3000), user("go on")]))
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ctxcompact",
                "run",
                str(log),
                "--window",
                "8000",
                "--exact",
                "none",
                "-o",
                str(tmp_path / f"out{i}.jsonl"),
                "-q",
            ],
            stderr=subprocess.PIPE,
        )
        for i in range(2)
    ]
    codes = [p.wait(timeout=120) for p in procs]
    errors = [p.stderr.read() if p.stderr else b"" for p in procs]
    assert codes == [0, 0], errors
    state = orjson.loads(Path(str(log) + ".ctxstate.json").read_bytes())
    assert len(state["compactions"]) == 1
    assert state["watermark"] == 122
    outputs = [(tmp_path / f"out{i}.jsonl").read_bytes() for i in range(2)]
    assert outputs[0] == outputs[1]  # the second run applied the first one's summary
    assert len(outputs[0].splitlines()) == 3


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_shows_only_on_a_terminal() -> None:
    tty, pipe = FakeTerminal(), io.StringIO()
    with progress("summarizing", stream=tty, interval=0.01, delay=0):
        time.sleep(0.1)
    with progress("summarizing", stream=pipe, interval=0.01, delay=0):
        time.sleep(0.1)
    assert "summarizing" in tty.getvalue() and "s" in tty.getvalue()
    assert tty.getvalue().endswith("\r\x1b[K")  # the line is cleared when done
    assert pipe.getvalue() == ""

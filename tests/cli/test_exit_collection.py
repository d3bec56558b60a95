"""``cli.main`` reading the process's own command line freezes what is alive as it returns, so the
interpreter's collection at exit traverses none of it (docs/measurements/performance-log.md, branch `start6`);
an in-process caller, which gives ``argv``, keeps its collector as it was."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

import pytest

from ctxcompact.cli import main

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "openai-long.jsonl"

# (atexit's handlers run before the interpreter's last collection: what they see is what it would traverse)
PROBE = """
import atexit, gc, sys
atexit.register(lambda: print("frozen", gc.get_freeze_count(), "young", sum(gc.get_count()), "on",
                              gc.isenabled()))
sys.argv = ["ctxcompact", *sys.argv[1:]]
from ctxcompact.cli import main
main()
"""


@pytest.mark.parametrize("args", [["--help"], ["run", "{sample}", "--no-state", "--window", "1000000000",
                                               "-o", "{out}"], ["run", "/nonexistent/x.jsonl", "--no-state"]])
def test_the_process_exits_with_what_it_loaded_frozen(args: list[str], tmp_path: Path) -> None:
    argv = [a.format(sample=SAMPLE, out=tmp_path / "o.jsonl") for a in args]
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=120)
    assert done.returncode == (2 if "/nonexistent/x.jsonl" in argv else 0), done.stderr  # an error exits too
    words = done.stdout.rsplit("frozen", 1)[1].split()
    assert int(words[0]) > 1000 and words[-1] == "True"  # the collector is still on, with nothing to traverse


def test_an_in_process_caller_keeps_its_collector(tmp_path: Path) -> None:
    assert gc.get_freeze_count() == 0
    with pytest.raises(SystemExit) as exc:
        main(["run", str(SAMPLE), "--no-state", "--window", "1000000000", "-o", str(tmp_path / "o.jsonl")])
    assert exc.value.code == 0 and gc.get_freeze_count() == 0 and gc.isenabled()

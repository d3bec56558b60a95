"""The input, the output and the state are three files; nothing ctxcompact writes replaces another one."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

SAMPLE = Path(__file__).parent.parent / "samples" / "openai-session.jsonl"


def ctxcompact(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "ctxcompact", *args], capture_output=True, cwd=cwd,
                          timeout=120)


@pytest.fixture
def log(tmp_path: Path) -> Path:
    p = tmp_path / "in.jsonl"
    p.write_bytes(SAMPLE.read_bytes())
    return p


@pytest.mark.parametrize("spelling", ["same", "dot", "symlink", "hardlink"])
@pytest.mark.parametrize("command", ["run", "clean"])
def test_the_output_is_never_the_input(log: Path, spelling: str, command: str) -> None:
    original = log.read_bytes()
    out = {"same": str(log), "dot": "./in.jsonl", "symlink": "link.jsonl", "hardlink": "hard.jsonl"}[spelling]
    if spelling == "symlink":
        (log.parent / "link.jsonl").symlink_to(log)
    if spelling == "hardlink":
        os.link(log, log.parent / "hard.jsonl")
    args = [command, str(log), "-o", out] + (["--window", "3000", "--no-state"] if command == "run" else [])
    done = ctxcompact(*args, cwd=log.parent)
    assert done.returncode == 2, done.stderr
    assert b"is the input" in done.stderr
    assert log.read_bytes() == original


def test_the_state_is_neither_the_input_nor_the_output(log: Path) -> None:
    original = log.read_bytes()
    done = ctxcompact("run", str(log), "--state", str(log), "--reset-state", "-o", str(log.parent / "o"))
    assert done.returncode == 2 and b"the state" in done.stderr and b"is the input" in done.stderr
    out = log.parent / "o.jsonl"
    done = ctxcompact("run", str(log), "--state", str(out), "-o", str(out))
    assert done.returncode == 2 and b"is the output" in done.stderr
    assert log.read_bytes() == original and not out.exists()


def test_no_folder_is_created(log: Path) -> None:
    missing = log.parent / "new" / "dir"
    for args in (["--state", str(missing / "s.json"), "-o", str(log.parent / "o")],
                 ["--no-state", "-o", str(missing / "o.jsonl")]):
        done = ctxcompact("run", str(log), *args)
        assert done.returncode == 2, done.stderr
        assert b"does not exist" in done.stderr and b"Traceback" not in done.stderr
    assert not (log.parent / "new").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root (CI runs as root)")
def test_a_device_output_is_written_in_place(log: Path) -> None:
    # a private null device, so that a regression replaces this node and not the machine's /dev/null
    null = log.parent / "null"
    os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    done = ctxcompact("run", str(log), "--window", "3000", "--no-state", "-o", str(null))
    assert done.returncode == 0, done.stderr
    assert null.is_char_device()


def test_dev_stdout_is_the_pipe(log: Path) -> None:
    done = ctxcompact("run", str(log), "--window", "3000", "--no-state", "-o", "/dev/stdout")
    assert done.returncode == 0, done.stderr
    assert b"ctxcompact summary" in done.stdout


def test_a_fifo_output_is_written_not_replaced(log: Path) -> None:
    fifo = log.parent / "pipe"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    done = ctxcompact("run", str(log), "--window", "3000", "--no-state", "-o", str(fifo))
    got, _ = reader.communicate(timeout=60)
    assert done.returncode == 0, done.stderr
    assert b"ctxcompact summary" in got
    assert fifo.is_fifo()


def test_a_symlinked_state_is_refused(log: Path) -> None:
    target = log.parent / "elsewhere.txt"
    target.write_bytes(b"precious\n")
    link = log.parent / "s.json"
    link.symlink_to(target)
    done = ctxcompact("run", str(log), "--window", "3000", "--state", str(link), "-o", str(log.parent / "o"))
    assert done.returncode == 3, done.stderr
    assert b"symbolic link" in done.stderr
    assert target.read_bytes() == b"precious\n"
    assert not (log.parent / "o").exists()
    # naming the real file is the user's explicit choice: not a link, so it is used
    target.unlink()
    done = ctxcompact("run", str(log), "--window", "3000", "--state", str(target),
                      "-o", str(log.parent / "o"))
    assert done.returncode == 0, done.stderr

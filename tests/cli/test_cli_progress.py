"""What a user sees on long work (issue 28 item 4): a bar on stderr for several files and `eval --replay`, on
a terminal only (a real pseudo-terminal here), never when stderr is piped, never under ``-q``; colour on a
terminal only; and the carry-on of `eval` past a bad file."""

from __future__ import annotations

import io
import os
import pty
import shutil
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from helpers import SAMPLES, coding_session, ctxcompact, jsonl, sys_msg, user

from ctxcompact.progress import bar, progress, set_quiet


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def run_on_tty(*args: str, timeout: float = 120,
               env: dict[str, str] | None = None) -> tuple[int, bytes, bytes]:
    """``ctxcompact ARGS`` with stderr on a pseudo-terminal (stdout piped): (exit code, stdout, stderr)."""
    master, slave = pty.openpty()
    base = {k: v for k, v in os.environ.items() if not k.startswith("CTXCOMPACT_") and k != "NO_COLOR"}
    env = {**base, "TERM": "xterm", **(env or {})}
    proc = subprocess.Popen([sys.executable, "-m", "ctxcompact", *args], stdout=subprocess.PIPE,
                            stderr=slave, stdin=subprocess.DEVNULL, env=env)
    os.close(slave)
    err = bytearray()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        err += chunk
    out = proc.stdout.read() if proc.stdout else b""
    code = proc.wait(timeout=timeout)
    os.close(master)
    return code, out, bytes(err)


@pytest.fixture()
def many(tmp_path: Path) -> Path:
    folder = tmp_path / "logs"
    folder.mkdir()
    for i in range(40):
        shutil.copy(SAMPLES / "openai-long.jsonl", folder / f"log{i:02}.jsonl")
    return folder


# ----------------------------------------------------------------------------------------------- the module


def test_bar_draws_on_a_terminal_and_clears_its_line() -> None:
    out = Tty()
    with bar(3, "files", stream=out, delay=0, interval=0) as b:
        for name in ("a", "b", "c"):
            b.advance(name)
    text = out.getvalue()
    assert "files [##########" in text and "1/3  a" in text and "3/3  c" in text
    assert text.endswith("\r\x1b[K")  # the line is left clean for what follows


def test_bar_is_silent_off_a_terminal_under_quiet_and_before_its_delay() -> None:
    piped = io.StringIO()
    with bar(2, "files", stream=piped, delay=0, interval=0) as b:
        b.advance("a")
    assert piped.getvalue() == ""
    set_quiet(True)
    try:
        out = Tty()
        with bar(2, "files", stream=out, delay=0, interval=0) as b:
            b.advance("a")
        assert out.getvalue() == ""
    finally:
        set_quiet(False)
    slow = Tty()
    with bar(2, "files", stream=slow, delay=60) as b:
        b.advance("a")
        b.advance("b")
    assert slow.getvalue() == ""  # quick work prints nothing at all


def test_bar_edges_zero_items_more_than_total_and_hide() -> None:
    out = Tty()
    with bar(0, "none", stream=out, delay=0, interval=0) as b:
        assert "[" in b.line() and "0/0" in b.line()
        b.total = 1
        b.advance("x", n=3)  # more than announced: the bar stays full, never overflows
        assert b.line().count("#") == b.width
        b.hide()
        assert out.getvalue().endswith("\r\x1b[K") and not b.drawn
    unicode = Tty()
    with bar(1, "fichiers", stream=unicode, delay=0, interval=0) as b:
        b.advance("é" * 100)  # a long name is cut to its end
    assert "é" * 40 in unicode.getvalue() and "é" * 41 not in unicode.getvalue()


def test_spinners_inside_a_shown_bar_stay_silent() -> None:
    out = Tty()
    with bar(1, "files", stream=out, delay=0, interval=0) as b, \
            progress("counting", stream=out, interval=0.01, delay=0):
        time.sleep(0.05)
        b.advance("a")
    assert "counting" not in out.getvalue()
    alone = Tty()
    with progress("counting", stream=alone, interval=0.01, delay=0):
        time.sleep(0.05)
    assert "counting" in alone.getvalue() and alone.getvalue().endswith("\r\x1b[K")
    quick = Tty()
    with progress("counting", stream=quick, interval=0.01, delay=60):
        pass
    assert quick.getvalue() == ""  # a quick step leaves no trace, not even a cleared line
    set_quiet(True)  # run -q
    try:
        hushed = Tty()
        with progress("counting", stream=hushed, interval=0.01, delay=0):
            time.sleep(0.05)
        assert hushed.getvalue() == ""
    finally:
        set_quiet(False)


# --------------------------------------------------------------------------------------------- the commands


def test_estimate_of_many_files_shows_a_bar_on_a_terminal_only(many: Path) -> None:
    code, out, err = run_on_tty("estimate", str(many), "--jobs", "1", "--no-state", "--json")
    assert code == 0, err
    assert b"estimating [" in err and b"40/40" in err
    assert err.endswith(b"\r\x1b[K")  # cleared at the end
    rows = [orjson.loads(line) for line in out.splitlines()]
    assert len(rows) == 41 and b"\x1b" not in out  # stdout carries only the rows
    quiet = run_on_tty("estimate", str(many), "--jobs", "1", "--no-state", "--json", "-q")
    assert quiet[0] == 0 and b"estimating" not in quiet[2] and b"\x1b" not in quiet[2]
    piped = ctxcompact("estimate", str(many), "--jobs", "1", "--no-state", "--json")
    assert piped.returncode == 0 and piped.stderr == b""


def test_eval_replay_shows_its_turns_on_a_terminal(tmp_path: Path) -> None:
    log = tmp_path / "long.jsonl"  # 100 replayed turns: seconds, well past the bar's half-second delay
    log.write_bytes(jsonl([sys_msg("s"), *coding_session(50, tool_chars=3000), user("go")]))
    args = ["eval", str(log), "--replay", "--window", "16000", "--exact", "none", "--json"]
    code, out, err = run_on_tty(*args)
    assert code == 0, err
    turns = orjson.loads(out)["replay"]["turns"]
    assert turns == 100 and b"replaying [" in err and b"100/100" in err
    assert b"reading and counting" not in err  # the steps' spinners stay silent under the bar
    quiet = run_on_tty(*args, "-q")
    assert quiet[0] == 0 and b"replaying" not in quiet[2]
    piped = ctxcompact(*args)
    assert piped.returncode == 0 and piped.stderr == b"" and orjson.loads(piped.stdout) == orjson.loads(out)


# ------------------------------------------------------------------------------------------------- colour


def test_errors_and_warnings_are_coloured_on_a_terminal_only(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.jsonl")
    code, _, err = run_on_tty("estimate", missing)
    assert code == 2 and b"\x1b[31m\x1b[1merror:\x1b[0m no such file" in err
    for env in ({"NO_COLOR": "1"}, {"TERM": "dumb"}):
        code, _, err = run_on_tty("estimate", missing, env=env)
        assert code == 2 and b"\x1b" not in err and b"ctxcompact: error: no such file" in err
    code, _, err = run_on_tty("estimate", missing, env={"NO_COLOR": ""})  # empty: not set (no-color.org)
    assert b"\x1b[31m" in err
    piped = ctxcompact("estimate", missing)
    assert piped.returncode == 2 and piped.stderr.startswith(b"ctxcompact: error: no such file")
    big = tmp_path / "big.jsonl"
    big.write_bytes(jsonl([sys_msg("rule " * 3000), user("hi")]))
    code, _, err = run_on_tty("run", str(big), "--no-state", "--window", "1000", "--exact", "none",
                              "-o", str(tmp_path / "o.jsonl"))
    assert code == 5 and b"\x1b[33m\x1b[1mwarning:\x1b[0m" in err


# -------------------------------------------------------------------------------------- eval past a bad file


def test_eval_of_a_folder_goes_on_past_a_bad_file(tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    (folder / "sub").mkdir(parents=True)
    shutil.copy(SAMPLES / "openai-session.jsonl", folder / "a.jsonl")
    (folder / "b.jsonl").write_bytes(b'{"role": "user", "content": "hi"}\n{oops\n')
    shutil.copy(SAMPLES / "anthropic-session.jsonl", folder / "sub" / "c.jsonl")
    (folder / "sub" / "d.jsonl").write_bytes(b"")  # empty: no transcript to measure
    proc = ctxcompact("eval", str(folder), "-r", "--window", "8000", "--exact", "none", "--json",
                      "--strategy", "threshold,mask")
    assert proc.returncode == 1, proc.stderr
    rows = orjson.loads(proc.stdout)
    assert [(Path(r["file"]).name, r["strategy"]) for r in rows] == [
        (n, s) for n in ("a.jsonl", "b.jsonl", "c.jsonl", "d.jsonl") for s in ("threshold", "mask")]
    bad = [r for r in rows if "error" in r]
    assert {Path(r["file"]).name for r in bad} >= {"b.jsonl"}
    assert all(r["exit_code"] in (1, 2) and r["error"] for r in bad)
    assert any("line 2" in r["error"] for r in bad)
    good = [r for r in rows if "error" not in r]
    assert {Path(r["file"]).name for r in good} >= {"a.jsonl", "c.jsonl"}
    assert all(r["tokens"]["before"] > 0 for r in good if Path(r["file"]).name != "d.jsonl")
    assert proc.stderr.count(b"error: ") == len(bad)
    table = ctxcompact("eval", str(folder), "-r", "--window", "8000", "--exact", "none")
    assert table.returncode == 1
    lines = table.stdout.decode().splitlines()
    assert any("b.jsonl" in line and "error (exit 1)" in line for line in lines)
    assert lines[-1].startswith(f"mean ({len(good) // 2})")  # the mean is over the measured files only
    html = tmp_path / "eval.html"
    assert ctxcompact("eval", str(folder), "-r", "--exact", "none", "--html", str(html)).returncode == 1
    assert "error (exit 1)" in html.read_text()


def test_eval_of_one_bad_file_is_still_its_error(tmp_path: Path) -> None:
    bad = tmp_path / "b.jsonl"
    bad.write_bytes(b"{oops\n")
    proc = ctxcompact("eval", str(bad), "--exact", "none", "--json")
    assert proc.returncode == 1 and proc.stdout == b"" and b"line 1" in proc.stderr
    missing = ctxcompact("eval", str(tmp_path / "nope.jsonl"), "--exact", "none")
    assert missing.returncode == 2 and b"no such file" in missing.stderr

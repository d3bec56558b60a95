"""Errors at the output (docs/reference/exit-codes.md#the-codes, 6): a full disk, a folder where nothing can
be made, a closed pipe. Each names the path, exits 6, and leaves neither the output nor the state changed or
half written; temporary files a killed run left are removed by the next write of the same file."""

from __future__ import annotations

import errno
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ctxcompact import api, atomic
from ctxcompact.atomic import STALE_TEMP_S, stage, sweep_stale_temps, write_lines
from ctxcompact.errors import EXIT_MEANINGS, ExitCode, OutputError
from ctxcompact.options import Options

ROOT = Path(__file__).parent.parent.parent
SAMPLE = ROOT / "samples" / "openai-long.jsonl"
TEMP = re.compile(r"\..*\.tmp$")


def ctxcompact(*args: str, **kw: object) -> subprocess.CompletedProcess[bytes]:
    if "stdout" not in kw:
        kw["capture_output"] = True
    return subprocess.run([sys.executable, "-m", "ctxcompact", *args], timeout=120, **kw)  # type: ignore


@pytest.fixture
def log(tmp_path: Path) -> Path:
    p = tmp_path / "in.jsonl"
    p.write_bytes(SAMPLE.read_bytes())
    return p


def _opts() -> Options:
    return Options(window=4000)  # the sample is ~35k tokens: run compacts


def _names(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


def _fail_on(monkeypatch: pytest.MonkeyPatch, func: str, when: str, code: int = errno.ENOSPC) -> None:
    """Make ``atomic.os.<func>`` fail with ``code`` when its first argument's name contains ``when``."""
    real = getattr(os, func)

    def broken(*args: object, **kw: object) -> object:
        first = args[0]
        name = os.fspath(first) if isinstance(first, (str, os.PathLike)) else ""
        if func == "fsync" or when in os.path.basename(name):
            raise OSError(code, os.strerror(code))
        return real(*args, **kw)

    monkeypatch.setattr(atomic.os, func, broken)


# ---------------------------------------------------------------------------------------------------------
# the atomic layer


def test_stage_on_a_full_disk_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "out.jsonl"
    target.write_bytes(b"old\n")
    _fail_on(monkeypatch, "fsync", "")
    with pytest.raises(OutputError, match=r"cannot write the output to .*out.jsonl: no space left") as info:
        stage(target, [b"new\n"] * 10)
    assert info.value.exit_code == ExitCode.OUTPUT and info.value.errno == errno.ENOSPC
    assert target.read_bytes() == b"old\n"
    assert _names(tmp_path) == ["out.jsonl"]


def test_commit_keep_and_undo_restore_the_previous_content(tmp_path: Path) -> None:
    old, new = tmp_path / "old.jsonl", tmp_path / "new.jsonl"
    old.write_bytes(b"before\n")
    for target in (old, new):
        staged = stage(target, b"after\n")
        staged.commit(keep=True)
        assert target.read_bytes() == b"after\n"
        assert staged.undo()
    assert old.read_bytes() == b"before\n" and not new.exists()
    assert _names(tmp_path) == ["old.jsonl"]  # no kept copy, no temp file


def test_stale_temps_of_the_same_target_are_removed_by_name_and_age(tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    stale = tmp_path / ".out.jsonl.ab12cd_9.tmp"
    fresh = tmp_path / ".out.jsonl.zz99yy88.tmp"  # a live writer's: too young
    other = tmp_path / ".other.jsonl.ab12cd_9.tmp"  # another target's
    mine_by_prefix_only = tmp_path / ".out.jsonl.notours.tmp"  # not the 8-character pattern
    user = tmp_path / "out.jsonl.tmp"
    for p in (stale, fresh, other, mine_by_prefix_only, user):
        p.write_bytes(b"x")
    old = time.time() - STALE_TEMP_S - 60
    for p in (stale, other, mine_by_prefix_only, user):
        os.utime(p, (old, old))
    atomic.atomic_write(target, b"new\n")  # every write of a target sweeps its own leftovers
    assert not stale.exists()
    assert all(p.exists() for p in (fresh, other, mine_by_prefix_only, user))
    assert sweep_stale_temps(target) == 0


def test_a_temp_left_by_a_killed_run_is_removed_by_the_next_run(log: Path) -> None:
    """kill -9 between the output's temp file and its rename: the next run (after the age limit) removes it.
    Only the output's rename kills: with a cold cache the exact counter first saves its rank table (an
    atomic write of its own, in the cache folder), and killing there left no temp beside the log (the test
    failed when it ran first)."""
    out = log.parent / "o.jsonl"
    code = ("import os, sys, ctxcompact.atomic as a\n"
            "real = os.replace\n"
            "os.replace = lambda s, d, *x, **k: (os.kill(os.getpid(), 9)\n"
            "    if os.path.basename(d) == 'o.jsonl' else real(s, d, *x, **k))\n"
            "from ctxcompact.cli import main\n"
            f"main(['run', {str(log)!r}, '--window', '4000', '-o', {str(out)!r}])\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert done.returncode == -9, done.stderr
    left = [p for p in log.parent.iterdir() if TEMP.match(p.name)]
    assert left, _names(log.parent)  # the killed run left its temp file(s)
    old = time.time() - STALE_TEMP_S - 60
    for p in left:
        os.utime(p, (old, old))
    done = ctxcompact("run", str(log), "--window", "4000", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert not [p for p in log.parent.iterdir() if TEMP.match(p.name)], _names(log.parent)


# ---------------------------------------------------------------------------------------------------------
# run: the output and the state together or not at all


def test_full_disk_at_the_output_writes_neither(log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = log.parent / "o.jsonl"
    _fail_on(monkeypatch, "replace", "o.jsonl")  # the output's rename fails (after its temp was written)
    with pytest.raises(OutputError, match=r"cannot write the output to .*o.jsonl"):
        api.run(log, _opts(), output=out)
    assert _names(log.parent) == ["in.jsonl", "in.jsonl.ctxstate.json.lock"]  # no state, no output, no temp


def test_full_disk_at_the_state_leaves_the_output_unchanged(log: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    out = log.parent / "o.jsonl"
    out.write_bytes(b"previous output\n")
    _fail_on(monkeypatch, "fsync", "")  # the state is staged first: nothing has been written yet
    with pytest.raises(OutputError, match=r"cannot write the state to .*in.jsonl.ctxstate.json: no space"):
        api.run(log, _opts(), output=out)
    assert out.read_bytes() == b"previous output\n"
    assert _names(log.parent) == ["in.jsonl", "in.jsonl.ctxstate.json.lock", "o.jsonl"]


@pytest.mark.parametrize("had_output", [True, False])
def test_state_rename_failing_puts_the_output_back(log: Path, monkeypatch: pytest.MonkeyPatch,
                                                   had_output: bool) -> None:
    """The last step (the state's rename) fails after the output is in place: the output is rolled back, so
    exit 6 never comes with a changed output (and exit 3 no longer comes with a complete one)."""
    out = log.parent / "o.jsonl"
    if had_output:
        out.write_bytes(b"previous output\n")
    _fail_on(monkeypatch, "replace", "ctxstate.json", errno.EIO)
    with pytest.raises(OutputError, match=r"cannot write the state to .*: .*the output was put back"):
        api.run(log, _opts(), output=out)
    if had_output:
        assert out.read_bytes() == b"previous output\n"
    else:
        assert not out.exists()
    expected = ["in.jsonl", "in.jsonl.ctxstate.json.lock"] + (["o.jsonl"] if had_output else [])
    assert _names(log.parent) == expected


def test_a_later_run_after_a_failed_one_is_whole(log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = log.parent / "o.jsonl"
    with monkeypatch.context() as m:
        _fail_on(m, "replace", "ctxstate.json", errno.EIO)
        with pytest.raises(OutputError):
            api.run(log, _opts(), output=out)
    result = api.run(log, _opts(), output=out)
    assert result.compacted and out.stat().st_size > 0
    assert (log.parent / "in.jsonl.ctxstate.json").exists()


def test_write_lines_to_a_stream_that_fails_names_stdout() -> None:
    class Closed:
        def write(self, b: bytes) -> int:
            raise BrokenPipeError(errno.EPIPE, "Broken pipe")

        def flush(self) -> None:
            pass

    with pytest.raises(OutputError, match="cannot write the output to stdout: the reader closed the pipe"):
        write_lines([b"x\n"], Closed())  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------------------
# the command line


def test_run_to_dev_full_exits_6_and_writes_no_state(log: Path) -> None:
    done = ctxcompact("run", str(log), "--window", "4000", "-o", "/dev/full")
    assert done.returncode == 6, done.stderr
    assert b"cannot write the output to /dev/full: no space left on the device" in done.stderr
    assert b"internal error" not in done.stderr
    assert not (log.parent / "in.jsonl.ctxstate.json").exists()


@pytest.mark.parametrize("command", [["run", "--window", "4000"], ["clean"], ["estimate", "--json"]])
def test_stdout_on_a_full_device_exits_6(log: Path, command: list[str]) -> None:
    with open("/dev/full", "wb") as full:
        done = ctxcompact(command[0], str(log), *command[1:], stdout=full, stderr=subprocess.PIPE)
    assert done.returncode == 6, done.stderr
    assert b"cannot write the output to stdout: no space left on the device" in done.stderr
    assert b"Traceback" not in done.stderr and b"Exception ignored" not in done.stderr
    assert not (log.parent / "in.jsonl.ctxstate.json").exists()


@pytest.mark.parametrize("command", [["run", "--window", "4000"], ["clean"], ["validate", "--json"]])
def test_a_closed_pipe_exits_6_and_writes_no_state(log: Path, command: list[str]) -> None:
    # big enough that the pipe buffer (64 KiB) cannot take the whole output
    log.write_bytes(SAMPLE.read_bytes() * 3 if command[0] != "run" else SAMPLE.read_bytes())
    if command[0] == "run":
        command = ["run", "--window", "400000"]  # passes the 100 KB through: bigger than the pipe buffer
    p = subprocess.Popen([sys.executable, "-m", "ctxcompact", command[0], str(log), *command[1:]],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout is not None and p.stderr is not None
    p.stdout.close()  # the reader goes away before reading anything
    err = p.stderr.read()
    assert p.wait(timeout=120) == 6, err
    assert b"cannot write the output to stdout: the reader closed the pipe" in err
    assert b"Traceback" not in err and b"Exception ignored" not in err
    assert not (log.parent / "in.jsonl.ctxstate.json").exists()  # the state never claims an undelivered run


def test_output_where_no_file_can_be_made_exits_6(log: Path) -> None:
    done = ctxcompact("run", str(log), "--window", "4000", "-o", "/proc/ctxcompact-out.jsonl")
    assert done.returncode == 6, done.stderr
    assert b"cannot write the output to /proc/ctxcompact-out.jsonl" in done.stderr
    assert not (log.parent / "in.jsonl.ctxstate.json").exists()
    assert [p for p in log.parent.iterdir() if TEMP.match(p.name)] == []


def test_state_where_no_file_can_be_made_exits_6_at_once(log: Path) -> None:
    out = log.parent / "o.jsonl"

    def timed(*args: str) -> tuple[subprocess.CompletedProcess[bytes], float]:
        start = time.monotonic()
        done = ctxcompact("run", str(log), "--window", "4000", *args)
        return done, time.monotonic() - start

    # (beside a run that fails as soon, at its output: what start-up takes at this machine's load, which
    # alone took over the 8 s this bound was at load 8-14)
    baseline, took_baseline = timed("--no-state", "-o", "/proc/ctxcompact-out.jsonl")
    done, took = timed("--state", "/proc/ctxcompact-s.json", "-o", str(out))
    assert baseline.returncode == 6 and done.returncode == 6, done.stderr
    assert b"/proc/ctxcompact-s.json" in done.stderr and b"locked by another" not in done.stderr
    assert took - took_baseline < 5, (took, took_baseline)  # not the 10 s lock wait
    assert not out.exists()


def test_output_under_a_file_is_a_usage_error_before_work(log: Path) -> None:
    done = ctxcompact("run", str(log), "--window", "4000", "-o", str(log.parent / "in.jsonl" / "o.jsonl"))
    assert done.returncode == 2, done.stderr
    assert b"does not exist" in done.stderr


def test_exit_6_is_documented_in_one_table_and_the_docs() -> None:
    page = (ROOT / "docs" / "reference" / "exit-codes.md").read_text(encoding="utf-8")
    section = page.split("## The codes", 1)[1].split("\n## ", 1)[0]
    codes = {int(m) for m in re.findall(r"^\| (\d+) \|", section, re.M)}
    assert {int(c) for c in EXIT_MEANINGS} == {int(c) for c in ExitCode}
    assert codes - {130} == {int(c) for c in ExitCode}  # 130: Ctrl-C, the shell's convention
    help_text = ctxcompact("--help").stdout.decode()
    assert f"6  {EXIT_MEANINGS[ExitCode.OUTPUT]}" in help_text

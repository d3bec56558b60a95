"""The command line as a user and a shell script see it: stdin/stdout, -o, exit codes, CTXCOMPACT_*
variables, --json, --help examples, and no traceback on bad input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from helpers import SAMPLES, coding_session, ctxcompact, jsonl, sys_msg, user

SYSTEM = "You are a coding agent."
ESTIMATE_KEYS = {
    "format",
    "records",
    "messages",
    "tool_calls",
    "chars",
    "tokens",
    "correction",
    "window",
    "buffer",
    "threshold",
    "percent_used",
    "would_compact",
    "projected_tokens_after",
}


@pytest.fixture()
def long_log(tmp_path: Path) -> Path:
    log = tmp_path / "session.jsonl"
    log.write_bytes(jsonl([sys_msg(SYSTEM), *coding_session(12), user("Carry on with the refactor.")]))
    return log


def test_estimate_json_has_the_stable_keys(long_log: Path) -> None:
    proc = ctxcompact("estimate", str(long_log), "--json", "--window", "8000")
    assert proc.returncode == 0, proc.stderr
    report = orjson.loads(proc.stdout)
    assert set(report) >= ESTIMATE_KEYS
    assert set(report["tokens"]) >= {"heuristic", "exact", "calibrated"}
    assert set(report["correction"]) >= {"factor", "source"}
    assert report["window"] == 8000 and report["buffer"] == 1600 and report["threshold"] == 6400
    assert report["messages"] == {"system": 1, "user": 13, "assistant": 24, "tool": 12}
    assert report["tool_calls"] == 12
    assert report["would_compact"] is True
    assert report["tokens"]["exact"] > 0
    assert proc.stderr == b""  # diagnostics only when there is something to say


def test_estimate_check_exit_codes(long_log: Path, tmp_path: Path) -> None:
    """"Would compact" has its own code (10), never the invalid input's 1, so a script tells them apart."""
    assert ctxcompact("estimate", str(long_log), "--check", "--window", "8000").returncode == 10
    assert ctxcompact("estimate", str(long_log), "--check", "--window", "200000").returncode == 0
    assert ctxcompact("estimate", str(long_log), "--check", "--threshold", "1%").returncode == 10
    assert ctxcompact("estimate", str(long_log), "--check", "--threshold", "0").returncode == 0  # disabled
    # without --check, over the threshold is still success
    assert ctxcompact("estimate", str(long_log), "--window", "8000").returncode == 0
    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(b'{"role": "user", "content": "hi"}\n{not json\n')
    bad = ctxcompact("estimate", str(broken), "--check", "--window", "8000")
    assert bad.returncode == 1 and b"line 2" in bad.stderr
    # several files: one fails and another would compact: the failure (1) wins
    both = ctxcompact("estimate", str(long_log), str(broken), "--check", "--window", "8000",
                      "--exact", "none")
    assert both.returncode == 1, both.stderr
    fine = ctxcompact("estimate", str(long_log), str(long_log.with_name("x.jsonl")), "--check")
    assert fine.returncode == 1  # a missing file is a failed row, not a would-compact


def test_every_option_has_an_environment_variable(long_log: Path) -> None:
    proc = ctxcompact(
        "estimate", str(long_log), "--json", env={"CTXCOMPACT_WINDOW": "8000", "CTXCOMPACT_EXACT": "none"}
    )
    report = orjson.loads(proc.stdout)
    assert report["window"] == 8000
    assert report["tokens"]["exact"] is None


def test_run_reads_stdin_and_needs_a_state_choice(long_log: Path, tmp_path: Path) -> None:
    data = long_log.read_bytes()
    proc = ctxcompact("run", "-", "--window", "8000", input=data)
    assert proc.returncode == 2
    assert b"--state" in proc.stderr and b"Traceback" not in proc.stderr
    proc = ctxcompact("run", "-", "--window", "8000", "--no-state", input=data)
    assert proc.returncode == 0, proc.stderr
    out = [orjson.loads(x) for x in proc.stdout.splitlines()]
    assert len(out) == 3 and out[0]["role"] == "system"
    assert b"compacted" in proc.stderr  # the one-line summary goes to stderr, never stdout


def test_run_to_file_and_state_beside_input(long_log: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    proc = ctxcompact("run", str(long_log), "--window", "8000", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b""
    assert len(out.read_bytes().splitlines()) == 3
    state_file = Path(str(long_log) + ".ctxstate.json")
    assert state_file.exists()
    shown = ctxcompact("state", "show", str(state_file))
    assert orjson.loads(shown.stdout)["watermark"] == 50
    reset = ctxcompact("state", "reset", str(state_file))
    assert reset.returncode == 0 and not state_file.exists()


def test_calibrate_command(long_log: Path, tmp_path: Path) -> None:
    state_file = tmp_path / "s.json"
    assert (
        ctxcompact(
            "run",
            str(long_log),
            "--window",
            "200000",
            "--state",
            str(state_file),
            "-o",
            str(tmp_path / "o.jsonl"),
        ).returncode
        == 0
    )
    proc = ctxcompact("calibrate", "--state", str(state_file), "--prompt-tokens", "50000")
    assert proc.returncode == 0, proc.stderr
    state = orjson.loads(state_file.read_bytes())
    assert state["calibration"]["real"] == 50000
    missing = ctxcompact("calibrate", "--state", str(tmp_path / "nope.json"), "--prompt-tokens", "5")
    assert missing.returncode == 3


def test_fingerprint_mismatch_exit_3(long_log: Path, tmp_path: Path) -> None:
    assert ctxcompact("run", str(long_log), "--window", "8000", "-o", str(tmp_path / "o")).returncode == 0
    long_log.write_bytes(jsonl([sys_msg("other"), user("different")]))
    proc = ctxcompact("run", str(long_log), "--window", "8000", "-o", str(tmp_path / "o"))
    assert proc.returncode == 3
    assert b"does not belong" in proc.stderr


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b'{"role": "user", "content": "hi"}\n{"role": "user", "content": \n', b"line 2"),
        (b"[1, 2]\n", b"line 1"),
        (b'{"role": "user", "content": "caf\xe9"}\n', b"line 1"),
        (b'{"role": 42, "content": "x"}\n', b"line 1"),
    ],
)
def test_bad_input_is_exit_1_with_line_number_and_no_traceback(
    tmp_path: Path, content: bytes, needle: bytes
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(content)
    for command in ("validate", "run", "clean"):
        extra = "--no-state" if command == "run" else "--format=auto"
        proc = ctxcompact(command, str(bad), extra)
        assert proc.returncode == 1, (command, proc.stderr)
        assert needle in proc.stdout + proc.stderr
        assert b"Traceback" not in proc.stderr
    assert not (tmp_path / "bad.jsonl.ctxstate.json").exists()  # nothing written


def test_exact_openai_says_there_is_no_endpoint(long_log: Path) -> None:
    proc = ctxcompact("estimate", str(long_log), "--exact", "openai")
    assert proc.returncode == 2
    assert b"OpenAI has no token-counting endpoint" in proc.stderr


def test_usage_errors_are_exit_2(long_log: Path) -> None:
    assert ctxcompact("estimate", str(long_log), "--threshold", "abc").returncode == 2
    assert ctxcompact("estimate", str(long_log), "--window", "-5").returncode == 2
    assert ctxcompact("estimate", "/no/such/file.jsonl").returncode == 2
    assert ctxcompact("frobnicate").returncode == 2


@pytest.mark.parametrize("command", ["validate", "clean", "estimate", "run", "calibrate", "state"])
def test_help_shows_an_example_and_exit_codes(command: str) -> None:
    proc = ctxcompact(command, "--help")
    assert proc.returncode == 0
    assert b"Example:" in proc.stdout
    assert b"Exit codes:" in proc.stdout


def test_help_does_not_import_heavy_modules() -> None:
    code = (
        "import sys\n"
        "from ctxcompact.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "names = ('anthropic', 'openai', 'tiktoken', 'jsonschema', 'httpx')\n"
        "heavy = [m for m in names if m in sys.modules]\n"
        "print('HEAVY=' + ','.join(heavy))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True)
    assert b"Usage: ctxcompact" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1] == b"HEAVY=", proc.stdout


def test_progress_is_not_printed_when_stderr_is_not_a_terminal(long_log: Path, tmp_path: Path) -> None:
    proc = ctxcompact("run", str(long_log), "--window", "8000", "-o", str(tmp_path / "o"), "-q")
    assert proc.returncode == 0
    assert proc.stderr == b""  # no spinner, no carriage returns


def test_sample_compacts_in_a_32k_window(tmp_path: Path) -> None:
    proc = ctxcompact("run", str(SAMPLES / "openai-long.jsonl"), "--window", "32000", "--no-state")
    assert proc.returncode == 0, proc.stderr
    out = [orjson.loads(x) for x in proc.stdout.splitlines()]
    assert out[0]["role"] == "system"
    assert any("ctxcompact summary" in (m.get("content") or "") for m in out)

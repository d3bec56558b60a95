"""The command line as a script relies on it (issue 28 item 3): `run --json`, `estimate --check`'s own exit
code, `--state-dir`, `state path`. Each case runs the real CLI entry point (``cli.main``), in-process."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner
from helpers import coding_session, jsonl, sys_msg, user

from ctxcompact.cli import main


def call(*argv: str, stdin: bytes | None = None,
         env: dict[str, str] | None = None) -> tuple[int, bytes, bytes]:
    """``ctxcompact ARGV`` through ``main`` (its error handling included): (exit code, stdout, stderr)."""
    runner = CliRunner()
    clean_env = {k: None for k in os.environ if k.startswith("CTXCOMPACT_")}
    with runner.isolation(input=stdin, env={**clean_env, **(env or {})}) as (out, err, _):
        try:
            main(list(argv))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        return code, out.getvalue(), err.getvalue()


@pytest.fixture()
def log(tmp_path: Path) -> Path:
    path = tmp_path / "session.jsonl"
    path.write_bytes(jsonl([sys_msg("You are a coding agent."), *coding_session(12), user("Carry on.")]))
    return path


# ------------------------------------------------------------------------------------------------ run --json


def test_run_json_reports_a_compaction(log: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    code, stdout, stderr = call("run", str(log), "--window", "8000", "--exact", "none", "-o", str(out),
                                "--json")
    assert code == 0, stderr
    report = orjson.loads(stdout)
    assert report["decision"] == "summarize" and report["would_compact"] is True
    assert report["dry_run"] is False
    assert report["tokens_before"] > report["tokens_after"] > 0
    assert report["records_in"] == 50  # system + 12 turns of (request, call, result, answer) + request
    assert report["records_out"] == len(out.read_bytes().splitlines())
    assert report["summary"]["kind"] == "extractive" and report["summary"]["chars"] > 0
    assert report["kept"]["input_records"] >= 1  # the system line at least
    assert report["kept"]["facts"]  # what the summary carries, by kind
    assert report["output"] == str(out)
    assert report["state"] == str(log) + ".ctxstate.json" and Path(report["state"]).is_file()
    assert report["estimate"]["format"] == "openai"
    assert b"compacted" in stderr  # the human line still goes to stderr


def test_run_json_below_the_threshold_passes_and_quiet_keeps_the_report(log: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    code, stdout, stderr = call("run", str(log), "--exact", "none", "-o", str(out), "--json", "-q")
    assert code == 0 and stderr == b""
    report = orjson.loads(stdout)
    assert report["decision"] == "pass" and report["summary"] is None and report["summarizer"] is None
    assert report["tokens_before"] == report["tokens_after"]
    assert report["records_out"] == report["records_in"] == report["kept"]["input_records"]
    assert out.read_bytes() == log.read_bytes()  # passed through unchanged
    # the next call takes the hook's fast path (the count cache): the same report keys
    code, stdout2, _ = call("run", str(log), "--exact", "none", "-o", str(out), "--json", "-q")
    again = orjson.loads(stdout2)
    assert code == 0 and set(again) == set(report) and again["records_out"] == report["records_out"]


def test_run_json_reports_repairs(tmp_path: Path) -> None:
    src = tmp_path / "broken.jsonl"
    calls = [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]
    src.write_bytes(jsonl([user("list"), {"role": "assistant", "content": None, "tool_calls": calls},
                           user("and now?")]))
    code, stdout, _ = call("run", str(src), "--no-state", "-o", str(tmp_path / "o.jsonl"), "--json")
    report = orjson.loads(stdout)
    assert code == 0 and report["repairs_by_kind"] == {"missing_result": 1}
    assert len(report["repairs"]) == 1 and "line 2" in report["repairs"][0]
    assert report["state"] is None  # --no-state


@pytest.mark.parametrize("output", [None, "-"])
def test_run_json_without_a_file_output_is_a_usage_error(log: Path, output: str | None) -> None:
    args = ["run", str(log), "--json", *(["-o", output] if output else [])]
    code, stdout, stderr = call(*args)
    assert code == 2 and stdout == b""
    assert b"give -o FILE" in stderr
    assert not Path(str(log) + ".ctxstate.json").exists()  # refused before any work


def test_ctxcompact_json_in_the_environment_does_not_break_a_run_to_stdout(log: Path) -> None:
    """CTXCOMPACT_JSON=1 set for estimate's sake: `run` without -o still writes the transcript on stdout."""
    env = {"CTXCOMPACT_JSON": "1"}
    code, stdout, stderr = call("run", str(log), "--no-state", "--exact", "none", env=env)
    assert code == 0, stderr
    assert stdout == log.read_bytes()  # the transcript, not a report
    code, stdout, _ = call("run", str(log), "--no-state", "--exact", "none", "-o", str(log.with_suffix(".o")),
                           env={"CTXCOMPACT_JSON": "1"})
    assert code == 0 and orjson.loads(stdout)["decision"] == "pass"  # with -o the variable asks for it


def test_run_dry_run_json_has_the_same_keys(log: Path, tmp_path: Path) -> None:
    code, stdout, _ = call("run", str(log), "--window", "8000", "--exact", "none", "--dry-run", "--json")
    dry = orjson.loads(stdout)
    code2, stdout2, _ = call("run", str(log), "--window", "8000", "--exact", "none", "--json",
                             "-o", str(tmp_path / "o.jsonl"))
    real = orjson.loads(stdout2)
    assert code == code2 == 0 and set(dry) == set(real)
    assert dry["dry_run"] is True and dry["output"] is None and dry["state"] is None
    assert dry["decision"] == real["decision"] == "summarize"


def test_run_json_with_exit_5_still_reports(tmp_path: Path) -> None:
    src = tmp_path / "big-system.jsonl"
    src.write_bytes(jsonl([sys_msg("rule " * 3000), user("hi")]))
    code, stdout, stderr = call("run", str(src), "--no-state", "--window", "1000", "--exact", "none",
                                "-o", str(tmp_path / "o.jsonl"), "--json")
    assert code == 5, stderr
    report = orjson.loads(stdout)
    assert report["exit_code"] == 5 and report["warnings"]


# ------------------------------------------------------------------------------------------ estimate --check


def test_check_without_check_flag_ignores_compaction(log: Path) -> None:
    assert call("estimate", str(log), "--window", "8000", "--exact", "none")[0] == 0
    assert call("estimate", str(log), "--window", "8000", "--exact", "none", "--check")[0] == 10
    assert call("estimate", "-", "--check", "--no-state", stdin=b"{oops\n")[0] == 1


# ----------------------------------------------------------------------------------------------- --state-dir


def _states(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_state_dir_keeps_state_lock_and_cache_away_from_the_input(log: Path, tmp_path: Path) -> None:
    states, elsewhere = tmp_path / "states", tmp_path / "elsewhere"
    states.mkdir()
    elsewhere.mkdir()
    out = elsewhere / "out.jsonl"
    before = _states(log.parent)
    code, stdout, stderr = call("run", str(log), "--window", "8000", "--exact", "none", "-o", str(out),
                                "--state-dir", str(states), "--json")
    assert code == 0, stderr
    assert _states(log.parent) == before  # nothing new beside the input
    state = Path(orjson.loads(stdout)["state"])
    assert state.parent == states and state.name.startswith("session.jsonl.")
    assert state.name.endswith(".ctxstate.json") and state.is_file()
    # the lock lives beside the state; the next run on the grown log uses this state (the summary applies)
    assert all(name.startswith(state.name) for name in _states(states))
    with log.open("ab") as f:
        f.write(jsonl([{"role": "assistant", "content": "done"}, user("next")]))
    code, stdout, _ = call("estimate", str(log), "--window", "8000", "--exact", "none", "--json",
                           "--state-dir", str(states))
    assert code == 0 and orjson.loads(stdout)["covered_by_summary"] > 0
    assert orjson.loads(stdout)["state"] == str(state)
    # `state path` names the same file, for calibrate
    code, stdout, _ = call("state", "path", str(log), "--state-dir", str(states))
    assert code == 0 and stdout.decode().strip() == str(state)
    assert call("calibrate", "--state", str(state), "--prompt-tokens", "5000")[0] == 0


def test_state_dir_does_not_mix_inputs_of_the_same_name(tmp_path: Path) -> None:
    states = tmp_path / "states"
    states.mkdir()
    paths = []
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        src = tmp_path / folder / "log.jsonl"
        turns = coding_session(12, start=0 if folder == "a" else 50)
        src.write_bytes(jsonl([sys_msg("s"), *turns, user("go")]))
        code, stdout, stderr = call("run", str(src), "--window", "8000", "--exact", "none", "--json",
                                    "-o", str(tmp_path / f"{folder}.out.jsonl"), "--state-dir", str(states))
        assert code == 0, stderr  # b's run would be exit 3 if it found a's state
        paths.append(orjson.loads(stdout)["state"])
    assert paths[0] != paths[1] and all(Path(p).is_file() for p in paths)
    # a symbolic link to a is a's transcript: it gets a's state
    link = tmp_path / "link.jsonl"
    link.symlink_to(tmp_path / "a" / "log.jsonl")
    code, stdout, _ = call("state", "path", str(link), "--state-dir", str(states))
    assert stdout.decode().strip() == str(states / Path(paths[0]).name.replace("log.jsonl", "link.jsonl", 1))
    # a relative and an absolute path to one file name one state
    rel = os.path.relpath(tmp_path / "a" / "log.jsonl")
    assert call("state", "path", rel, "--state-dir", str(states))[1].decode().strip() == paths[0]


def test_state_dir_from_the_environment_and_state_wins(log: Path, tmp_path: Path) -> None:
    states = tmp_path / "states"
    states.mkdir()
    env = {"CTXCOMPACT_STATE_DIR": str(states)}
    out = str(tmp_path / "o.jsonl")
    code, stdout, _ = call("run", str(log), "--exact", "none", "-o", out, "--json", env=env)
    assert code == 0 and Path(orjson.loads(stdout)["state"]).parent == states
    explicit = tmp_path / "mine.json"
    code, stdout, _ = call("run", str(log), "--exact", "none", "-o", str(tmp_path / "o.jsonl"), "--json",
                           "--state", str(explicit), env=env)
    assert code == 0 and orjson.loads(stdout)["state"] == str(explicit) and explicit.is_file()


def test_state_dir_errors(log: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    code, _, stderr = call("run", str(log), "-o", str(tmp_path / "o.jsonl"), "--state-dir", str(missing))
    assert code == 2 and b"does not exist" in stderr and not missing.exists()  # no folder made
    code, _, stderr = call("run", "-", "--state-dir", str(tmp_path), stdin=log.read_bytes())
    assert code == 2 and b"stdin has no name" in stderr
    a_file = tmp_path / "file"
    a_file.write_text("x")
    code, _, stderr = call("run", str(log), "--state-dir", str(a_file))
    assert code == 2 and b"state-dir" in stderr
    # estimate only reads: a missing folder means no state yet
    assert call("estimate", str(log), "--exact", "none", "--state-dir", str(missing))[0] == 0


def test_state_dir_with_several_files(tmp_path: Path) -> None:
    states = tmp_path / "states"
    states.mkdir()
    logs = tmp_path / "logs"
    (logs / "sub").mkdir(parents=True)
    for p in (logs / "x.jsonl", logs / "sub" / "x.jsonl"):
        p.write_bytes(jsonl([sys_msg("s"), *coding_session(2), user("go")]))
    code, stdout, stderr = call("estimate", str(logs), "-r", "--exact", "none", "--json", "--jobs", "1",
                                "--state-dir", str(states))
    assert code == 0, stderr
    rows = [orjson.loads(line) for line in stdout.splitlines()][:-1]
    assert len({r["state"] for r in rows}) == 2 and all(r["state"].startswith(str(states)) for r in rows)


# ------------------------------------------------------------------------------------ version, completion


def test_version() -> None:
    from ctxcompact import __version__

    code, stdout, _ = call("--version")
    assert code == 0 and stdout.decode().strip() == f"ctxcompact, version {__version__}"


def test_shell_completion_is_clicks_own() -> None:
    from helpers import ctxcompact

    script = ctxcompact(env={"_CTXCOMPACT_COMPLETE": "bash_source"})
    assert script.returncode == 0 and b"_ctxcompact_completion()" in script.stdout
    words = ctxcompact(env={"_CTXCOMPACT_COMPLETE": "bash_complete",
                            "COMP_WORDS": "ctxcompact estimate --sta", "COMP_CWORD": "2"})
    assert words.returncode == 0
    assert set(words.stdout.decode().split()) >= {"plain,--state", "plain,--state-dir"}
    fmt = ctxcompact(env={"_CTXCOMPACT_COMPLETE": "zsh_complete", "COMP_WORDS": "ctxcompact run --format c",
                          "COMP_CWORD": "3"})
    assert b"claude-code" in fmt.stdout and b"codex" in fmt.stdout and b"openai" not in fmt.stdout

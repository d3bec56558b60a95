"""A state that passes the schema but does not fit its transcript loses nothing: exit 3, output untouched.

Each case takes a real compaction's state and changes one thing an attacker or a corrupt disk could."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SAMPLE = Path(__file__).parent.parent.parent / "samples" / "openai-long.jsonl"


def ctxcompact(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ctxcompact", *args], capture_output=True, text=True,
                          timeout=120)


@pytest.fixture(scope="module")
def compacted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The sample compacted once, then grown by one record: the state's watermark covers 82 records."""
    d = tmp_path_factory.mktemp("crafted")
    log = d / "log.jsonl"
    log.write_bytes(SAMPLE.read_bytes())
    state = d / "s.json"
    done = ctxcompact("run", str(log), "--window", "32000", "--state", str(state), "-o", str(d / "out.jsonl"))
    assert done.returncode == 0, done.stderr
    obj = json.loads(state.read_text())
    assert obj["watermark"] == 82 and obj["fingerprint"]["system_lines"]
    with log.open("ab") as f:
        f.write(b'{"role":"user","content":"and one more thing"}\n')
    return log, obj


def run_with(tmp_path: Path, log: Path, obj: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    state = tmp_path / "crafted.json"
    state.write_text(json.dumps(obj))
    out = tmp_path / "out.jsonl"
    out.write_bytes(b"before\n")
    done = ctxcompact("run", str(log), "--window", "32000", "--state", str(state), "-o", str(out))
    assert out.read_bytes() == b"before\n", "a refused state must leave the output alone"
    assert "Traceback" not in done.stderr
    return done


def test_the_untouched_state_still_works(compacted: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    log, obj = compacted
    state = tmp_path / "s.json"
    state.write_text(json.dumps(obj))
    done = ctxcompact("run", str(log), "--window", "32000", "--state", str(state), "-o", str(tmp_path / "o"))
    assert done.returncode == 0, done.stderr
    assert b"and one more thing" in (tmp_path / "o").read_bytes()


def test_a_watermark_without_its_summary_is_refused(compacted: tuple[Path, dict[str, Any]],
                                                     tmp_path: Path) -> None:
    log, obj = compacted
    done = run_with(tmp_path, log, {**obj, "summary": None})
    assert done.returncode == 3
    assert "a watermark of 82 needs the summary" in done.stderr


def test_system_line_offsets_must_point_at_system_lines(compacted: tuple[Path, dict[str, Any]],
                                                         tmp_path: Path) -> None:
    log, obj = compacted
    data = log.read_bytes()
    lines = data.splitlines(keepends=True)
    user = next(i for i, ln in enumerate(lines) if b'"role":"user"' in ln)
    offset = sum(len(ln) for ln in lines[:user])
    for span, why in (([offset, len(lines[user])], "is not a system message"),
                      ([3, 20], "is not a whole line")):
        fp = {**obj["fingerprint"], "system_lines": [span]}
        done = run_with(tmp_path, log, {**obj, "fingerprint": fp})
        assert done.returncode == 3, done.stderr
        assert why in done.stderr


def test_a_state_naming_another_format_blames_the_state(compacted: tuple[Path, dict[str, Any]],
                                                         tmp_path: Path) -> None:
    log, obj = compacted
    fp = {**obj["fingerprint"], "format": "codex"}
    done = run_with(tmp_path, log, {**obj, "fingerprint": fp})
    assert done.returncode == 3, done.stderr
    assert "made for a codex transcript" in done.stderr


def test_attachment_lines_must_be_user_lines_inside_the_prefix(compacted: tuple[Path, dict[str, Any]],
                                                                tmp_path: Path) -> None:
    """docs/concepts/handoff.md#attachments-of-the-latest-request: the continuation re-reads the latest
    request's attachments from the lines the state names; a crafted span must not smuggle another line in."""
    log, obj = compacted
    lines = log.read_bytes().splitlines(keepends=True)
    said = next(i for i, ln in enumerate(lines) if b'"role":"assistant"' in ln)
    offset = sum(len(ln) for ln in lines[:said])
    for span, why in (([offset, len(lines[said]) - 1], "is not a user message"),
                      ([offset, obj["fingerprint"]["bytes"]], "reaches past the covered prefix")):
        done = run_with(tmp_path, log, {**obj, "summary": {**obj["summary"], "attachment_lines": [span]}})
        assert done.returncode == 3, done.stderr
        assert why in done.stderr


_AT_MOST = "(at most 9,007,199,254,740,992 in size)"


@pytest.mark.parametrize(("obj", "problem"), [
    ({"calibration": {"points": [[1, 1e308]]}},
     "$.calibration.points[0][1]: 1e+308 is not a number a state holds " + _AT_MOST),
    ({"x-a": [{"b": 2**64}], "summary": {"facts": [[float("inf")]]}},
     "$.summary.facts[0][0]: inf is not a number a state holds (a 64-bit integer or a finite float)"),
    ({"x-a": [{"b": 2**64}]},
     "$.x-a[0].b: 18446744073709551616 is not a number a state holds (a 64-bit integer or a finite float)"),
    ({"watermark": -(2**60), "n": "a string", "t": True},
     "$.watermark: -1152921504606846976 is not a number a state holds " + _AT_MOST),
])
def test_a_numbers_problem_names_its_path(obj: dict, problem: str) -> None:
    """The path of a bad number is made only for the problem, and is the value's whole path."""
    from ctxcompact.state.store import _number_problem

    assert _number_problem(obj) == problem


def test_nesting_too_deep_names_where() -> None:
    from ctxcompact.state.store import MAX_STATE_DEPTH, _number_problem

    obj: dict = {}
    cur = obj
    for _ in range(MAX_STATE_DEPTH + 1):
        cur["x-n"] = [{}]
        cur = cur["x-n"][0]
    got = _number_problem(obj)
    assert got is not None and got.endswith(f": nested deeper than {MAX_STATE_DEPTH} levels")
    assert got.startswith("$.x-n[0].x-n[0]") and "…" in got
    whole = {"summary": {"facts": {"n": 120.0, "f": 1.5}}, "watermark": 3.0, "x-k": 4.0}
    assert _number_problem(whole) is None
    assert whole == {"summary": {"facts": {"n": 120.0, "f": 1.5}}, "watermark": 3, "x-k": 4.0}
    assert type(whole["watermark"]) is int and type(whole["x-k"]) is float

"""validate.py: the broken corpus (exact line numbers and gist), cross-record rules, lenient mode, report."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from ctxcompact.errors import Problem, UsageError
from ctxcompact.formats import read_transcript
from ctxcompact.validate import cross_record_problems, validate

BROKEN = Path(__file__).parent / "data" / "broken"
GOLDEN = sorted((Path(__file__).parent / "data").glob("[oa]*/*.jsonl"))


def found(report_problems: list[Problem]) -> list[tuple[int, str]]:
    return [(p.line, p.path) for p in report_problems]


# (file, format, [(line, path, gist)]) — each gist must appear in that problem's message
CORPUS = [
    ("truncated.jsonl", "auto", [(2, "$", "truncated JSON")]),
    ("non_object.jsonl", "auto", [(2, "$", "got array"), (3, "$", "got string"), (4, "$", "got number")]),
    ("invalid_utf8.jsonl", "auto", [(2, "$", "invalid UTF-8 at byte 33")]),
    ("nan.jsonl", "auto", [(2, "$", "NaN at column 66"), (3, "$", "-Infinity at column 43")]),
    (
        "trailing_garbage.jsonl",
        "auto",
        [(1, "$", "trailing data at column 34"), (2, "$", "trailing data at column 33")],
    ),
    (
        "wrong_types_openai.jsonl",
        "openai",
        [
            (1, "$.role", "expected a string, got number"),
            (2, "$.tool_calls[0].function.arguments", "expected a JSON string, got object"),
            (3, "$.tool_call_id", "missing"),
            (4, "$.usage.prompt_tokens", "expected an integer, got string"),
        ],
    ),
    (
        "wrong_types_anthropic.jsonl",
        "anthropic",
        [
            (2, "$.content[0].input", "expected an object, got string"),
            (3, "$.content[0].tool_use_id", "missing"),
            (4, "$.role", "unknown role 'tool'"),
        ],
    ),
    (
        "duplicate_ids.jsonl",
        "auto",
        [(4, "$.tool_calls[0].id", "duplicate tool-call id 'call_id' (first used at line 2)")],
    ),
    (
        "result_before_call.jsonl",
        "auto",
        [
            (2, "$.tool_call_id", "comes before its call (the call comes later, at line 4)"),
            (3, "$.tool_call_id", "no call with this id exists"),
        ],
    ),
    ("finetune_record.jsonl", "auto", [(1, "$", "one message per line")]),
    (
        "legacy_function.jsonl",
        "auto",
        [(2, "$.function_call", "legacy"), (3, "$.role", "legacy 'function' role")],
    ),
    ("mixed.jsonl", "auto", [(3, "$", "mixed formats")]),
    ("unknown.jsonl", "auto", [(1, "$", "no known format")]),
]


@pytest.mark.parametrize(("name", "fmt", "expected"), CORPUS, ids=[c[0] for c in CORPUS])
def test_broken_corpus(name: str, fmt: str, expected: list[tuple[int, str, str]]) -> None:
    report = validate(BROKEN / name, fmt)
    assert not report.ok
    assert found(report.problems) == [(line, path) for line, path, _ in expected]
    for problem, (_, _, gist) in zip(report.problems, expected, strict=True):
        assert gist in problem.message, (str(problem), gist)
        assert str(problem).startswith(f"line {problem.line}: {problem.path}: ")


@pytest.mark.parametrize("name", ["empty.jsonl", "blank_only.jsonl", "crlf.jsonl", "bom.jsonl"])
def test_valid_edge_inputs(name: str) -> None:
    report = validate(BROKEN / name)
    assert report.ok and report.problems == []
    assert report.records == {"empty.jsonl": 0, "blank_only.jsonl": 0, "crlf.jsonl": 2, "bom.jsonl": 2}[name]


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_golden_files_are_valid(path: Path) -> None:
    report = validate(path)
    assert report.ok, [str(p) for p in report.problems]
    assert report.format == path.parent.name
    assert report.records == len([x for x in path.read_bytes().splitlines() if x.strip()])


def test_lenient_turns_line_problems_into_warnings_and_counts_drops() -> None:
    report = validate(BROKEN / "non_object.jsonl", lenient=True)
    assert report.ok and report.dropped == 3 and report.records == 1
    assert {p.severity for p in report.problems} == {"warning"}
    strict = validate(BROKEN / "non_object.jsonl")
    assert not strict.ok and strict.dropped == 0 and {p.severity for p in strict.problems} == {"error"}


def test_lenient_keeps_cross_record_problems_as_errors() -> None:
    report = validate(BROKEN / "duplicate_ids.jsonl", lenient=True)
    assert not report.ok and report.problems[0].severity == "error"


def test_cross_record_checks_run_on_the_lines_that_were_read() -> None:
    # line 2 is broken JSON; the result on line 3 answers the call on line 1 and the one on line 4 nothing
    data = (
        b'{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function",'
        b'"function":{"name":"f","arguments":"{}"}}]}\n{"role":\n'
        b'{"role":"tool","tool_call_id":"a","content":"ok"}\n{"role":"tool","tool_call_id":"zz","content":"?"}\n'
    )
    report = validate(data)
    assert found(report.problems) == [(2, "$"), (4, "$.tool_call_id")]
    assert "no call with this id exists" in report.problems[1].message


def test_anthropic_cross_record_paths() -> None:
    lines = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "x"},
                {"type": "tool_result", "tool_use_id": "t2", "content": "early"},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "t1", "name": "a", "input": {}},
                {"type": "tool_use", "id": "t1", "name": "a", "input": {}},
                {"type": "tool_use", "id": "t2", "name": "b", "input": {"id": "t1"}},
            ],
        },
    ]
    report = validate(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    assert report.format == "anthropic"
    assert found(report.problems) == [(1, "$.content[1].tool_use_id"), (2, "$.content[1].id")]
    assert "at line 2" in report.problems[0].message
    assert "first used earlier in this line" in report.problems[1].message


def test_cross_record_problems_on_a_clean_transcript_is_empty() -> None:
    t = read_transcript(GOLDEN[0]).transcript
    assert cross_record_problems(t) == []


def test_to_json_is_a_stable_machine_report() -> None:
    report = validate(BROKEN / "result_before_call.jsonl")
    out = report.to_json()
    assert list(out) == ["ok", "format", "records", "dropped", "errors", "warnings", "problems"]
    assert out["ok"] is False and out["format"] == "openai" and out["records"] == 4
    assert out["errors"] == 2 and out["warnings"] == 0
    assert out["problems"][0] == {
        "line": 2,
        "path": "$.tool_call_id",
        "severity": "error",
        "message": report.problems[0].message,
    }
    orjson.dumps(out)  # serializable as is
    assert orjson.loads(orjson.dumps(out)) == out


def test_unknown_format_name_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        validate(BROKEN / "crlf.jsonl", "nonesuch")


def test_undetectable_input_is_a_report_not_an_exception() -> None:
    report = validate(BROKEN / "unknown.jsonl")
    assert report.format == "unknown" and not report.ok and report.records == 0


# --------------------------------------------------------------------------------------------------------
# issue 26 items 7 and 12: one rule for what a valid Claude Code log is (validate, clean, eval agree)

_CC = Path(__file__).parent / "data" / "claude-code" / "spotter-tool-heavy.jsonl"


def _cc_lines() -> list[bytes]:
    return [x for x in _CC.read_bytes().split(b"\n") if x.strip()]


def _call_and_result() -> tuple[int, int]:
    """Indexes of the first tool_use line and of the line holding its result."""
    lines = [orjson.loads(x) for x in _cc_lines()]
    for i, obj in enumerate(lines):
        content = (obj.get("message") or {}).get("content")
        calls = [b["id"] for b in content or [] if isinstance(b, dict) and b.get("type") == "tool_use"]
        if obj.get("type") == "assistant" and calls:
            for j in range(i + 1, len(lines)):
                c = (lines[j].get("message") or {}).get("content")
                if isinstance(c, list) and any(isinstance(b, dict) and b.get("tool_use_id") == calls[0]
                                               for b in c):
                    return i, j
    raise AssertionError("no call and result in the sample")


def test_a_claude_code_result_written_before_its_call_is_valid_and_needs_no_repair(tmp_path: Path) -> None:
    from ctxcompact import api
    from ctxcompact.options import Options

    lines = _cc_lines()
    i, j = _call_and_result()
    moved = [*lines[:i], lines[j], *lines[i:j], *lines[j + 1:]]  # the result line first; parents unchanged
    data = b"\n".join(moved) + b"\n"
    report = validate(data, "claude-code")
    cleaned = api.clean_file(data, "claude-code", warn=lambda _m: None)
    assert report.ok == (not cleaned.repairs), ([str(p) for p in report.problems], cleaned.repairs)
    assert report.ok
    out = tmp_path / "out.jsonl"
    api.run(data, Options(use_state=False, window=1_000_000), output=out)
    assert validate(out).ok


def test_eval_calls_an_untouched_log_ending_on_its_live_call_valid() -> None:
    from ctxcompact import api
    from ctxcompact.options import Options

    lines = _cc_lines()
    i, _j = _call_and_result()
    data = b"\n".join(lines[: i + 1]) + b"\n"  # the session is running: its last call has no result yet
    assert validate(data).ok
    result = api.evaluate(data, Options(use_state=False, window=1_000_000), calibration=False)
    assert not result["compacted"]
    assert result["valid"], result["problems"]

"""Bad input is an error with a line number, never a crash (docs/reference/exit-codes.md#bad-input; issue 19
class 6).

Every command is run in-process through the CLI's own entry point (``fuzz_harness.call_cli``).
"""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from fuzz_harness import call_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxcompact.reader import encode_json

COMMANDS = [
    ["validate"],
    ["validate", "--lenient"],
    ["estimate"],
    ["estimate", "--check", "--window", "100000"],
    ["clean", "-o", "{out}"],
    ["clean", "--lenient", "-o", "{out}"],
    ["run", "--no-state", "--window", "3000", "-o", "{out}"],
    ["run", "--no-state", "--lenient", "--window", "3000", "-o", "{out}"],
]


def _run(tmp_path: Path, data: bytes, argv: list[str]) -> tuple[int | None, str, str]:
    src = tmp_path / "in.jsonl"
    src.write_bytes(data)
    args = [a.replace("{out}", str(tmp_path / "out.jsonl")) for a in argv]
    return call_cli([*args, str(src)])


def _no_crash(code: int | None, out: str, err: str) -> None:
    assert "internal error" not in err + out
    assert "Traceback" not in err + out
    assert code in (0, 1, 5)


UNHASHABLE = {
    "role-array": b'{"role":["user"],"content":"hi"}\n',
    "type-object": b'{"type":{}}\n',
    "block-type-object": b'{"role":"user","content":[{"type":{}}]}\n',
    "openai-part-type-array": (b'{"role":"user","content":"hi"}\n'
                               b'{"role":"user","content":[{"type":["text"]}]}\n'),
    "codex-type-array": b'{"type":["response_item"],"payload":{"type":"message"}}\n',
    "genai-role-object": b'{"parts":[{"text":"hi"}],"role":{}}\n',
    "genai-content-role": b'{"author":"user","invocation_id":"i","content":{"role":["user"],"parts":[]}}\n',
}


@pytest.mark.parametrize("name", sorted(UNHASHABLE))
@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_unhashable_values_are_line_errors(tmp_path: Path, name: str, argv: list[str]) -> None:
    code, out, err = _run(tmp_path, UNHASHABLE[name], argv)
    _no_crash(code, out, err)
    if "--lenient" not in argv:
        assert code == 1
        assert "line " in out + err  # the message names the line


def _deep(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


def _deep_logs(depth: int) -> dict[str, list[str]]:
    d = _deep(depth)
    return {
        "anthropic-tool-input": [
            json.dumps({"role": "user", "content": "hi"}),
            json.dumps({"role": "assistant", "content": [
                {"type": "tool_use", "id": "t1", "name": "x", "input": {"a": "X"}}]}).replace('"X"', d),
            json.dumps({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                                     "content": "ok"}]}),
        ],
        "gemini-args-response": [
            json.dumps({"role": "user", "parts": [{"text": "hi"}]}),
            json.dumps({"role": "model", "parts": [{"function_call": {
                "id": "c1", "name": "f", "args": {"a": "X"}}}]}).replace('"X"', d),
            json.dumps({"role": "user", "parts": [{"function_response": {
                "id": "c1", "name": "f", "response": {"a": "X"}}}]}).replace('"X"', d),
        ],
        "claude-code-tool-input": [
            json.dumps({"type": "user", "sessionId": "s", "uuid": "u1", "parentUuid": None,
                        "timestamp": "2025-01-01T00:00:00Z", "message": {"role": "user", "content": "hi"}}),
            json.dumps({"type": "assistant", "sessionId": "s", "uuid": "u2", "parentUuid": "u1",
                        "timestamp": "2025-01-01T00:00:01Z",
                        "message": {"id": "m1", "role": "assistant", "content": [
                            {"type": "tool_use", "id": "t1", "name": "x", "input": {"a": "X"}}]}}
                       ).replace('"X"', d),
        ],
    }


@pytest.mark.parametrize("depth", [255, 256, 700, 1016])
@pytest.mark.parametrize("log", ["anthropic-tool-input", "gemini-args-response", "claude-code-tool-input"])
def test_deep_nesting_the_parser_accepts_is_read(tmp_path: Path, depth: int, log: str) -> None:
    """Up to the JSON parser's 1024 levels a line is valid: every command reads it, compaction included."""
    data = ("\n".join(_deep_logs(depth)[log]) + "\n").encode()
    for argv in (["validate"], ["estimate"], ["clean", "-o", "{out}"],
                 ["run", "--no-state", "--window", "3000", "-o", "{out}"],
                 ["run", "--no-state", "--window", "150", "--to", "openai", "-o", "{out}"]):
        code, out, err = _run(tmp_path, data, argv)
        _no_crash(code, out, err)
        assert code in (0, 5), (argv, err)


def test_deeper_than_the_parser_is_the_documented_message(tmp_path: Path) -> None:
    data = ("\n".join(_deep_logs(1100)["anthropic-tool-input"]) + "\n").encode()
    for argv in COMMANDS:
        code, out, err = _run(tmp_path, data, argv)
        _no_crash(code, out, err)
        if "--lenient" not in argv:
            assert code == 1
            assert "line 2" in out + err and "more than 1024 levels" in out + err


def test_encode_json_matches_orjson_and_goes_deeper() -> None:
    value = {"a": [1, 2.5, "x\n\u2028é\x00", None, True, {"b": {}}], "c": [], "d": -1e300}
    assert encode_json(value) == orjson.dumps(value)
    deep = _deep(1000)
    assert encode_json(orjson.loads(deep)) == deep.encode()


@settings(max_examples=60, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(),
                    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(), kids, max_size=4),
                    max_leaves=30))
def test_encode_json_is_orjson_below_its_limit(value: object) -> None:
    assert encode_json(value) == orjson.dumps(value)


def _claude_code_with_numeric_timestamp() -> bytes:
    src = Path(__file__).parent.parent / "data" / "claude-code" / "spotter-short.jsonl"
    lines = src.read_bytes().splitlines()
    out = []
    for i, line in enumerate(lines):
        obj = orjson.loads(line)
        if i == 2:
            obj["timestamp"] = 0  # a schema error the parser alone does not see
        out.append(orjson.dumps(obj))
    return b"\n".join(out) + b"\n"


def test_estimate_rejects_what_run_rejects(tmp_path: Path) -> None:
    """`estimate --check` exiting 0 means `run` will not fail on validity (issue 19 class 6)."""
    data = _claude_code_with_numeric_timestamp()
    run = _run(tmp_path, data, ["run", "--no-state", "-o", "{out}"])
    assert run[0] == 1 and "line 3: $.timestamp" in run[2]
    for argv in (["estimate"], ["estimate", "--json"], ["estimate", "--check", "--window", "1000000"]):
        code, _, err = _run(tmp_path, data, argv)
        assert code == 1, argv
        assert "line 3: $.timestamp" in err
    # --lenient drops the line in both
    assert _run(tmp_path, data, ["estimate", "--lenient"])[0] == 0
    assert _run(tmp_path, data, ["run", "--no-state", "--lenient", "-o", "{out}"])[0] == 0


def test_a_line_glued_onto_an_unterminated_covered_line_is_rejected(tmp_path: Path) -> None:
    """A stateful run reads the appended bytes as validate does: glued onto the unterminated last line they
    make one line with trailing data (exit 1), not a fresh valid line."""
    lines = [{"role": "system", "content": "sys"}]
    for i in range(30):
        lines += [{"role": "user", "content": f"question {i} " + "x" * 400},
                  {"role": "assistant", "content": f"answer {i} " + "y" * 400}]
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"\n".join(orjson.dumps(x) for x in lines))  # no newline after the last line
    out = str(tmp_path / "out.jsonl")
    code, _, err = call_cli(["run", str(src), "--window", "3000", "-o", out])
    assert code == 0, err
    with src.open("ab") as f:
        f.write(b'{"role":"user","content":"glued"}\n')
    assert call_cli(["validate", str(src)])[0] == 1
    before = Path(out).read_bytes()
    code, _, err = call_cli(["run", str(src), "--window", "3000", "-o", out])
    assert code == 1
    assert "line 61" in err and "trailing data" in err
    assert Path(out).read_bytes() == before  # nothing written


def test_run_reports_its_repairs_by_kind_unless_quiet(tmp_path: Path) -> None:
    """issue 14 item 7: every repair is reported (one stderr line by kind); -q silences it."""
    src = Path(__file__).parent.parent / "data" / "clean" / "openai_duplicate_call_id" / "input.jsonl"
    data = src.read_bytes()
    code, _, err = _run(tmp_path, data, ["run", "--no-state", "-o", "{out}"])
    assert code == 0
    assert "ctxcompact: repaired 1 thing in the input: duplicate call id 1" in err
    code, _, err = _run(tmp_path, data, ["run", "--no-state", "-q", "-o", "{out}"])
    assert code == 0 and "repaired" not in err
    clean = Path(__file__).parent.parent / "data" / "clean" / "openai_no_repair" / "input.jsonl"
    assert "repaired" not in _run(tmp_path, clean.read_bytes(), ["run", "--no-state", "-o", "{out}"])[2]


def test_repairs_line_counts_every_kind() -> None:
    from ctxcompact.clean import Repair
    from ctxcompact.cli.render import repairs_line

    repairs = [Repair("missing_result", 3, "x"), Repair("duplicate_call_id", 4, "y"),
               Repair("missing_result", 9, "z")]
    assert repairs_line(repairs) == "repaired 3 things in the input: missing result 2, duplicate call id 1"


_FIELD_VALUES = st.sampled_from([None, 5, -1, True, "x", [], {}, 1.5])


@settings(max_examples=40, deadline=None)
@given(field=st.sampled_from(["name", "refusal", "tool_call_id", "usage"]), value=_FIELD_VALUES,
       usage_key=st.sampled_from(["prompt_tokens", "completion_tokens", "total_tokens"]))
def test_estimate_and_run_agree_on_typed_fields(tmp_path_factory: pytest.TempPathFactory, field: str,
                                                value: object, usage_key: str) -> None:
    """`estimate` and `run` read through the one pipeline: they agree on validity whatever a typed optional
    field holds."""
    tmp_path = tmp_path_factory.mktemp("fast")
    line: dict[str, object] = {"role": "assistant", "content": "ok"}
    line[field] = {usage_key: value} if field == "usage" else value
    data = orjson.dumps({"role": "user", "content": "hi"}) + b"\n" + orjson.dumps(line) + b"\n"
    est = _run(tmp_path, data, ["estimate", "--exact", "none"])[0]
    run = _run(tmp_path, data, ["run", "--no-state", "-o", "{out}"])[0]
    assert (est == 1) == (run == 1)

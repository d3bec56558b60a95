"""Issue 14.5: error status from the outcome the log records, not from words; resolution by command, tool or
file; file lists that hold files; multi-line errors kept to their meaningful lines. Each rule on a real log of
the corpus (tests/data/*/SOURCES.md) and on a minimal synthetic case."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from ctxcompact.facts import (
    commands_run,
    error_line,
    errors_seen,
    files_touched,
    path_tokens,
    result_is_error,
)
from ctxcompact.formats import read_transcript
from ctxcompact.model import Message, Origin, Record, Role, TextBlock, ToolCall, ToolResult
from ctxcompact.summarizers.base import SummaryRequest
from ctxcompact.summarizers.extractive import ExtractiveSummarizer, extract_facts

DATA = Path(__file__).resolve().parent.parent / "data"
LMSTUDIO = DATA / "codex" / "codex-session-view-lmstudio-0.58.0.jsonl"
AGTRACE_CODEX = DATA / "codex" / "agtrace-codex-session.jsonl"
ORCHESTRATOR = DATA / "claude-code" / "claude-code-viewer-orchestrator-1.0.108.jsonl"


def load(path: Path) -> list[Record]:
    return read_transcript(path).transcript.records


def parse(fmt: str, lines: list[Any]) -> list[Record]:
    data = b"\n".join(orjson.dumps(x) for x in lines) + b"\n"
    return read_transcript(data, fmt).transcript.records


def results(records: list[Record]) -> list[ToolResult]:
    return [r for rec in records if rec.message is not None for r in rec.message.tool_results()]


def rec(role: Role, *blocks: Any) -> Record:
    return Record(index=0, line=0, raw=None, data=None, origin=Origin.INPUT,
                  message=Message(role, [TextBlock(b) if isinstance(b, str) else b for b in blocks]))


def call(cid: str, name: str, args: Any) -> Record:
    return rec(Role.ASSISTANT, ToolCall(cid, name, orjson.dumps(args).decode(), args))


def res(cid: str, text: str, succeeded: bool | None = None, is_error: bool = False) -> Record:
    return rec(Role.TOOL, ToolResult(cid, [TextBlock(text)], is_error=is_error, succeeded=succeeded))


# ------------------------------------------------------------ the structured outcome first


def test_lmstudio_cat_that_exited_0_is_not_an_error() -> None:
    records = load(LMSTUDIO)
    cats = [e for e in errors_seen(records) if e.command and "LM Studio configuration.md" in e.command]
    assert cats == []  # the file's text says "error" and "500", its exit code says 0
    runs = {c.command: c.ok for c in commands_run(records)}
    assert runs["cat 'LM Studio configuration.md'"] is True
    # the commands that did exit non-zero are still failures, and their text is the output, not JSON
    failed = errors_seen(records)
    assert failed and all(not e.text.startswith("{") for e in failed)
    assert any("No such file or directory" in e.text for e in failed)
    # every Codex result of that log carries its exit code
    outs = [r for r in results(records) if r.text().startswith('{"output"')]
    assert outs and all(r.succeeded is not None for r in outs)


def test_codex_exit_code_decides_whatever_the_words() -> None:
    def rollout(output: str) -> list[Any]:
        return [
            {"type": "session_meta", "payload": {"id": "s", "instructions": ""}},
            {"type": "response_item", "payload": {"type": "function_call", "name": "shell", "call_id": "c1",
                                                  "arguments": '{"command":["bash","-lc","cat notes.md"]}'}},
            {"type": "response_item", "payload": {"type": "function_call_output", "call_id": "c1",
                                                  "output": output}},
        ]

    ok = {"output": "Error: HTTP 500 from the server\nTraceback (most recent call last):", "metadata":
          {"exit_code": 0, "duration_seconds": 0.0}}
    (r,) = results(parse("codex", rollout(orjson.dumps(ok).decode())))
    assert r.succeeded is True and not result_is_error(r, True)
    bad = {"output": "all good", "metadata": {"exit_code": 2}}
    (r,) = results(parse("codex", rollout(orjson.dumps(bad).decode())))
    assert r.succeeded is False and result_is_error(r, True)
    header = "Exit code: {}\nWall time: 0.1 seconds\nOutput:\n"
    (r,) = results(parse("codex", rollout(header.format(0) + "FAILED is a word\n")))
    assert r.succeeded is True and not result_is_error(r, True)
    (r,) = results(parse("codex", rollout(header.format(1) + "error: no shim\n")))
    assert r.succeeded is False
    (r,) = results(parse("codex", rollout("Error: boom")))
    assert r.succeeded is None and result_is_error(r, True)  # nothing structured: the words decide


def test_agtrace_codex_exit_code_header_real_log() -> None:
    records = load(AGTRACE_CODEX)
    header = [r for r in results(records) if r.text().startswith("Exit code: ")]
    assert header and all(r.succeeded is (r.text().startswith("Exit code: 0")) for r in header)
    texts = [e.text for e in errors_seen(records)]
    assert "error: target shim binary not found" in texts


def test_claude_code_is_error_is_the_outcome() -> None:
    base = {"sessionId": "s", "isSidechain": False, "userType": "external", "cwd": "/w"}
    lines = [
        {**base, "type": "assistant", "uuid": "a", "parentUuid": None, "message": {
            "id": "m1", "role": "assistant", "content": [
                {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "pytest -q"}}]}},
        {**base, "type": "user", "uuid": "b", "parentUuid": "a", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "test_errors.py::test_raises PASSED\n"
             "Error: expected in the test name\n3 passed"}]}},
    ]
    (r,) = results(parse("claude-code", lines))
    assert r.succeeded is True and not result_is_error(r, True)
    lines[1]["message"]["content"][0]["is_error"] = True
    (r,) = results(parse("claude-code", lines))
    assert r.succeeded is False and result_is_error(r, True)


def test_anthropic_is_error_when_written_words_when_not() -> None:
    def log(block_extra: dict[str, Any]) -> list[Any]:
        return [
            {"role": "user", "content": "run it"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "bash",
                                               "input": {"command": "make"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
                                          "content": "Error: make failed", **block_extra}]},
        ]

    (r,) = results(parse("anthropic", log({"is_error": False})))
    assert r.succeeded is True and not result_is_error(r, True)
    (r,) = results(parse("anthropic", log({})))
    assert r.succeeded is None and result_is_error(r, True)


def test_adk_status_and_error_fields() -> None:
    def event(response: dict[str, Any]) -> list[Any]:
        return [{"role": "user", "parts": [{"text": "go"}]},
                {"role": "model", "parts": [{"function_call": {"id": "f", "name": "lookup", "args": {}}}]},
                {"role": "user", "parts": [{"function_response": {"id": "f", "name": "lookup",
                                                                  "response": response}}]}]

    (r,) = results(parse("genai", event({"status": "error", "error_message": "city unknown"})))
    assert r.succeeded is False and result_is_error(r, False)  # even a reading tool's structured failure
    (r,) = results(parse("genai", event({"status": "success", "report": "Error: none, 500 ok"})))
    assert r.succeeded is True and not result_is_error(r, True)
    (r,) = results(parse("genai", event({"report": "sunny"})))
    assert r.succeeded is None


def test_openai_error_field_beside_the_tool_message() -> None:
    lines = [{"role": "user", "content": "go"},
             {"role": "assistant", "content": None, "tool_calls": [
                 {"id": "c", "type": "function", "function": {"name": "fetch", "arguments": "{}"}}]},
             {"role": "tool", "tool_call_id": "c", "content": "timeout", "is_error": True}]
    (r,) = results(parse("openai", lines))
    assert r.succeeded is False
    lines[2].pop("is_error")
    (r,) = results(parse("openai", lines))
    assert r.succeeded is None


# ------------------------------------------------------------ resolved by the same command, tool or file


def test_orchestrator_edit_error_resolved_by_a_later_edit_real_log() -> None:
    errors = errors_seen(load(ORCHESTRATOR))
    edits = [e for e in errors if e.tool == "Edit"]
    assert edits and all("has not been read yet" in e.text for e in edits)
    assert all(e.resolved and e.resolved_by == "rerun" for e in edits)
    assert all("<tool_use_error>" not in e.text for e in errors)


def test_file_error_resolved_by_same_tool_or_a_write_of_that_file() -> None:
    failed = "File has not been read yet. Read it first before writing to it."
    edit = {"file_path": "/w/app.tsx", "old_string": "a", "new_string": "b"}
    only_read = [call("1", "Edit", edit), res("1", failed, False, True),
                 call("2", "Read", {"file_path": "/w/app.tsx"}), res("2", "1→a", True)]
    (e,) = errors_seen(only_read)
    assert not e.resolved  # reading the file is not the edit that failed
    then_edit = [*only_read, call("3", "Edit", edit), res("3", "updated", True)]
    assert errors_seen(then_edit)[0].resolved
    write = {"file_path": "/w/app.tsx", "content": "b"}
    by_write = [*only_read, call("3", "Write", write), res("3", "ok", True)]
    assert errors_seen(by_write)[0].resolved
    other_file = [*only_read, call("3", "Edit", {**edit, "file_path": "/w/other.tsx"}), res("3", "ok", True)]
    assert not errors_seen(other_file)[0].resolved
    # a non-file tool: its next success resolves it; a shell command: only the same command
    tool = [call("1", "Task", {"description": "x"}), res("1", "InputValidationError: missing", False),
            call("2", "Task", {"description": "x", "prompt": "p"}), res("2", "done", True)]
    assert errors_seen(tool)[0].resolved
    shell = [call("1", "Bash", {"command": "pytest"}), res("1", "1 failed", False),
             call("2", "Bash", {"command": "ls"}), res("2", "a", True)]
    assert not errors_seen(shell)[0].resolved


def test_file_error_resolved_across_compactions() -> None:
    """The prior facts' error is resolved by a success in the next records (the state carries it)."""
    edit = {"file_path": "/w/app.tsx", "old_string": "a", "new_string": "b"}
    first = extract_facts(SummaryRequest([call("1", "Edit", edit), res("1", "not read", False, True)], 4000))
    assert first["errors"] and not first["errors"][0]["resolved"]
    later = [call("2", "MultiEdit", {"file_path": "/w/app.tsx", "edits": []}), res("2", "ok", True)]
    second = extract_facts(SummaryRequest(later, 4000, prior_facts=first))
    assert second["errors"][0]["resolved"]


# ------------------------------------------------------------ file lists hold files


def test_lmstudio_files_are_files_real_log() -> None:
    paths = [f.path for f in files_touched(load(LMSTUDIO))]
    assert "LM Studio configuration.md" in paths
    assert "configuration.md" not in paths
    assert not [p for p in paths if p.startswith("/v1/") or p in ("/dev/null", "response.json")]
    assert "components/chat/chat-helpers/index.ts" in paths  # named in an apply_patch header


@pytest.mark.parametrize(("text", "want", "unwanted"), [
    ("cat 'LM Studio configuration.md'", ["LM Studio configuration.md"], ["configuration.md"]),
    ('"My Notes/todo list.txt" please', ["My Notes/todo list.txt"], ["list.txt"]),
    ("make > /dev/null 2>&1 && cat /proc/cpuinfo", [], ["/dev/null", "/proc/cpuinfo"]),
    ('curl localhost:1234/v1/chat/completions; rg "/api/chat/custom" app', [],
     ["/v1/chat/completions", "/api/chat/custom"]),
    ("add console.log(x) and process.env to src/app.js", ["src/app.js"], ["console.log", "process.env"]),
    ("ls /home/dev/project/bin/tool", ["/home/dev/project/bin/tool"], []),
])
def test_path_tokens_hold_files(text: str, want: list[str], unwanted: list[str]) -> None:
    got = path_tokens(text)
    assert all(w in got for w in want), got
    assert not [u for u in unwanted if u in got], got


def test_heredoc_body_is_not_a_file_list() -> None:
    patch = ("apply_patch <<'PATCH'\n*** Begin Patch\n*** Update File: lib/chat.ts\n"
             "+  const data = await response.json()\n+  fetch('/v1/chat/completions')\n*** End Patch\nPATCH")
    paths = [f.path for f in files_touched([call("1", "shell", {"command": ["bash", "-lc", patch]})])]
    assert paths == ["lib/chat.ts"]


# ------------------------------------------------------------ multi-line errors


def test_multi_line_error_keeps_its_meaning() -> None:
    text = ("<tool_use_error>InputValidationError: Task failed due to the following issue:\n"
            "The required parameter `prompt` is missing</tool_use_error>")
    line = error_line(text)
    assert "InputValidationError" in line and "`prompt` is missing" in line and "<" not in line
    cause = "Error: build failed\nCaused by: missing module foo\n\n├── a\n└── b\n" + "noise\n" * 10
    line = error_line(cause)
    assert "build failed" in line and "missing module foo" in line and "├" not in line and "noise" not in line
    # one telling line stays one line
    tb = 'Traceback (most recent call last):\n  File "x.py", line 1\nKeyError: \'a\'\n'
    assert error_line(tb) == "KeyError: 'a'"


def test_orchestrator_multi_line_error_real_log() -> None:
    errors = errors_seen(load(ORCHESTRATOR))
    task = [e for e in errors if e.tool == "Task"]
    assert task and "is missing" in task[0].text  # the second line says what was wrong


def test_lmstudio_summary_before_after() -> None:
    text = ExtractiveSummarizer().summarize(SummaryRequest(load(LMSTUDIO), 8000)).text
    errors = text.split("## Errors", 1)[1].split("\n## ", 1)[0]
    assert "LM Studio configuration.md" not in errors and '{"output"' not in errors
    assert "- LM Studio configuration.md (" in text


def test_search_that_found_nothing_is_not_an_error() -> None:
    # real log: `rg -n "OLLAMA" -n` exited 1 with no output (nothing matched); `rg … src` exited 2, said why
    texts = {e.command: e.text for e in errors_seen(load(LMSTUDIO))}
    assert 'rg -n "OLLAMA" -n' not in texts
    assert 'rg -n "eventsource-parser" -n src -g"*.ts"' in texts
    # synthetic: the same rule, and a pipeline or an output keeps the failure
    cases = (("grep -rn foo src", "", False), ("grep -rn foo src", "grep: src: No such file", True),
             ("make test", "", True), ("grep foo a.txt | wc -l", "", True))
    for cmd, out, failed in cases:
        records = [call("1", "Bash", {"command": cmd}), res("1", out, False)]
        assert bool(errors_seen(records)) is failed, cmd


def test_llm_prompt_marks_a_structured_failure() -> None:
    from ctxcompact.summarizers.prompt import build_user_prompt

    records = [call("1", "shell", {"command": "make"}), res("1", "make: *** [all] 2", False),
               call("2", "shell", {"command": "ls"}), res("2", "a.py", True)]
    prompt, _ = build_user_prompt(SummaryRequest(records, 2000), 50_000)
    assert "(id 1, error)" in prompt and "(id 2)" in prompt

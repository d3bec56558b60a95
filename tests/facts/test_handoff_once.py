"""What the next call sees is said once (issue 23, left open after the handoff work): the answer to an
answered request is quoted in the continuation and not repeated under the summary's findings
(docs/concepts/handoff.md#the-continuation), and it stays a finding once a newer request comes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers import summary_and_continuation

from ctxcompact import api
from ctxcompact.facts.store import Entry
from ctxcompact.summarizers.layout import answered_after

DATA = Path(__file__).resolve().parent.parent / "data"
ANSWER = "All 12 tests pass; the flaky one was a race in cache.py, fixed with a lock."
EARLIER = "Done: the repository is initialised, with a pre-commit hook for ruff."


def jsonl(objs: list[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(o) + b"\n" for o in objs)


def call(cid: str, cmd: str) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": cid, "type": "function", "function": {"name": "bash", "arguments": orjson.dumps(
            {"cmd": cmd}).decode()}}]}


def result(cid: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": text}


def answered_session() -> list[dict[str, Any]]:
    return [{"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "Set up the project; never push to main."},
            call("c0", "git init"), result("c0", "Initialized empty Git repository " + "x" * 20_000),
            {"role": "assistant", "content": EARLIER},
            {"role": "user", "content": "Now run the tests and fix what fails."},
            call("c1", "pytest -q"), result("c1", "1 failed, 11 passed " + "z" * 8_000),
            {"role": "assistant", "content": ANSWER}]


def flat(text: str) -> str:
    return " ".join(text.split())


def test_synthetic_answer_is_quoted_once_in_the_continuation(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(jsonl(answered_session()))
    opts = api.Options(window=400_000, threshold="200")
    res = api.run(path, opts, output=tmp_path / "out.jsonl", warn=lambda _m: None)
    summary, continuation = summary_and_continuation(res)
    assert "The assistant already answered it:\n\n" + ANSWER in continuation
    assert ANSWER not in summary and "its last answer" not in summary  # said once, where it is read
    assert EARLIER in summary  # an earlier answer is still a finding
    # a newer request: the answer is now one of the findings, whole (the fact store kept it)
    with path.open("ab") as f:
        f.write(jsonl([{"role": "user", "content": "Open a PR with a short description."},
                       call("c2", "gh pr create --fill"),
                       result("c2", "https://github.com/o/r/pull/7 " + "p" * 9000),
                       {"role": "assistant", "content": "Opened pull request 7."}]))
    again = api.run(path, opts, output=tmp_path / "out.jsonl", warn=lambda _m: None)
    summary, continuation = summary_and_continuation(again)
    assert again.compacted and ANSWER in summary and ANSWER not in continuation


def test_answered_after_matches_whole_and_stored_short_findings() -> None:
    long = "Plan " + "a" * 7000
    findings = (Entry("First answer.", 1), Entry(long[:5999] + "…", 5), Entry("Not quoted.", 7))
    assert [e.at for e in answered_after(findings, f"First answer.\n\n{long}")] == [1, 5]
    assert answered_after(findings, None) == [] and answered_after((), "x") == []
    assert answered_after((Entry("…", 2),), "anything") == []  # an empty remainder matches nothing


@pytest.mark.parametrize(("log", "window", "threshold", "answer"), [
    ("codex/agentlogs-codex-crud.jsonl", 7300, None, "Created `JOKE.md`, read it, updated the footer line"),
    ("claude-code/agtrace-claude-session.jsonl", 400_000, "200", "Perfect! The script executed successfully"),
])
def test_real_answered_log_quotes_the_answer_once(log: str, window: int, threshold: str | None,
                                                  answer: str) -> None:
    res = api.run(DATA / log, api.Options(window=window, threshold=threshold), dry_run=True,
                  warn=lambda _m: None)
    assert res.compacted
    summary, continuation = summary_and_continuation(res)
    assert answer in flat(continuation)
    assert answer not in flat(summary)

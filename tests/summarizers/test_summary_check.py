"""The check of an LLM summary before it replaces the conversation: unusable replies fall back to the
extractive summary (reason in the state and on stderr), missing facts are pinned, and `run` says what the
check did. Unit tests on the check itself, then the real CLI against a loopback OpenAI-compatible server."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from helpers import assistant, ctxcompact, jsonl, sys_msg, tool, user
from hypothesis import given, settings
from hypothesis import strategies as st
from providers import ProviderServer, openai_completion

from ctxcompact.facts.text import SUMMARY_MARKER
from ctxcompact.formats import read_transcript
from ctxcompact.model import Record, Role
from ctxcompact.options import Options
from ctxcompact.summarizers.base import SummaryRequest
from ctxcompact.summarizers.check import PINNED_HEADING, SECTIONS, check_summary, sections_in
from ctxcompact.summarizers.extractive import extract_facts
from ctxcompact.summarizers.fallback import SummaryRejected, checked, summarize

RULE = "Never touch the migrations/ folder."
RULE2 = "Always run pytest with -x before committing."
LATEST = "Now add a --verbose flag to cli.py and keep the tests green."
ERROR = "AssertionError: expected 3 retries, got 2"


def session() -> list[dict[str, object]]:
    return [
        sys_msg("You are a coding agent."),
        user(f"Fix the retry bug in src/retry_policy.py. {RULE} {RULE2}"),
        assistant(None, [("c1", "read_file", {"path": "src/retry_policy.py"})]),
        tool("c1", "def backoff(attempt):\n    return 2 ** attempt\n" * 120),
        assistant(None, [("c2", "bash", {"command": "pytest -x tests/test_retry.py"})]),
        tool("c2", f"FAILED tests/test_retry.py::test_three - {ERROR}\nexit code 1"),
        assistant(None, [("c3", "todo_write", {"todos": [
            {"content": "make backoff honour max_retries", "status": "in_progress"},
            {"content": "document the retry policy", "status": "pending"}]})]),
        tool("c3", "ok"),
        assistant("The backoff ignores max_retries; fixing it next."),
        user(LATEST),
    ]


def records() -> list[Record]:
    """The session as the model reads it, without its system prompt (what a strategy summarizes)."""
    recs = read_transcript(jsonl(session())).transcript.records
    return [r for r in recs if r.message is not None and r.message.role is not Role.SYSTEM]


def request(budget: int = 1_500) -> SummaryRequest:
    recs = records()
    return SummaryRequest(records=recs, budget_tokens=budget, latest_request=LATEST)


GOOD = f"""## User goals and rules
- Fix the retry bug in src/retry_policy.py.
- "{RULE}"
- "{RULE2}"
## Timeline
- read src/retry_policy.py, ran pytest -x tests/test_retry.py: it failed.
## Technical context
- pytest
## Files and code
- src/retry_policy.py: backoff(attempt)
## Active work
- fixing backoff to honour max_retries
## Unresolved issues
- {ERROR} (unresolved)
- [in_progress] make backoff honour max_retries
- [pending] document the retry policy
## Next step
- "{LATEST}"
"""


def test_a_complete_summary_passes() -> None:
    req = request()
    check, block = check_summary(GOOD, extract_facts(req), req.records, req.budget_tokens)
    assert (check.verdict, check.added, block) == ("passed", {}, None)
    assert check.sections_missing == []


def test_missing_facts_are_pinned_verbatim() -> None:
    req = request()
    weak = "## User goals and rules\n- fix the retry bug in retry_policy.py\n## Next step\n- carry on\n"
    check, block = check_summary(weak, extract_facts(req), req.records, req.budget_tokens)
    assert check.verdict == "amended"
    # the latest request holds a rule ("keep the tests green"): pinned once, as the request
    # files: those the tools touched (cli.py, named in the request, was touched by none)
    assert check.added == {"rules": 2, "latest_request": 1, "todos": 2, "last_error": 1, "files": 2}
    assert check.sections_missing == [s for s in SECTIONS if s not in ("User goals and rules", "Next step")]
    assert block is not None and block.startswith(PINNED_HEADING)
    for fact in (RULE, RULE2, LATEST, "[in_progress] make backoff honour max_retries", ERROR,
                 "src/retry_policy.py", "UNRESOLVED"):
        assert fact in block


def test_one_dropped_rule_is_the_only_thing_pinned() -> None:
    req = request()
    check, block = check_summary(GOOD.replace(f'- "{RULE2}"\n', ""), extract_facts(req), req.records, 1_500)
    assert (check.verdict, check.added) == ("amended", {"rules": 1})
    assert block is not None and RULE2 in block and RULE not in block


@pytest.mark.parametrize(("text", "reason"), [
    ("", "empty"),
    ("   \n ", "empty"),
    ("To write a good summary, first read the conversation carefully and note the important points. "
     "Then organise them into sections.", "none of the sections"),
    ("## User goals and rules\n- The user wants a concise, accurate summary.\n## Next step\n- Write the "
     "summary in Markdown with clear headings.", "off-topic"),
])
def test_unusable_summaries_are_rejected(text: str, reason: str) -> None:
    req = request()
    check, block = check_summary(text, extract_facts(req), req.records, req.budget_tokens)
    assert check.verdict == "rejected" and reason in (check.reason or "") and block is None


def test_headings_in_other_markdown_styles_count() -> None:
    text = "**User goals and rules**\n1. Timeline\n### NEXT STEP:\nUnresolved issues - none"
    assert sections_in(text) == ["User goals and rules", "Timeline", "Unresolved issues", "Next step"]
    assert sections_in("we discussed the timeline") == []


def test_checked_keeps_the_summary_within_budget_and_the_facts() -> None:
    from ctxcompact.summarizers.base import SummaryResult

    req = request(budget=400)
    long = "## User goals and rules\n- retry_policy.py\n" + "filler line about backoff\n" * 400
    result = checked(SummaryResult(text=long, summarizer="openai"), req)
    assert len(result.text) <= 400 * 4
    assert result.text.startswith(SUMMARY_MARKER) and RULE in result.text and RULE2 in result.text
    assert result.truncated and result.check is not None and result.check["verdict"] == "amended"
    assert result.facts is not None and RULE in result.facts["rules"]


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=3000), st.integers(min_value=50, max_value=3000))
def test_a_checked_summary_never_exceeds_its_budget(text: str, budget: int) -> None:
    from ctxcompact.summarizers.base import SummaryResult

    req = request(budget=budget)
    try:
        result = checked(SummaryResult(text="## Timeline\nretry_policy.py " + text, summarizer="openai"), req)
    except SummaryRejected:
        return
    assert len(result.text) <= budget * 4


def test_rejected_summary_with_no_fallback_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    with ProviderServer() as server:
        server.push(openai_completion("I cannot help with that."))
        opts = Options(summarizer="openai", summary_model="m", base_url=server.openai_url, no_fallback=True,
                       max_retries=0, timeout=10)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
        with pytest.raises(SummaryRejected, match="none of the sections"):
            summarize(request(), opts, lambda _: None)


# --- the real CLI --------------------------------------------------------------------------------------

def run_cli(tmp_path: Path, reply: str, *extra: str) -> tuple[object, dict, str]:
    log = tmp_path / "s.jsonl"
    log.write_bytes(jsonl(session()))
    with ProviderServer() as server:
        server.push(openai_completion(reply, prompt_tokens=1800, completion_tokens=90))
        proc = ctxcompact("run", str(log), "--window", "3000", "--threshold", "100", "--summarizer", "openai",
                          "--summary-model", "smollm2", "--base-url", server.openai_url, "-o",
                          str(tmp_path / "o.jsonl"), *extra,
                          env={"NO_PROXY": "127.0.0.1,localhost", "OPENAI_API_KEY": "", "HTTP_PROXY": ""})
    state = orjson.loads((tmp_path / "s.jsonl.ctxstate.json").read_bytes()) if proc.returncode == 0 else {}
    out = (tmp_path / "o.jsonl").read_text() if (tmp_path / "o.jsonl").exists() else ""
    return proc, state, out


def test_run_falls_back_on_an_unusable_summary(tmp_path: Path) -> None:
    proc, state, out = run_cli(tmp_path, "A good summary is short, accurate and well organised.")
    assert proc.returncode == 0, proc.stderr
    summary = state["summary"]
    assert summary["summarizer"] == "extractive" and summary["fallback"] is True
    assert "none of the sections" in summary["fallback_reason"]
    assert summary["check"]["verdict"] == "rejected"
    assert b"none of the sections" in proc.stderr and b"extractive" in proc.stderr
    assert RULE in out and RULE2 in out  # the extractive summary quotes the rules


def test_run_pins_what_the_model_dropped_and_says_so(tmp_path: Path) -> None:
    proc, state, out = run_cli(tmp_path, "## User goals and rules\n- fix the retry bug in retry_policy.py\n")
    assert proc.returncode == 0, proc.stderr
    summary = state["summary"]
    assert (summary["summarizer"], summary["fallback"]) == ("openai", False)
    assert summary["check"]["verdict"] == "amended"
    assert summary["check"]["added"]["rules"] == 2
    assert (summary["input_tokens"], summary["output_tokens"]) == (1800, 90)
    assert RULE in out and RULE2 in out and "Pinned facts" in out
    line = proc.stderr.decode()
    assert "summary by openai" in line and "check pinned 2 rules" in line
    assert "1,800 tokens in, 90 out" in line


def test_run_no_fallback_exits_4_on_an_unusable_summary(tmp_path: Path) -> None:
    proc, _, out = run_cli(tmp_path, "", "--no-fallback")
    assert proc.returncode == 4 and out == ""

"""The fact store and the summary built from it (issue 23 items 4, 5, 7; docs/concepts/summary.md): facts
merged at each compaction by a pure, idempotent merge with a stated drop rule; the summary fitted in the
window's own tokens; what a continuing agent needs ranked above timelines and command lists; no noise in
the files or the last action. Each class on a real log and on a synthetic case."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxcompact import api
from ctxcompact.facts.files import is_file_name
from ctxcompact.facts.gather import gather
from ctxcompact.facts.store import MAX_ERRORS, MAX_GOALS, ErrorFact, Facts, NewFacts, merge
from ctxcompact.formats import read_transcript
from ctxcompact.model import Message, Origin, Record, Role, TextBlock, ToolCall, ToolResult
from ctxcompact.options import Options
from ctxcompact.summarizers.base import SummaryRequest, fit_summary
from ctxcompact.summarizers.extractive import ExtractiveSummarizer, facts_of
from ctxcompact.summarizers.layout import command_shape
from ctxcompact.tokens.counts import text_cost

DATA = Path(__file__).parent.parent / "data"
CODEX = DATA / "codex" / "codex-session-view-lmstudio-0.58.0.jsonl"
CLAUDE = DATA / "claude-code" / "spotter-tool-heavy.jsonl"


# ------------------------------------------------------------------------------------------------ helpers

_n = [0]


def rec(role: Role, *blocks: Any, index: int | None = None) -> Record:
    _n[0] += 1
    bl = [TextBlock(b) if isinstance(b, str) else b for b in blocks]
    return Record(index=_n[0] if index is None else index, line=0, raw=None, data=None,
                  message=Message(role=role, blocks=bl), origin=Origin.INPUT)


def call(cid: str, name: str, args: dict[str, Any]) -> ToolCall:
    return ToolCall(id=cid, name=name, arguments=orjson.dumps(args).decode(), input=args)


def result(cid: str, text: str, is_error: bool = False) -> Record:
    return rec(Role.TOOL, ToolResult(cid, [TextBlock(text)], is_error=is_error))


def load(path: Path) -> list[Record]:
    records = read_transcript(path.read_bytes()).transcript.records
    return [r for r in records if r.message is not None and r.message.role is not Role.SYSTEM]


def summarize(records: list[Record], budget: int, **kw: Any) -> Any:
    return ExtractiveSummarizer().summarize(SummaryRequest(records=records, budget_tokens=budget, **kw))


def compact_in_steps(records: list[Record], steps: int, budget: int, **kw: Any) -> list[Any]:
    """Successive compactions of a growing session: each sees only its own records and the prior facts
    (as the state file stores them: JSON)."""
    out = []
    prior_facts = prior_text = None
    for k in range(steps):
        part = records[len(records) * k // steps:len(records) * (k + 1) // steps]
        res = summarize(part, budget, prior_facts=prior_facts, prior_summary=prior_text, **kw)
        prior_facts, prior_text = orjson.loads(orjson.dumps(res.facts)), res.text
        out.append(res)
    return out


# A session of n turns: a request (with a rule in some), a command (some fail), an answer.
@st.composite
def sessions(draw: Any) -> tuple[list[Record], list[str]]:
    turns = draw(st.integers(min_value=1, max_value=12))
    records: list[Record] = []
    rules: list[str] = []
    for t in range(turns):
        rule = f"Never touch module_{t}.py without asking." if draw(st.booleans()) else None
        if rule:
            rules.append(rule)
        records.append(rec(Role.USER, f"Step {t}: look at the parser. {rule or ''}".strip()))
        cmd = draw(st.sampled_from(["pytest -q", f"cat src/m{t}.py", f"curl -s localhost:8080/items/{t}"]))
        records.append(rec(Role.ASSISTANT, call(f"c{t}", "bash", {"command": cmd})))
        failed = draw(st.booleans())
        records.append(result(f"c{t}", "FAILED test_x - AssertionError" if failed else "ok", failed))
        records.append(rec(Role.ASSISTANT, draw(st.text(min_size=1, max_size=80)) + f" (answer {t})"))
    return records, rules


# -------------------------------------------------------------------------------------- the merge (item 4)


@settings(max_examples=40, deadline=None)
@given(sessions(), st.integers(min_value=0, max_value=100))
def test_merging_the_same_records_twice_changes_nothing(session: Any, split: int) -> None:
    records, _ = session
    cut = len(records) * split // 100
    old = merge(Facts(), gather(records[:cut]))
    new = gather(records[cut:])
    once = merge(old, new)
    assert merge(once, new) == once
    # and the JSON form the state keeps reads back to the same store
    assert Facts.from_json(orjson.loads(orjson.dumps(once.to_json()))) == once


@settings(max_examples=25, deadline=None)
@given(sessions(), st.integers(min_value=2, max_value=6))
def test_a_user_rule_is_never_dropped_over_n_compactions(session: Any, steps: int) -> None:
    records, rules = session
    results = compact_in_steps(records, steps, budget=400)
    facts = results[-1].facts
    assert facts["rules"] == rules  # every rule, verbatim, in the order typed, whatever the budget
    # and the text quotes them all whenever the rules themselves fit the budget
    text = results[-1].text
    if sum(math.ceil(len(r) / 4) + 1 for r in rules) + 150 <= 400:
        assert all(r in text for r in rules)


def test_the_drop_rule_resolved_errors_go_first_then_the_oldest() -> None:
    errors = tuple(ErrorFact("bash", f"cmd {i}", f"E{i}", f"cmd:{i}", resolved=i % 2 == 0, at=i)
                   for i in range(MAX_ERRORS + 10))
    merged = merge(Facts(errors=errors), NewFacts(Facts()))
    assert len(merged.errors) == MAX_ERRORS
    dropped = {e.text for e in errors} - {e.text for e in merged.errors}
    assert dropped == {f"E{i}" for i in range(0, 20, 2)}  # the ten oldest resolved ones
    assert all(not e.resolved for e in errors if e.text in dropped) is False


def test_the_drop_rule_keeps_the_first_goal_and_the_latest_request() -> None:
    old = Facts(goals=tuple(f"goal {i}" for i in range(MAX_GOALS)), latest_request="the request before")
    merged = merge(old, NewFacts(Facts(goals=("one more",), latest_request="now this")))
    assert len(merged.goals) == MAX_GOALS
    assert merged.goals[0] == "goal 0" and merged.goals[-2:] == ("the request before", "one more")
    assert "goal 1" not in merged.goals  # the oldest of the others went first
    assert merged.latest_request == "now this"


def test_version_1_facts_of_a_real_state_still_load_and_carry_on(tmp_path: Path) -> None:
    """A state written before this change (version 1 facts: timeline strings, no positions)."""
    log = tmp_path / "s.jsonl"
    log.write_bytes(CODEX.read_bytes())
    api.run(log, api.Options(window=16_000, to="openai"), output=tmp_path / "out.jsonl", warn=lambda _m: None)
    path = tmp_path / "s.jsonl.ctxstate.json"
    state = orjson.loads(path.read_bytes())
    v1 = {"version": 1, "goals": ["Fix the search."], "rules": ["Never push to main."],
          "files": [{"path": "app/search.py", "tools": ["Edit"]}],
          "commands": [{"command": "pytest", "ok": False}],
          "errors": [{"tool": "bash", "command": "pytest", "text": "AssertionError", "key": "cmd:pytest",
                      "resolved": False}],
          "todos": [{"content": "add a test", "status": "pending"}], "timeline": ["User: Fix the search."],
          "last_action": "Said: \"done\"", "latest_request": "Run the tests."}
    state["summary"]["facts"] = v1
    path.write_bytes(orjson.dumps(state))
    loaded = api.load_state(path)  # the schema accepts it (a version 1 timeline holds plain strings)
    assert loaded is not None and loaded.summary is not None and loaded.summary.facts == v1
    facts = Facts.from_json(v1)
    assert facts.rules == ("Never push to main.",) and facts.timeline[0].text == "User: Fix the search."
    later = [rec(Role.ASSISTANT, call("z1", "bash", {"command": "pytest"})), result("z1", "3 passed")]
    res = summarize(later, 2_000, prior_facts=v1)
    assert res.facts["version"] == 2
    assert "Never push to main." in res.text and "app/search.py" in res.text
    assert "[resolved] `pytest`: AssertionError" in res.text  # the rerun that passed resolves the old error


def test_a_growing_real_codex_session_keeps_its_facts_over_four_compactions() -> None:
    records = load(CODEX)
    results = compact_in_steps(records, 4, budget=1_600)
    first, last = results[0].facts, results[-1].facts
    assert last["latest_request"] and first["latest_request"] == last["latest_request"]  # one typed request
    # files touched in the first quarter are still in the store after three more compactions
    assert {f["path"] for f in first["files"]} <= {f["path"] for f in last["files"]}
    assert all(r.text.count("\n## Latest request\n") == 1 for r in results)


# ------------------------------------------------------------------------------------- the budget (item 5)

JAPANESE = ("調査の結果、find_customer が NFC 正規化をせずに名前を比較していることが原因でした。"
            "比較の前に unicodedata.normalize を呼び、大文字小文字も揃えます。")


def _japanese_session(turns: int) -> list[Record]:
    out: list[Record] = []
    for t in range(turns):
        out.append(rec(Role.USER, f"タスク{t}: 予約システムの検索機能を修正してください。"))
        grep = {"command": f"grep -rn 検索 src/module_{t}.py"}
        out.append(rec(Role.ASSISTANT, call(f"j{t}", "bash", grep)))
        out.append(result(f"j{t}", "検索結果: " + JAPANESE))
        out.append(rec(Role.ASSISTANT, JAPANESE * 3))
    return out


@pytest.mark.parametrize("exact", ["tiktoken", "none"])
@pytest.mark.parametrize("budget", [300, 1_500, 6_000])
def test_a_japanese_summary_fits_its_budget_as_the_window_counts(exact: str, budget: int) -> None:
    cost = text_cost(Options(exact=exact))
    res = summarize(_japanese_session(30), budget, cost=cost)
    assert cost(res.text) <= budget
    if exact == "tiktoken" and budget >= 1_500:
        # chars/4 would have let it be far larger: the counter makes the difference
        assert math.ceil(len(res.text) / 4) < budget * 0.8
        assert not res.truncated


def test_a_smaller_window_gives_a_smaller_summary() -> None:
    sizes = []
    for window in (8_000, 32_000, 128_000):
        r = api.run(CODEX, api.Options(window=window, threshold="1000", to="openai"), dry_run=True,
                    warn=lambda _m: None)
        assert r.summary is not None
        cost = text_cost(api.Options(), r.estimate.calibrated)
        assert cost(r.summary.text) <= r.estimate.budget.summary_budget
        sizes.append(cost(r.summary.text))
    assert sizes[0] < sizes[1] <= sizes[2]


def test_fit_summary_cuts_by_the_counter_it_is_given() -> None:
    text = "\n".join(JAPANESE for _ in range(50))
    cost = text_cost(Options())
    cut, was_cut = fit_summary(text, 200, cost)
    assert was_cut and cost(cut) <= 200 and len(cut) < 200 * 4  # chars/4 would have kept 800 characters
    assert fit_summary("short", 200, cost) == ("short", False)


# ------------------------------------------------------------------- what the agent needs first (item 5)

PLANS = "\n".join(f"## Plan {i}\n- step one of plan {i}: migrate the table\n- step two: backfill, then "
                  f"switch reads (estimated {i} days)" for i in range(1, 5))


def test_the_assistants_answer_is_kept_whole_not_cut_to_150_characters() -> None:
    records = [rec(Role.USER, "Give me four plans for the migration."), rec(Role.ASSISTANT, PLANS),
               rec(Role.USER, "Go with plan 2.")]
    res = summarize(records, 2_000)
    body = res.text.split("## Findings and answers\n", 1)[1]
    for i in range(1, 5):
        assert f"## Plan {i}" in body and f"(estimated {i} days)" in body
    assert "\n## Plan" not in res.text  # the answer's headings are indented: no stray sections


def test_repeated_commands_collapse_into_one_line() -> None:
    records = [rec(Role.USER, "Poll the API until the job is done.")]
    for i in range(15):
        records.append(rec(Role.ASSISTANT, call(f"p{i}", "bash",
                                                {"command": f"curl -s http://localhost:8080/jobs/{i}"})))
        records.append(result(f"p{i}", '{"status": "running"}'))
    res = summarize(records, 4_000)
    # once each in the command list, the timeline and the last action
    assert res.text.count("curl -s http://localhost:8080/jobs/") == 3
    assert "curl -s http://localhost:8080/jobs/14` → ok (and 14 similar runs before)" in res.text
    assert "(×15, similar)" in res.text
    assert command_shape("curl -s x/1 -d '{\"a\": 1}'") == command_shape("curl -s x/22 -d '{\"b\": 2}'")
    assert command_shape("pytest tests/a.py") != command_shape("pytest tests/b.py")


def test_findings_outrank_the_timeline_and_commands_when_the_budget_is_short() -> None:
    records = [rec(Role.USER, "Find why checkout fails.")]
    for i in range(40):
        grep = {"command": f"grep -rn checkout src/m{i}.py"}
        records.append(rec(Role.ASSISTANT, call(f"g{i}", "bash", grep)))
        records.append(result(f"g{i}", "no match"))
    records.append(rec(Role.ASSISTANT, "Found it: the tax rounding in src/m7.py truncates instead of "
                                       "rounding."))
    records.append(rec(Role.USER, "Fix it."))
    res = summarize(records, 250)
    assert "the tax rounding in src/m7.py truncates" in res.text
    assert "## Timeline" not in res.text


def test_real_log_answers_are_findings_and_commands_collapse() -> None:
    res = summarize(load(CLAUDE), 3_000)
    assert "## Findings and answers" in res.text
    lines = [ln for ln in res.text.splitlines() if ln.startswith("- `")]
    assert len(lines) == len(set(lines))  # no command line twice


# ------------------------------------------------------------------------------------- no noise (item 7)


def test_files_are_only_what_tools_touched_never_prose_folders_or_quoted_text() -> None:
    records = [
        rec(Role.USER, "We use Next.js and the config in app/settings.py; see README.md."),
        rec(Role.ASSISTANT, call("1", "bash", {"command": "ls /home/me/app/src"}),
            call("2", "bash", {"command": "grep -rn TODO src/ lib/util.py"}),
            call("3", "bash", {"command": 'git commit -m "fix parser.py and lexer.py"'}),
            call("4", "bash", {"command": "cat 'LM Studio configuration.md'"}),
            call("5", "Edit", {"file_path": "/home/me/app/main.py", "old_string": "a", "new_string": "b"})),
    ]
    paths = [f.path for f in gather(records).facts.files]
    assert paths == ["lib/util.py", "LM Studio configuration.md", "/home/me/app/main.py"]
    changed = [f.path for f in gather(records).facts.files if f.changed]
    assert changed == ["/home/me/app/main.py"]


@pytest.mark.parametrize(("path", "folders"), [
    (CODEX, ["lib", "lib/ai", "app/api", "app/api/chat"]),  # ls and rg arguments
    (DATA / "claude-code" / "claude-code-viewer-orchestrator-1.0.108.jsonl",
     ["~/.claude/commands", "./.claude/commands"]),  # the folders Glob and LS looked in
    (DATA / "claude-code" / "spotter-short.jsonl", ["/home/marco/projects/spotter"]),
])
def test_real_log_files_are_files_not_the_folders_searched(path: Path, folders: list[str]) -> None:
    records = load(path)
    facts = facts_of(SummaryRequest(records=records, budget_tokens=4_000))
    files = [f.path for f in facts.files]
    named = {str(v) for r in records if r.message is not None for c in r.message.tool_calls()
             for v in (c.input or {}).values() if isinstance(c.input, dict)}
    command_text = " ".join(c.arguments for r in records if r.message is not None
                            for c in r.message.tool_calls())
    for folder in folders:
        assert folder in named or folder in command_text  # the log does name it
        assert folder not in files
    for p in files:
        assert is_file_name(p) or p in named, p


def test_the_last_action_is_the_last_message_as_it_happened() -> None:
    records = [rec(Role.USER, "go"),
               rec(Role.ASSISTANT, "Reading the parser.", call("1", "Read", {"file_path": "a.py"})),
               result("1", "..."), rec(Role.ASSISTANT, "Now the lexer."),
               rec(Role.ASSISTANT, call("2", "Read", {"file_path": "b.py"}))]
    action = gather(records).facts.last_action
    assert action == 'Said: "Now the lexer." — Called: Read(b.py)'  # one step: text and call adjacent
    records.append(result("2", "..."))
    records.append(rec(Role.ASSISTANT, call("3", "bash", {"command": "pytest"})))
    assert gather(records).facts.last_action == "Called: bash(pytest)"  # nothing stitched from before


def test_real_log_last_action_is_the_last_assistant_record() -> None:
    records = load(CODEX)
    last = next(r for r in reversed(records) if r.message is not None and r.message.role is Role.ASSISTANT
                and (r.message.text().strip() or r.message.tool_calls()))
    action = gather(records).facts.last_action
    assert action is not None
    if last.message is not None and last.message.tool_calls():
        assert last.message.tool_calls()[-1].name in action
    else:
        assert last.message is not None and json.dumps(last.message.text().strip()[:30])[1:-1][:20] in action


def test_a_summary_quotes_the_first_and_newest_rules_when_there_are_very_many() -> None:
    """Every rule stays in the store; a summary quotes up to MAX_RENDERED_RULES of them (the first and the
    newest half each, and how many are between), so a session with a rule in every request does not make
    every later compaction quote them all (the sliding window's first run grew with the square)."""
    from ctxcompact.summarizers.layout import MAX_RENDERED_RULES, _rendered_rules

    few = tuple(f"never touch file {i}" for i in range(MAX_RENDERED_RULES))
    assert _rendered_rules(few) == list(few)
    many = tuple(f"never touch file {i}" for i in range(3 * MAX_RENDERED_RULES))
    shown = _rendered_rules(many)
    half = MAX_RENDERED_RULES // 2
    assert shown[:half] == list(many[:half]) and shown[-half:] == list(many[-half:])
    assert shown[half] == f"({len(many) - 2 * half} more rules in between, kept in the state)"
    assert len(shown) == MAX_RENDERED_RULES + 1

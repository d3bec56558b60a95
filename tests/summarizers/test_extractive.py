"""The extractive summarizer: content, order, budget, determinism, facts across compactions, registry."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxcompact.errors import UsageError
from ctxcompact.facts import SUMMARY_MARKER, Todo
from ctxcompact.model import Message, Record, Role, TextBlock, ToolCall, ToolResult
from ctxcompact.summarizers import SUMMARIZERS, get_summarizer
from ctxcompact.summarizers.base import SummaryRequest, SummaryResult
from ctxcompact.summarizers.extractive import ExtractiveSummarizer

SAMPLES = Path(__file__).resolve().parent.parent.parent / "samples"
LONG = SAMPLES / "openai-long.jsonl"
# what a continuing agent needs first, the timeline late (docs/concepts/summary.md)
SECTIONS = ["User goals and rules", "Findings and answers", "Open todos", "Errors", "Files and commands",
            "Timeline", "Last assistant action", "Latest request"]


def tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def load(path: Path) -> list[Record]:
    from ctxcompact.formats import read_transcript

    return read_transcript(path).transcript.records


def raw_lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def summarize(records: list[Record], budget: int, **kw: Any) -> SummaryResult:
    return ExtractiveSummarizer().summarize(SummaryRequest(records=records, budget_tokens=budget, **kw))


# Expected facts of openai-long.jsonl, read from the raw JSON independently of the code under test.
LINES = raw_lines(LONG)
USER_TEXTS = [m["content"] for m in LINES if m["role"] == "user"]
LATEST = USER_TEXTS[-1]
CALLS = [(c["function"]["name"], orjson.loads(c["function"]["arguments"]))
         for m in LINES if m["role"] == "assistant" for c in m.get("tool_calls") or []]
PATHS = sorted({a["path"] for n, a in CALLS if "path" in a and a["path"] != "."})
LAST_TODOS = [a["todos"] for n, a in CALLS if n == "todo_write"][-1]
OPEN_TODOS = [t for t in LAST_TODOS if t["status"] != "completed"]
RULES = [  # what the user typed, copied from the sample by hand
    "Never push to main; it deploys straight to the café.",
    "Don't change the public API: the JSON shapes of /menu and /orders must stay exactly as they are.",
    "Always run the full test suite before you tell me something is done.",
    "Two more constraints: use only the standard library for time zones (zoneinfo) — avoid adding pytz or "
    "dateutil, the box has no internet.",
    "Only touch the menu code if you find a real problem.",
    "Don't push yet.",
]


def test_sample_is_long_enough_to_compact_in_a_32k_window() -> None:
    from ctxcompact.model import message_chars

    chars = sum(message_chars(r.message) for r in load(LONG) if r.message)
    assert math.ceil(chars / 4) * 2.0 > 25_600 * 1.2  # well over the 32k threshold with factor 2.0
    assert len(OPEN_TODOS) == 2 and len(PATHS) >= 12  # the expectations themselves are not empty


@pytest.mark.parametrize("budget", [800, 3_200, 10_000])
def test_long_sample_summary_keeps_what_matters_within_budget(budget: int) -> None:
    res = summarize(load(LONG), budget)
    text = res.text
    assert tokens(text) <= budget
    assert not res.truncated
    assert res.summarizer == "extractive"
    assert text.startswith(SUMMARY_MARKER + "\n")
    for rule in RULES:
        assert rule in text
    assert text.rstrip("\n").endswith("## Latest request\n" + LATEST)
    for todo in OPEN_TODOS:
        assert f"[{todo['status']}] {todo['content']}" in text
    # the last error (mypy) and that it is still open
    assert "[UNRESOLVED] `mypy app`: app/models.py:49: error: Incompatible return value type" in text
    if budget >= 3_200:
        for path in PATHS:
            assert f"- {path} (" in text
        # the first error, fixed later by a passing run
        assert "[resolved] `python -m pytest -v`: TypeError: can't compare offset-naive" in text


def test_sections_in_order_and_never_empty() -> None:
    text = summarize(load(LONG), 10_000).text
    positions = [text.index(f"\n## {s}\n") for s in SECTIONS]
    assert positions == sorted(positions)
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("## "):
            assert i + 1 < len(lines) and lines[i + 1].strip() and not lines[i + 1].startswith("## ")


def test_only_sections_with_content_and_empty_input() -> None:
    res = summarize([], 1_000)
    assert "## " not in res.text
    assert res.text.startswith(SUMMARY_MARKER)
    one = summarize([Record(0, 1, None, {}, Message(Role.USER, [TextBlock("fix café.py")]))], 1_000).text
    assert "## Latest request\nfix café.py" in one
    # the latest request is printed once: in its own section, not again in the timeline
    assert one.count("fix café.py") == 1
    assert "## Timeline" not in one and "## Errors" not in one and "## Open todos" not in one


def test_deterministic() -> None:
    records = load(LONG)
    a, b = summarize(records, 3_200), summarize(load(LONG), 3_200)
    assert a.text == b.text
    assert orjson.dumps(a.facts) == orjson.dumps(b.facts)


def test_smaller_samples_summarize() -> None:
    text = summarize(load(SAMPLES / "anthropic-session.jsonl"), 2_000).text
    assert "## Latest request\nYes, re-run the tests — and add the same fix to the café's reservation" in text
    assert "system-reminder" not in text.split("## Latest request")[1]
    assert "[in_progress] Add a failing test for an NFD customer name" in text
    assert "/home/dev/cafe-api/app/models.py (Read, Edit)" in text
    text = summarize(load(SAMPLES / "openai-session.jsonl"), 2_000).text
    rule = "Never push to main, and don't change the public API: the JSON of /orders must stay the same."
    assert rule in text


def _split_at_user_messages(records: list[Record], parts: int) -> list[list[Record]]:
    starts = [i for i, r in enumerate(records) if r.role is Role.USER and r.message and r.message.text()]
    cut = [starts[len(starts) * k // parts] for k in range(1, parts)]
    bounds = [0, *cut, len(records)]
    return [records[bounds[k]:bounds[k + 1]] for k in range(parts)]


def test_facts_survive_three_successive_summaries() -> None:
    chunks = _split_at_user_messages(load(LONG), 3)
    assert all(chunks) and sum(map(len, chunks)) == len(load(LONG))
    facts: Any = None
    texts = []
    for chunk in chunks:
        res = summarize(chunk, 3_200, prior_facts=facts)
        assert tokens(res.text) <= 3_200
        facts = orjson.loads(orjson.dumps(res.facts))  # as the state file stores it
        texts.append(res.text)
    final = texts[-1]
    for rule in RULES:
        assert rule in final
    for path in PATHS:
        assert path in final
    for todo in OPEN_TODOS:
        assert f"[{todo['status']}] {todo['content']}" in final
    assert "[UNRESOLVED] `mypy app`" in final
    assert "[resolved] `python -m pytest -v`: TypeError: can't compare" in final  # from the first chunk
    assert final.rstrip("\n").endswith(LATEST)
    # the first chunk's request is now a goal, and the older latest requests were carried into goals
    assert "Bug report from the café this morning" in final


def test_prior_error_resolved_by_new_records_and_todos_replaced() -> None:
    prior = {"errors": [{"tool": "bash", "command": "pytest -q", "text": "1 failed", "key": "cmd:pytest -q",
                         "resolved": False}],
             "todos": [{"content": "old todo", "status": "pending"}], "rules": ["Never rebase."],
             "latest_request": "run the tests"}
    call = ToolCall("c1", "bash", '{"command": "pytest -q"}', {"command": "pytest -q"})
    todo = ToolCall("c2", "TodoWrite", "", {"todos": [{"content": "new todo", "status": "pending"}]})
    records = [
        Record(0, 1, None, {}, Message(Role.ASSISTANT, [call, todo])),
        Record(1, 2, None, {}, Message(Role.TOOL, [ToolResult("c1", [TextBlock("3 passed")])])),
    ]
    res = summarize(records, 2_000, prior_facts=prior)
    assert "[resolved] `pytest -q`: 1 failed" in res.text
    assert "new todo" in res.text and "old todo" not in res.text
    assert "- Never rebase." in res.text
    assert "## Latest request\nrun the tests" in res.text  # no new typed request: the prior one stands
    # request.todos (from --todos) win over the todo tool
    res = summarize(records, 2_000, prior_facts=prior, todos=[Todo("from file", "in_progress")])
    assert "[in_progress] from file" in res.text and "new todo" not in res.text


def test_malformed_prior_facts_are_ignored() -> None:
    bad = {"rules": "not a list", "files": [3, {"path": 7}], "errors": [{"text": None}], "todos": [[]]}
    res = summarize([], 1_000, prior_facts=bad)
    assert "## " not in res.text


def test_prior_summary_text_is_carried_and_trimmed() -> None:
    earlier = SUMMARY_MARKER + "\nThe user wants the naïve-datetime bug fixed. " + "Details. " * 400
    res = summarize([], 300, prior_summary=earlier)
    # quoted line by line (its own headings never read as the summary's), cut from the middle
    assert "## Earlier summary\n> The user wants the naïve-datetime bug fixed." in res.text
    assert "part of the earlier summary left out" in res.text and res.text.rstrip().endswith("Details.")
    assert tokens(res.text) <= 300 and not res.truncated
    assert res.text.count(SUMMARY_MARKER) == 1
    # an extractive prior summary with its facts: the facts carry the past; the text is not repeated
    extracted = summarize([], 300, prior_facts={"rules": ["Always be nice."]}).text
    res = summarize([], 300, prior_summary=extracted, prior_facts={"rules": ["Always be nice."]})
    assert "Earlier summary" not in res.text and "Always be nice." in res.text
    # an LLM's prior summary (checked, so it has facts too): its text is carried as well as its facts
    res = summarize([], 300, prior_summary=earlier, prior_facts={"rules": ["Always be nice."]})
    assert "## Earlier summary\n> The user wants" in res.text and "Always be nice." in res.text
    # and the facts keep it, so the compaction after this one still carries it (docs/concepts/handoff.md)
    assert res.facts is not None and res.facts["earlier"].startswith("The user wants")


def test_rules_and_latest_request_outlive_everything_else() -> None:
    records = load(LONG)
    full = summarize(records, 100_000).text
    start = full.index("Rules and constraints")
    rules_block = full[start:full.index("\n## ", start)]
    floor = tokens(SUMMARY_MARKER) + tokens(rules_block) + tokens(LATEST) + 60
    res = summarize(records, floor)
    assert not res.truncated and tokens(res.text) <= floor
    for rule in RULES:
        assert rule in res.text
    assert LATEST in res.text
    assert "## Timeline" not in res.text and "## Files and commands" not in res.text


@pytest.mark.parametrize("budget", [0, 1, 10, 50])
def test_hard_cut_as_last_resort(budget: int) -> None:
    res = summarize(load(LONG), budget)
    assert res.truncated
    assert len(res.text) <= budget * 4
    if budget >= 50:
        assert res.text.startswith(SUMMARY_MARKER)


# ------------------------------------------------------------ property

_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=300)


@st.composite
def transcripts(draw: st.DrawFn) -> list[Record]:
    records: list[Record] = []
    n = draw(st.integers(0, 25))
    for i in range(n):
        kind = draw(st.sampled_from(["user", "assistant", "call", "result"]))
        if kind == "user":
            msg = Message(Role.USER, [TextBlock(draw(_text))])
        elif kind == "assistant":
            msg = Message(Role.ASSISTANT, [TextBlock(draw(_text))])
        elif kind == "call":
            name = draw(st.sampled_from(["bash", "read_file", "TodoWrite", "update_plan", "x"]))
            args = draw(st.fixed_dictionaries({}, optional={
                "command": _text, "path": _text,
                "todos": st.lists(st.fixed_dictionaries(
                    {"content": _text, "status": st.sampled_from(["pending", "completed"])}), max_size=4)}))
            msg = Message(Role.ASSISTANT, [ToolCall(f"c{i}", name, orjson.dumps(args).decode(), args)])
        else:
            msg = Message(Role.TOOL, [ToolResult(f"c{draw(st.integers(0, 25))}", [TextBlock(draw(_text))],
                                                 is_error=draw(st.booleans()))])
        records.append(Record(i, i + 1, None, {}, msg))
    return records


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=transcripts(), budget=st.integers(0, 1_500), prior=st.none() | st.text(max_size=2_000))
def test_property_text_never_exceeds_budget(records: list[Record], budget: int, prior: str | None) -> None:
    res = summarize(records, budget, prior_summary=prior)
    assert tokens(res.text) <= budget
    assert res.facts is not None
    orjson.dumps(res.facts)  # the facts are plain JSON for the state file
    if not res.truncated:
        assert res.text.startswith(SUMMARY_MARKER)


# ------------------------------------------------------------ registry


def test_registry() -> None:
    assert set(SUMMARIZERS) == {"extractive", "anthropic", "openai"}
    s = get_summarizer("extractive", model="ignored")
    assert isinstance(s, ExtractiveSummarizer) and s.name == "extractive"
    assert isinstance(get_summarizer(" Extractive "), ExtractiveSummarizer)
    with pytest.raises(UsageError) as info:
        get_summarizer("gpt")
    assert "extractive" in str(info.value) and "anthropic" in str(info.value) and "openai" in str(info.value)


def test_importing_the_registry_loads_no_sdk() -> None:
    code = ("import sys, ctxcompact.summarizers, ctxcompact.summarizers.extractive; "
            "print(any(m.split('.')[0] in ('anthropic', 'openai') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# ------------------------------------------------------------ samples


@pytest.mark.parametrize("name", ["openai-session.jsonl", "anthropic-session.jsonl", "openai-long.jsonl"])
def test_samples_are_json_objects_and_read_cleanly(name: str) -> None:
    from ctxcompact.formats import read_transcript

    data = (SAMPLES / name).read_bytes()
    assert data.endswith(b"\n")
    objs = [orjson.loads(line) for line in data.splitlines()]
    assert objs and all(isinstance(o, dict) for o in objs)
    result = read_transcript(SAMPLES / name)  # strict mode with the JSON Schema: raises on any bad line
    assert result.problems == [] and result.dropped == 0
    assert result.transcript.format == name.split("-")[0]
    assert len(result.transcript.records) == len(objs)
    # each sample has usage to calibrate from except the long one (which relies on the default factor)
    assert any(r.usage for r in result.transcript.records) == (name != "openai-long.jsonl")

"""What the summary keeps for a continuing agent (issue 23,
docs/concepts/summary.md#what-a-summary-keeps): each class of defect behind the missed probes, on a minimal
synthetic case and on the real log it came from."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from helpers import assistant, jsonl, tool, user

from ctxcompact.facts.files import change_note, files_touched
from ctxcompact.facts.gather import gather
from ctxcompact.facts.identifiers import identifiers, names_in
from ctxcompact.facts.outcomes import errors_seen, is_inspection
from ctxcompact.facts.rules import project_rules, rules_in_text, user_rules
from ctxcompact.facts.store import Facts, merge
from ctxcompact.facts.text import person_text
from ctxcompact.formats import read_transcript
from ctxcompact.model import Record, ToolCall
from ctxcompact.summarizers.base import SummaryRequest
from ctxcompact.summarizers.extractive import ExtractiveSummarizer

DATA = Path(__file__).resolve().parent.parent / "data"


def records(objs: list[dict[str, Any]]) -> list[Record]:
    return read_transcript(io.BytesIO(jsonl(objs)), "openai").transcript.records


def load(rel: str) -> list[Record]:
    return read_transcript(DATA / rel).transcript.records


def summary(recs: list[Record], budget: int = 20_000) -> str:
    return ExtractiveSummarizer().summarize(SummaryRequest(records=recs, budget_tokens=budget)).text


def section(text: str, title: str) -> str:
    return text.split(f"## {title}", 1)[1].split("\n## ", 1)[0] if f"## {title}" in text else ""


# ------------------------------------------------------------------ identifiers seen in tool output


def test_a_name_the_tools_showed_and_the_assistant_used_is_an_identifier() -> None:
    recs = records([
        user("Wire the app to LM Studio."),
        assistant(None, [("c1", "shell", {"command": "cat .env.example", "workdir": "/srv/app"})]),
        tool("c1", "NEXT_PUBLIC_LMSTUDIO_URL=http://localhost:1234\nUNUSED_SETTING=1\nversion 2.4.1\n"
                   "task id 9f3c2a1b written to /tmp/tasks/9f3c2a1b.output"),
        assistant("I'll read NEXT_PUBLIC_LMSTUDIO_URL and pin 2.4.1; the log is /tmp/tasks/9f3c2a1b.output."),
    ])
    found = [t for _, t in identifiers(recs)]
    for name in ("NEXT_PUBLIC_LMSTUDIO_URL", "2.4.1", "/tmp/tasks/9f3c2a1b.output", "http://localhost:1234",
                 "/srv/app"):
        assert name in found, name
    assert "UNUSED_SETTING" not in found  # shown, never used: a listing's name nobody asked to remember
    assert "NEXT_PUBLIC_LMSTUDIO_URL" in section(summary(recs), "Identifiers")


def test_names_only_the_assistant_wrote_or_prose_words_are_not_identifiers() -> None:
    assert names_in("The quick brown fox is done. Next.js works.") == set()
    assert {"fetchModels", "ChatSettings", "API_BASE_URL", "v1.2.3", "spotter-0p7.2", "deadbeef1",
            "@scope/pkg"} <= names_in("fetchModels ChatSettings API_BASE_URL v1.2.3 spotter-0p7.2 deadbeef1 "
                                      "@scope/pkg")
    recs = records([user("go"), assistant("I invented makeThing here.", [("c1", "run", {"cmd": "ls"})]),
                    tool("c1", "a.py")])
    assert identifiers(recs) == []
    assert identifiers([]) == []


def test_names_said_in_prose_outrank_names_only_inside_calls() -> None:
    """A patch holds dozens of names: the ones only there fill at most what the prose leaves."""
    from ctxcompact.facts import identifiers as mod

    code = " ".join(f"nameNumber{i}" for i in range(200))
    recs = records([
        user("Refactor."),
        assistant(None, [("c1", "read", {"path": "a.ts"})]),
        tool("c1", code + " keyHandler"),
        assistant("keyHandler is the entry point.", [("c2", "edit", {"path": "a.ts", "new": code})]),
        tool("c2", "ok"),
    ])
    found = [t for _, t in identifiers(recs)]
    assert "keyHandler" in found
    assert len(found) <= mod.MAX_PER_RUN


def test_a_name_the_tools_kept_printing_is_an_identifier_before_anyone_wrote_it() -> None:
    objs: list[dict[str, Any]] = [user("Find where the URL is set.")]
    for i in range(3):
        objs += [assistant(None, [(f"c{i}", "shell", {"command": f"rg -n URL part{i}"})]),
                 tool(f"c{i}", f"part{i}/env.ts:3: LMSTUDIO_BASE_URL + '/v1' (ONLY_HERE_{i})")]
    found = [t for _, t in identifiers(records(objs))]
    assert "LMSTUDIO_BASE_URL" in found
    assert "ONLY_HERE_0" in names_in("x ONLY_HERE_0 y")
    assert not [t for t in found if t.startswith("ONLY_HERE")]  # printed once: nothing to remember yet


def test_identifiers_of_a_real_log() -> None:
    """The background task's id and output file (spotter-tool-heavy: Claude Code printed them, the assistant
    read the file), the env var of the LM Studio log."""
    found = [t for _, t in identifiers(load("claude-code/spotter-tool-heavy.jsonl"))]
    assert "/tmp/claude-1000/-home-marco-projects-spotter/tasks/bae407b.output" in found
    found = [t for _, t in identifiers(load("codex/codex-session-view-lmstudio-0.58.0.jsonl"))]
    assert "NEXT_PUBLIC_LMSTUDIO_URL" in found


# ----------------------------------------------------------------------------- the user's rules


def test_short_standing_statements_are_rules_without_a_rule_word() -> None:
    assert rules_in_text("performance is crucial") == ["performance is crucial"]
    assert rules_in_text("a bare date means midnight café time, not UTC") == [
        "a bare date means midnight café time, not UTC"]
    for one_off in ("show tools", "did you push?", "continue", "update phase 4.1 document", ""):
        assert rules_in_text(one_off) == [], one_off
    long = "Here is the log. " + "The build is red because the cache is stale. " * 30
    assert rules_in_text(long) == []  # a long message's statements are its content, not standing rules
    assert rules_in_text(long + " Never push to main.") == ["Never push to main."]


def test_keywordless_rules_of_a_real_log_are_kept_verbatim() -> None:
    recs = load("claude-code/codemie-sync-tracking-excerpt.jsonl")
    rules = user_rules(recs)
    assert "performance is crucial." in rules
    text = summary(recs, 4000)
    assert all(r in text for r in rules)


def test_the_users_messages_are_kept_whole_while_they_fit() -> None:
    first = "Build the importer. " + " ".join(f"step{i} reads table{i}." for i in range(60))
    recs = records([user(first), assistant("Started."), user("Go on."), assistant("Done.")])
    assert first.strip() in summary(recs, 20_000).replace("\n  ", " ")
    small = summary(recs, 300)
    assert first.strip() not in small and "Build the importer." in small


def test_project_instruction_rules_are_instructions_not_user_rules() -> None:
    agents = ("# AGENTS.md instructions for /repo\n\n<INSTRUCTIONS>\n"
              "- Always use `bun` as the package manager.\n- Prefer single quotes.\n"
              "- The API lives in api/.\n</INSTRUCTIONS>")
    recs = records([user(agents), user("Add a route."), assistant("Added.")])
    assert project_rules(recs) == ["Rules of AGENTS.md for /repo (a project instruction file):\n"
                                   "- Always use `bun` as the package manager.\n- Prefer single quotes."]
    assert user_rules(recs) == []  # not typed by the user
    facts = gather(recs).facts
    assert facts.instructions and "Always use `bun`" in facts.instructions[0]
    text = summary(load("codex/agentlogs-codex-crud.jsonl"), 2000)
    assert "Do not create .sql files yourself." in section(text, "Instructions in force")


# ------------------------------------------------------------------------- findings and subagents


def test_a_subagents_report_is_a_finding_kept_whole() -> None:
    text = summary(load("claude-code/claude-code-viewer-orchestrator-1.0.108.jsonl"))
    found = section(text, "Findings and answers")
    assert 'Task subagent "Check package configuration" reported:' in found
    assert "@tailwindcss/postcss" in found and "Next.js: 15.5.2" in found
    assert "result:" not in section(text, "Subagents")


def test_the_last_action_does_not_repeat_the_answer_above() -> None:
    answer = "Done:\n\n- fixed the parser\n- added tests for tabs and spaces in the header line"
    text = summary(records([user("Fix it."), assistant(answer)]))
    said = section(text, "Last assistant action").strip()
    assert said == "Said: its last answer (under Findings and answers)"


# ------------------------------------------------------------------------- commands, todos, files


def test_read_only_commands_are_one_line() -> None:
    for cmd in ("sed -n 1,10p a.py", "rg -n foo src | head", "git diff --stat", "cd src && ls -la",
                "nl -ba a.ts | sed -n '90,108p'", "cat a 2>/dev/null"):
        assert is_inspection(cmd), cmd
    for cmd in ("npm test", "sed -i s/a/b/ f", "echo x > a.txt", "git commit -m 'a > b'", "rm a",
                "find . -delete", "python3 x.py", ""):
        assert not is_inspection(cmd), cmd
    calls = [(f"c{i}", "shell", {"command": f"sed -n '{i},{i + 9}p' src/m{i}.py"}) for i in range(30)]
    objs: list[dict[str, Any]] = [user("Look around, then run the tests.")]
    for cid, name, args in calls:
        objs += [assistant(None, [(cid, name, args)]), tool(cid, "x = 1")]
    objs += [assistant(None, [("t", "shell", {"command": "pytest -q"})]), tool("t", "3 passed"),
             assistant("All tests pass.")]
    text = section(summary(records(objs)), "Files and commands")
    assert "`pytest -q` → ok" in text
    assert "- and 30 read-only commands that worked (sed ×30)" in text
    assert "sed -n" not in text


def test_the_whole_todo_list_is_kept_done_items_on_one_line() -> None:
    todos = [{"content": "Create JOKE.md", "status": "completed"}, {"content": "Delete JOKE.md",
                                                                    "status": "completed"},
             {"content": "Report back", "status": "in_progress"}]
    text = summary(records([user("Do it."), assistant(None, [("c1", "TodoWrite", {"todos": todos})]),
                            tool("c1", "ok")]))
    todo = section(text, "Open todos")
    assert "- [in_progress] Report back" in todo and "Done: Create JOKE.md; Delete JOKE.md" in todo


def test_what_each_changed_file_last_became() -> None:
    write = ToolCall("c1", "Write", "", input={"file_path": "J.md", "content": "\n# Title\n\nBody"})
    edit = ToolCall("c2", "Edit", "", input={"file_path": "J.md", "old_string": "Body",
                                             "new_string": "Body 2"})
    body = "*** Begin Patch\n*** Update File: a.py\n@@\n-x = 1\n+x = 2\n*** Delete File: b.py\n*** End Patch"
    patch = ToolCall("c3", "apply_patch", "", input={"input": body})
    assert change_note(write, "J.md") == 'wrote "# Title"'
    assert change_note(edit, "J.md") == '"Body" → "Body 2"'
    assert change_note(patch, "a.py") == '"x = 1" → "x = 2"'
    assert change_note(patch, "b.py") == "deleted"
    assert change_note(ToolCall("c4", "Write", "", input={"file_path": "J.md"}), "J.md") is None
    files = {f.path: f for f in files_touched(load("codex/agentlogs-codex-crud.jsonl"))}
    assert "The office cactus applauds politely." in (files["/Users/philipp/dev/agentlogs/fixtures/JOKE.md"]
                                                      .change or "")
    # the note survives the state: JSON and back, and a merge keeps the newest note
    facts = gather(load("codex/agentlogs-codex-crud.jsonl")).facts
    again = Facts.from_json(facts.to_json())
    assert again.files == facts.files
    assert merge(Facts(), gather(load("codex/agentlogs-codex-crud.jsonl"))).files == facts.files


# ----------------------------------------------------------------------------------- who typed it


def test_a_background_task_notification_is_not_typed() -> None:
    note = ("<task-notification>\n<task-id>bd0afab</task-id>\n<status>completed</status>\n"
            "</task-notification>\nRead the output file to retrieve the result: /tmp/x/tasks/bd0afab.output")
    assert person_text(note) == ""
    assert person_text("Read the output file and fix the bug") == "Read the output file and fix the bug"


def test_a_tool_saying_it_failed_is_an_error() -> None:
    poll = ("c1", "write_stdin", {"session_id": 3, "chars": ""})
    recs = records([user("Poll it."), assistant(None, [poll]),
                    tool("c1", "write_stdin failed: stdin is closed for this session; rerun with tty=true")])
    (err,) = errors_seen(recs)
    assert err.text.startswith("write_stdin failed: stdin is closed")
    recs = records([user("Poll it."), assistant(None, [("c1", "write_stdin", {"session_id": 3})]),
                    tool("c1", "the build failed twice before; now ok")])
    assert errors_seen(recs) == []

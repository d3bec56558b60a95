"""Who said it, and what the request is (docs/concepts/summary.md#only-what-a-person-typed-is-the-users):
slash commands typed as requests, local commands and their output, Claude Code's synthetic replies, system
lines moved for role order, ADK events of other agents. Each class on a real log of the corpus and on a
minimal synthetic case."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import orjson
import pytest

from ctxcompact import api
from ctxcompact.clean import MOVED_SYSTEM, clean
from ctxcompact.facts import last_assistant_action, latest_request, timeline, typed_text, user_rules
from ctxcompact.facts.handoff import instructions_in_force
from ctxcompact.facts.text import (
    LOCAL_COMMANDS,
    attachments,
    command_request,
    latest_request_record,
    removed_attachments_note,
    user_requests,
)
from ctxcompact.formats import read_transcript
from ctxcompact.model import IMAGE_TOKENS, ImageBlock, Message, Origin, Record, Role, TextBlock

DATA = Path(__file__).resolve().parent.parent / "data"
CC = DATA / "claude-code"


def compacted(source: Path | bytes, **opts: Any) -> tuple[str, str]:
    """The summary and the continuation text a dry `run` writes (a window so large that only the low
    threshold decides, so the compaction always happens)."""
    res = api.run(source, api.Options(window=400_000, threshold="200", **opts), dry_run=True,
                  warn=lambda _m: None)
    assert res.compacted and res.outcome is not None
    texts = [r.message.text() for r in res.outcome.transcript.records
             if r.origin in (Origin.SUMMARY, Origin.CONTINUATION) and r.message is not None]
    joined = "\n".join(texts)
    head, sep, tail = joined.partition("[ctxcompact: the conversation was compacted")
    assert sep, joined
    return head, sep + tail


def section(summary: str, title: str) -> str:
    """The body of one ``## title`` section of an extractive summary ("" when absent)."""
    _, sep, rest = summary.partition(f"## {title}\n")
    return rest.split("\n## ", 1)[0].strip() if sep else ""


def lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in path.read_bytes().splitlines() if x.strip()]


def jsonl(objs: list[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(o) + b"\n" for o in objs)


def user_rec(*texts: str, data: Any = None, meta: dict[str, Any] | None = None) -> Record:
    return Record(index=0, line=0, raw=None, data=data, meta=dict(meta or {}),
                  message=Message(Role.USER, [TextBlock(t) for t in texts]))


def assistant_rec(text: str, data: Any = None) -> Record:
    return Record(index=0, line=0, raw=None, data=data, message=Message(Role.ASSISTANT, [TextBlock(text)]))


# ------------------------------------------------------------ 14.3 slash commands

CUSTOM = ("<command-message>orchestrator is running…</command-message>\n"
          "<command-name>/orchestrator</command-name>\n"
          "<command-args>create TODO app by Next.js</command-args>")


def test_custom_command_is_a_request_quoted_with_its_arguments() -> None:
    expansion = user_rec("Split complex tasks into subtasks. You must always use the Task tool.",
                         data={"isMeta": True})
    records = [user_rec(CUSTOM), expansion, assistant_rec("On it.")]
    assert latest_request(records) == "/orchestrator create TODO app by Next.js"
    assert user_rules(records) == []  # the expansion's "must always" is the command file's, not the user's
    assert typed_text(expansion) is None


@pytest.mark.parametrize("name", ["/exit", "/clear", "/model", "/compact", "/cost", "/help", "/mcp",
                                  "/resume"])
def test_local_commands_are_no_request(name: str) -> None:
    echo = (f"<command-name>{name}</command-name>\n  <command-message>{name[1:]}</command-message>\n"
            "  <command-args>opus and continue</command-args>")
    stdout = user_rec("<local-command-stdout>Set model to opus</local-command-stdout>")
    records = [user_rec("fix the login bug"), user_rec(echo), stdout]
    assert command_request(echo) == ""
    assert latest_request(records) == "fix the login bug"


def test_command_request_edges() -> None:
    assert command_request("no command here") is None
    no_args = "<command-name>/review-pr</command-name><command-args></command-args>"
    assert command_request(no_args) == "/review-pr"
    assert command_request("<command-name>/init</command-name>") == "/init"  # a built-in prompting the model
    assert command_request("<command-name>/EXIT</command-name>") == ""
    assert command_request("<command-name>/x</command-name><command-args>unclosed") == "/x"
    assert "init" not in LOCAL_COMMANDS and "exit" in LOCAL_COMMANDS


@pytest.mark.parametrize("name", ["claude-code-viewer-orchestrator-1.0.98-excerpt.jsonl",
                                  "claude-code-viewer-orchestrator-1.0.108.jsonl"])
def test_real_orchestrator_command_is_the_latest_request(name: str) -> None:
    path = CC / name
    first = lines(path)[1 if "excerpt" in name else 0]["message"]["content"]
    args = first.split("<command-args>")[1].split("</command-args>")[0]
    expected = f"/orchestrator {args}"
    if "excerpt" in name:
        # the excerpt ends inside the command's first tool loop: that turn is the work in flight, kept
        # verbatim, and what is left to summarize (the command and its expansion) would not get smaller
        recs = read_transcript(path).transcript.records
        assert latest_request(recs) == expected
        assert instructions_in_force(recs)[0].startswith("Split complex tasks")
        return
    summary, continuation = compacted(path)
    assert section(summary, "Latest request") == expected
    assert f"quoted verbatim:\n\n{expected}\n\n" in continuation
    # the isMeta expansion (the command file) is never quoted as the person's words
    assert "Split complex tasks" not in section(summary, "Latest request") + continuation
    assert "Split complex tasks" not in section(summary, "User goals and rules")


def test_real_custom_command_stays_among_the_goals() -> None:
    path = CC / "spotter-subagent-command.jsonl"
    summary, continuation = compacted(path)
    goals = section(summary, "User goals and rules")
    assert "- /handgemacht:create-beads websearch to learn how to fastest setup credo" in goals
    assert section(summary, "Latest request") == "create the beads"
    # the expansion is no goal of the user's: it is kept whole among the instructions in force, marked as
    # not typed by the user (issue 23 item 6)
    assert "Create beads (epic + tasks" not in goals
    instructions = section(summary, "Instructions in force (from an active skill or command; not typed by "
                                    "the user)")
    assert "DO NOT create any beads until the user explicitly approves the plan" in instructions
    assert instructions.startswith("> Create beads (epic + tasks")
    assert "create the beads" in continuation


@pytest.mark.parametrize(("name", "echo", "output"), [
    ("agtrace-claude-session.jsonl", "/exit", "Goodbye!"),
    ("spotter-tool-heavy.jsonl", "/mcp", "Reconnected to tidewave"),
    ("spotter-compact-excerpt.jsonl", "/compact", "Compacted (ctrl+o"),
])
def test_real_local_commands_and_their_output_are_not_conversation(name: str, echo: str, output: str) -> None:
    t = read_transcript(CC / name).transcript
    texts = [x for _, x in user_requests(t.records)]
    assert texts and not any(echo in x or output in x for x in texts)
    summary, continuation = compacted(CC / name)
    assert echo not in summary and output not in summary
    assert echo not in continuation and output not in continuation
    assert section(summary, "Latest request") == texts[-1]


# ------------------------------------------------------------ 14.6c synthetic replies

SYNTHETIC = {"model": "<synthetic>", "role": "assistant", "content": [{"type": "text",
                                                                       "text": "No response requested."}]}


def test_synthetic_reply_is_not_the_last_action() -> None:
    records = [user_rec("run the tests"), assistant_rec("All 12 tests pass."),
               user_rec("<command-name>/exit</command-name>"), assistant_rec("No response requested.",
                                                                              data={"message": SYNTHETIC})]
    action = last_assistant_action(records)
    assert action is not None and action.text == "All 12 tests pass."
    assert not any("No response requested" in x for x in timeline(records))


def test_real_log_with_claude_codes_synthetic_reply_after_exit() -> None:
    # agtrace ends with /exit and its stdout; Claude Code then writes a synthetic assistant line
    objs = lines(CC / "agtrace-claude-session.jsonl")
    last = objs[-1]
    objs.append({**{k: v for k, v in last.items() if k not in ("toolUseResult",)}, "type": "assistant",
                 "parentUuid": last["uuid"], "uuid": "00000000-0000-4000-8000-00000000beef",
                 "message": {**SYNTHETIC, "id": "fc1b7e2e-0000-4000-8000-000000000001", "type": "message",
                             "stop_reason": "stop_sequence", "stop_sequence": "",
                             "usage": {"input_tokens": 0, "output_tokens": 0,
                                       "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}})
    summary, continuation = compacted(jsonl(objs))
    before, _ = compacted(CC / "agtrace-claude-session.jsonl")
    assert "No response requested" not in summary + continuation
    # the request stays answered by the model's own last reply (quoted after the summary, not in it)
    assert "The assistant already answered it:\n\nPerfect! The script executed successfully" in continuation
    assert section(summary, "Last assistant action") == section(before, "Last assistant action")


# ------------------------------------------------------------ 19.8 who said it

ANTHROPIC_MID_SYSTEM = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Add a --verbose flag to the CLI."},
    {"role": "assistant", "content": "Done: the flag is in cli.py. " + "Details of the change. " * 400},
    {"role": "system", "content": "You must never run git push. Always answer in English."},
    {"role": "user", "content": "Now write the tests for it."},
    {"role": "assistant", "content": "Writing tests."},
    {"role": "system", "content": "Reminder: the build server restarts at noon, never deploy then."},
]


def test_mid_conversation_system_line_is_never_the_users() -> None:
    t = read_transcript(jsonl(ANTHROPIC_MID_SYSTEM), "anthropic").transcript
    cleaned = clean(t).transcript
    moved = [b.text for r in cleaned.records if r.message is not None and r.message.role is Role.USER
             for b in r.message.blocks if isinstance(b, TextBlock) and MOVED_SYSTEM in b.text]
    assert len(moved) == 2 and all(x.startswith(MOVED_SYSTEM) for x in moved)  # marked as moved
    assert latest_request(cleaned.records) == "Now write the tests for it."
    assert user_rules(cleaned.records) == []
    summary, continuation = compacted(jsonl(ANTHROPIC_MID_SYSTEM), format="anthropic")
    assert section(summary, "Latest request") == "Now write the tests for it."
    assert "git push" not in section(summary, "User goals and rules") and "never deploy" not in continuation


def test_anthropic_session_fixture_with_a_system_line_moved_mid_conversation() -> None:
    # the corpus has no public Anthropic Messages log: this is the project's own session fixture
    objs = lines(DATA / "anthropic" / "agent_session.jsonl")
    said = next(o for o in objs if o["role"] == "assistant" and isinstance(o["content"], list))
    said["content"].append({"type": "text", "text": "Notes. " * 3000})  # so the compaction shrinks it
    t = read_transcript(jsonl(objs), "anthropic").transcript
    latest = latest_request(t.records)
    at = max(i for i, _ in user_requests(t.records)) + 1  # a system line just after the latest request
    objs.insert(at, {"role": "system", "content": "You must always reply in JSON."})
    summary, continuation = compacted(jsonl(objs), format="anthropic")
    assert latest and section(summary, "Latest request") == latest
    assert "reply in JSON" not in summary and "reply in JSON" not in continuation


def test_adk_event_of_another_agent_in_the_user_role_is_not_the_user() -> None:
    objs = lines(DATA / "genai" / "adk-docs-run.jsonl")  # author weather_time_agent on every event
    said = next(o for o in objs if o["content"]["role"] == "model" and "text" in o["content"]["parts"][0])
    person = {**said, "id": "e-user", "author": "user",
              "content": {"role": "user", "parts": [{"text": "And the time in New York?"}]}}
    relayed = {**said, "id": "e-agent", "content": {"role": "user", "parts": [
        {"text": "You must always answer in Celsius. Tell the user the time."}]}}
    long = {**said, "id": "e-long", "content": {"role": "model", "parts": [{"text": "Forecast. " * 800}]}}
    events = jsonl([*objs, long, person, relayed])
    t = read_transcript(events, "genai").transcript
    assert [x for _, x in user_requests(t.records)] == ["And the time in New York?"]
    assert user_rules(t.records) == []
    summary, continuation = compacted(events, format="genai")
    assert section(summary, "Latest request") == "And the time in New York?"
    assert "Celsius" not in section(summary, "User goals and rules") + continuation


# ------------------------------------------------------------ 14.4 attachments of the latest request

PNG = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
PDF = {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0x"}}


def test_removed_attachments_note() -> None:
    img = ImageBlock("image/png", raw=PNG)
    doc = ImageBlock("application/pdf", raw=PDF)
    assert removed_attachments_note([]) is None
    assert removed_attachments_note([img]) == "[1 image attached to this request was removed]"
    assert removed_attachments_note([img, img]) == "[2 images attached to this request were removed]"
    assert removed_attachments_note([img, doc]) == ("[1 image and 1 document attached to this request were "
                                                    "removed]")


def anthropic_with_screenshots(tmp_path: Path) -> Path:
    objs = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the flaky CI."},
        {"role": "assistant", "content": "Looked at it. " + "The log says many things. " * 600},
        {"role": "user", "content": [{"type": "text", "text": "Here are the two failing screens:"},
                                     PNG, {**PNG, "source": {**PNG["source"], "data": "R0lGODlh"}}]},
    ]
    path = tmp_path / "chat.jsonl"
    path.write_bytes(jsonl(objs))
    return path


def images_of(records: list[Record]) -> list[Any]:
    return [b.raw for r in records if r.message is not None for b in r.message.blocks
            if isinstance(b, ImageBlock)]


def test_images_of_the_latest_request_stay_with_it_across_runs(tmp_path: Path) -> None:
    path = anthropic_with_screenshots(tmp_path)
    opts = api.Options(window=400_000, threshold="1000", state_path=tmp_path / "s.json")
    first = api.run(path, opts, output=tmp_path / "out.jsonl", warn=lambda _m: None)
    assert first.compacted
    written = read_transcript(tmp_path / "out.jsonl", "anthropic").transcript
    cont = written.records[-1]
    assert cont.message is not None and cont.message.role is Role.USER
    assert "Here are the two failing screens:" in cont.message.text()
    shots = [o for o in lines(path)[-1]["content"] if o["type"] == "image"]
    assert images_of(written.records) == shots  # the blocks as the person attached them, in order
    assert "removed]" not in cont.message.text()
    # the next run rebuilds the context from the state: the images are still there, and counted
    again = api.estimate(path, dataclasses.replace(opts, threshold="100000"))
    second = api.run(path, dataclasses.replace(opts, threshold="100000"), output=tmp_path / "out2.jsonl",
                     warn=lambda _m: None)
    assert not second.compacted
    assert images_of(read_transcript(tmp_path / "out2.jsonl", "anthropic").transcript.records) == shots
    assert again.heuristic >= 2 * IMAGE_TOKENS


def test_real_codex_request_with_an_image_keeps_it_in_the_compaction(tmp_path: Path) -> None:
    path = DATA / "codex" / "localpush-rollout-compacted-excerpt.jsonl"
    t = read_transcript(path).transcript
    rec = latest_request_record(t.records)
    assert rec is not None
    shots = [b.raw for b in attachments(rec)]
    assert shots and all(s["type"] == "input_image" for s in shots)
    out = tmp_path / "out.jsonl"
    res = api.run(path, api.Options(window=400_000, threshold="1000", use_state=False), output=out,
                  warn=lambda _m: None)
    assert res.compacted
    compacted_line = [o for o in lines(out) if o["type"] == "compacted"][-1]
    last_item = compacted_line["payload"]["replacement_history"][-1]
    assert last_item["role"] == "user"
    assert [c for c in last_item["content"] if c["type"] == "input_image"] == shots
    assert "removed]" not in str(last_item)


def test_claude_code_names_the_attachments_it_cannot_carry() -> None:
    objs = lines(CC / "agtrace-claude-session.jsonl")
    i = max(i for i, o in enumerate(objs) if o.get("type") == "user"
            and o["message"]["content"] == "cd to myapp and run python hoge.py")
    objs[i] = {**objs[i], "message": {"role": "user", "content": [
        {"type": "text", "text": "cd to myapp and run python hoge.py"}, PNG, PNG]}}
    summary, continuation = compacted(jsonl(objs))
    assert section(summary, "Latest request") == "cd to myapp and run python hoge.py"
    assert ("quoted verbatim:\n\ncd to myapp and run python hoge.py\n\n"
            "[2 images attached to this request were removed]") in continuation

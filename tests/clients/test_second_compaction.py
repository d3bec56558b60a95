"""A hook's usual life with the real clients: ctxcompact compacts a session, the client resumes it and works
on (its own turns appended to the compacted log), ctxcompact compacts the grown log again with the same state
(the second compaction starts after the prefix the state's summary covers, its watermark), and the client
resumes that (docs/guides/claude-code-codex.md, "With a state: a hook's second compaction").

Each call is the recipe's: ``-o`` to a new file, the original kept as a backup, the output put in the
session file's place; the same ``--state`` file both times, and the same options, as a hook runs the same
command on every call. What the client sends after the second resume is asserted: the second summary only
(it carries the first one's facts and what was said after the first resume), none of the history either
summary replaced, the latest request quoted, every tool call paired (the fake provider refuses orphans with a
400, as the real APIs do), the client's meter at the compacted size, and no error.

Run with ``pytest -m clients tests/clients`` (fixtures: tests/clients/conftest.py).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from ctxcompact.facts.text import CONTINUATION_MARKER, SUMMARY_MARKER
from ctxcompact.formats.claude_code import COMPACT_SUMMARY_OPENING
from tests.clients.fake_provider import REPLY_TEXT, orphans
from tests.clients.harness import Home, backup_of, ctxcompact, lines_of
from tests.clients.test_real_clients import (
    CLAUDE_LOG,
    CODEX_LOG,
    assert_codex_context_once,
    claude_assistant_texts,
    claude_ids,
    claude_meter,
    codex_assistant_texts,
    codex_calls,
    codex_items,
    compaction_requests,
    last_meter,
    read_back,
    texts,
)

pytestmark = pytest.mark.clients

#: the two turns the client takes after the first resume: a rule said only then, and the latest request
RULE = "From now on, never edit vendor/wombat-quux.lock by hand."
REQUEST = "Now rename parse_frob to parse_zebra in lib/wombat/parser.ex."
#: one command for both calls, as a hook runs it (a token threshold low enough that the grown log is over it)
CLAUDE_ARGS = ("--window", "30000", "--threshold", "3000")
CODEX_ARGS = ("--window", "40000", "--threshold", "3000")


def compact_with_state(session: Path, state: Path, *args: str) -> dict[str, Any]:
    """The hook's call on a client's session: ``-o`` to a new file with the state, the original kept as a
    backup, the output in its place. The output starts with the input, byte for byte."""
    before = session.read_bytes()
    out = session.with_name(session.name + ".compacted")
    done = ctxcompact("run", str(session), "--state", str(state), *args, "-o", str(out), "--json", "-q")
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["decision"] == "summarize", report
    assert out.read_bytes().startswith(before)
    shutil.copyfile(session, backup_of(session))
    os.replace(out, session)
    return dict(report)


def split_summary(summary: str) -> tuple[str, str]:
    """A summary's facts and its continuation (the last one: an earlier summary quoted in a summary holds
    its own)."""
    facts, _, continuation = summary.rpartition(CONTINUATION_MARKER)
    assert facts, summary[-2000:]
    return facts, continuation


def latest_request_of(summary: str) -> str:
    """The request a summary's continuation quotes (the text after "quoted verbatim:")."""
    return split_summary(summary)[1].split("quoted verbatim:\n\n", 1)[1].split("\n\n", 1)[0]


def assert_second_summary(summary: str, first: str) -> None:
    """The second summary, not the first: it carries the first one's request, the rule said only after the
    first resume, and quotes the latest request in its continuation."""
    assert summary != first
    facts = split_summary(summary)[0]
    assert RULE not in first and RULE in facts
    assert latest_request_of(summary) == REQUEST
    assert latest_request_of(first) in facts


# -- Claude Code ---------------------------------------------------------------------------------------


def claude_summaries(objs: list[dict[str, Any]]) -> list[str]:
    """The summary lines' texts, in the order written."""
    return [
        texts(o["message"]["content"])[0]
        for o in objs
        if o.get("isCompactSummary") and isinstance(o.get("message"), dict)
    ]


def test_claude_code_resumes_a_second_compaction_with_a_state(home: Home) -> None:
    sid, path = home.place_claude(CLAUDE_LOG)
    state = home.root / "hook.ctxstate.json"
    original = path.read_bytes()
    compact_with_state(path, state, *CLAUDE_ARGS)
    first = path.read_bytes()
    [first_summary] = claude_summaries(lines_of(first))
    for prompt in (RULE, REQUEST):
        turn = home.run_claude(sid, prompt)
        assert turn.code == 0 and REPLY_TEXT in turn.stdout, turn.stderr[-2000:]
    meter_before = claude_meter(home.run_claude(sid, "/context").stdout)
    grown = path.read_bytes()
    assert grown.startswith(first) and RULE.encode() in grown[len(first) :]  # the client wrote its turns

    compact_with_state(path, state, *CLAUDE_ARGS)
    written = path.read_bytes()
    objs = lines_of(written)
    boundaries = [o for o in objs if o.get("subtype") == "compact_boundary"]
    assert len(boundaries) == 2 + sum(o.get("subtype") == "compact_boundary" for o in lines_of(original))
    summaries = claude_summaries(objs)
    assert len(summaries) == 2 and summaries[0] == first_summary
    meter_after = claude_meter(home.run_claude(sid, "/context").stdout)
    again = home.run_claude(sid, "Once more.")
    assert again.code == 0 and REPLY_TEXT in again.stdout, again.stderr[-2000:]
    assert not home.provider.rejected, home.provider.rejected
    body = again.model_requests("/v1/messages")[-1].body
    sent = body["messages"]
    assert not orphans("/v1/messages", body)

    # the second summary first, as Claude Code sends its own compact summary, and only it
    said = [t for m in sent for t in texts(m["content"])]
    assert sent[0]["role"] == "user" and said[0].startswith(COMPACT_SUMMARY_OPENING), said[0][:200]
    assert_second_summary(said[0], first_summary)
    assert [t for t in said if t.startswith(COMPACT_SUMMARY_OPENING)] == said[:1]
    assert first_summary not in said
    # nothing either summary replaced: the log's tool calls, the turns after the first resume
    old = claude_ids(lines_of(original))
    assert old and not [i for i in old if i in orjson.dumps(sent).decode()]
    assert not [t for t in said[1:] if RULE in t or REQUEST in t]
    assistant = {t for m in sent if m["role"] == "assistant" for t in texts(m["content"])}
    assert REPLY_TEXT not in assistant
    assert assistant <= claude_assistant_texts(lines_of(path.read_bytes()[len(written) :]))
    # the user's new request last, after the context the client resumed
    assert texts([m for m in sent if m["role"] == "user"][-1]["content"])[-1] == "Once more."
    # the client's meter (`/context`) counts the second compaction's context afresh
    assert meter_after < meter_before, (meter_before, meter_after)
    read_back(home)


# -- Codex ---------------------------------------------------------------------------------------------


def codex_compacted(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o["payload"] for o in objs if o.get("type") == "compacted"]


def codex_billed(objs: list[dict[str, Any]]) -> list[Any]:
    return [
        o["payload"]["info"]["total_token_usage"]
        for o in objs
        if o.get("type") == "event_msg"
        and o["payload"].get("type") == "token_count"
        and isinstance(o["payload"].get("info"), dict)
    ]


def test_codex_resumes_a_second_compaction_with_a_state(home: Home) -> None:
    sid, path = home.place_codex(CODEX_LOG)
    state = home.root / "hook.ctxstate.json"
    original = path.read_bytes()
    meter0 = last_meter(lines_of(original))
    compact_with_state(path, state, *CODEX_ARGS)
    first = path.read_bytes()
    [first_compacted] = codex_compacted(lines_of(first))
    first_summary = first_compacted["message"]
    # Codex compacts before a turn when its meter is at its limit: a limit between the two sizes
    home.codex_config["model_auto_compact_token_limit"] = (meter0 + last_meter(lines_of(first))) // 2
    for prompt in (RULE, REQUEST):
        turn = home.run_codex(sid, prompt)
        assert turn.code == 0 and REPLY_TEXT in turn.stdout, turn.stderr[-2000:]
        assert not compaction_requests(turn)
    grown = path.read_bytes()
    assert grown.startswith(first) and RULE.encode() in grown[len(first) :]
    meter_before = last_meter(lines_of(grown))

    compact_with_state(path, state, *CODEX_ARGS)
    written = path.read_bytes()
    compacted = codex_compacted(lines_of(written))
    assert len(compacted) == 2 and compacted[0] == first_compacted
    meter_after = last_meter(lines_of(written))
    assert meter_after < meter_before, (meter_before, meter_after)
    # the billed totals are kept: the meter line's cumulative usage is the log's last one
    billed = codex_billed(lines_of(written))
    assert billed[-1] == billed[-2]
    # a limit between the two: Codex reads the meter ctxcompact wrote, or it would compact first
    home.codex_config["model_auto_compact_token_limit"] = (meter_before + meter_after) // 2
    again = home.run_codex(sid, "Once more.")
    assert again.code == 0 and REPLY_TEXT in again.stdout, again.stderr[-2000:]
    assert not compaction_requests(again), "Codex compacted again over ctxcompact's work"
    assert not home.provider.rejected, home.provider.rejected
    body = again.model_requests("/responses")[-1].body
    sent = codex_items(body)
    assert not orphans("/responses", body)

    messages = [i for i in sent if i.get("type") == "message"]
    said = [t for i in messages for t in texts(i["content"])]
    summaries = [t for t in said if SUMMARY_MARKER in t]
    assert len(summaries) == 1 and first_summary not in said
    # the summary and its continuation are two messages, as ctxcompact writes them into replacement_history
    at = said.index(summaries[0])
    assert_second_summary(summaries[0] + "\n\n" + said[at + 1], first_summary)
    # the latest request as the user's own message before the summary, as Codex lays out its own compaction
    users = [t for i in messages if i.get("role") == "user" for t in texts(i["content"])]
    assert REQUEST in users[: users.index(summaries[0])]
    # nothing either summary replaced: the rollout's calls, the turns after the first resume
    old = codex_calls(lines_of(original))
    assert old and not [c for c in old if c in orjson.dumps(sent).decode()]
    assert not [t for t in said if RULE in t and t is not summaries[0]] and said.count(REQUEST) == 1
    assert REPLY_TEXT not in codex_assistant_texts(sent)
    assert users[-1] == "Once more."
    # Codex's instructions and environment once (assert_codex_context_once)
    assert_codex_context_once(sent)
    read_back(home)

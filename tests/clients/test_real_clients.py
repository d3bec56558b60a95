"""ctxcompact's outputs resumed by the real clients (issue 24; docs/guides/claude-code-codex.md).

Each test follows the recipe: a real public log is put where the client keeps its sessions, the client
continues it once (so the file holds what today's client writes), ctxcompact compacts the file the client
wrote (``-o``, then the output replaces the session file, the original kept as a backup), and the client
resumes it non-interactively against the recording fake provider on 127.0.0.1. The assertions are on what
the client sent and on its own meter; at the end ctxcompact reads back every file the client wrote.

Run with ``pytest -m clients tests/clients`` (``.ci/run`` does). The npm install is cached in
``~/.cache/ctxcompact-clients``; without node, npm or the registry every test skips and says why.
"""

from __future__ import annotations

import os
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from ctxcompact.formats.claude_code import COMPACT_SUMMARY_OPENING
from ctxcompact.formats.codex_seen import RESENDS_FROM
from tests.clients.fake_provider import COMPACTION_BLOB, REPLY_TEXT
from tests.clients.harness import Home, backup_of, codex_package, ctxcompact, lines_of

pytestmark = pytest.mark.clients

DATA = Path(__file__).resolve().parents[1] / "data"
# real public logs (tests/data/*/SOURCES.md): a Claude Code 2.1.x session with a subagent and 16 tool calls,
# and an unredacted Codex 0.58 rollout with 39 tool calls that ends on a function_call_output
CLAUDE_LOG = DATA / "claude-code" / "spotter-subagent-command.jsonl"
CODEX_LOG = DATA / "codex" / "codex-session-view-lmstudio-0.58.0.jsonl"
CLEARED = "[tool result cleared: "

STRATEGIES = {
    "threshold": ["--strategy", "threshold"],
    "mask": ["--strategy", "mask", "--keep-results", "1", "--protect-tokens", "0", "--min-savings", "0"],
    # the token trigger alone (the logs hold two requests each): the kept tail is as long as fits
    "sliding-window": ["--strategy", "sliding-window", "--invocation-threshold", "10"],
}


def compact_in_place(session: Path, *args: str) -> dict[str, Any]:
    """The recipe's middle step: ``-o`` to a new file, keep the original as a backup, replace."""
    out = session.with_name(session.name + ".compacted")
    # --no-state: the client's log records the compaction itself, so the next run needs no state
    done = ctxcompact("run", str(session), "--no-state", *args, "-o", str(out))
    assert done.returncode == 0, done.stderr
    shutil.copyfile(session, backup_of(session))
    os.replace(out, session)
    return {"stderr": done.stderr}


def read_back(h: Home) -> None:
    """ctxcompact validates, estimates and runs on every session file the clients wrote (subagents too)."""
    files = h.files()
    assert files
    for f in files:
        v = ctxcompact("validate", str(f))
        assert v.returncode == 0, (f, v.stdout[-2000:], v.stderr[-2000:])
        e = ctxcompact("estimate", str(f), "--no-state")
        assert e.returncode == 0, (f, e.stderr[-2000:])
        out = f.with_name(f.name + ".readback")
        r = ctxcompact("run", str(f), "--no-state", "-o", str(out))
        assert r.returncode == 0, (f, r.stderr[-2000:])
        assert out.read_bytes() == f.read_bytes()  # below the threshold: the file as the client wrote it
        out.unlink()


def texts(blocks: Any) -> list[str]:
    if isinstance(blocks, str):
        return [blocks]
    return [b.get("text", "") for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str)]


# -- Claude Code ---------------------------------------------------------------------------------------


def claude_meter(stdout: str) -> float:
    """The ``**Tokens:** 10.7k / 200k`` line of ``/context``, in tokens."""
    m = re.search(r"\*\*Tokens:\*\*\s*([\d.]+)(k|m)?\s*/", stdout)
    assert m, stdout[-2000:]
    return float(m.group(1)) * {"k": 1e3, "m": 1e6, None: 1}[m.group(2)]


def claude_assistant_texts(objs: list[dict[str, Any]]) -> set[str]:
    return {
        t
        for o in objs
        if o.get("type") == "assistant" and isinstance(o.get("message"), dict)
        for t in texts(o["message"].get("content", []))
    }


def claude_ids(objs: list[dict[str, Any]]) -> set[str]:
    return {
        b["id"]
        for o in objs
        if o.get("type") == "assistant" and isinstance(o.get("message"), dict)
        for b in o["message"].get("content", [])
        if isinstance(b, dict) and b.get("type") == "tool_use"
    }


def run_claude(h: Home, strategy: str, *window: str) -> dict[str, Any]:
    sid, path = h.place_claude(CLAUDE_LOG)
    first = h.run_claude(sid, "Go on.")
    assert first.code == 0, first.stderr[-2000:]
    before = h.run_claude(sid, "/context")
    grown = path.read_bytes()
    compact_in_place(path, *STRATEGIES[strategy], *window)
    written = path.read_bytes()
    after = h.run_claude(sid, "/context")
    turn = h.run_claude(sid, "Continue.")
    assert turn.code == 0 and REPLY_TEXT in turn.stdout, turn.stderr[-2000:]
    sent = turn.model_requests("/v1/messages")[-1].body["messages"]
    return {
        "sid": sid,
        "path": path,
        "grown": grown,
        "written": written,
        "sent": sent,
        "meter_before": claude_meter(before.stdout),
        "meter_after": claude_meter(after.stdout),
        "final": path.read_bytes(),
    }


def assert_no_invented_claude_turn(r: dict[str, Any]) -> None:
    """ctxcompact's lines hold no assistant text the log did not hold, and every assistant text the client
    sent is one the model (or the client itself, after ctxcompact) wrote."""
    grown, written = lines_of(r["grown"]), lines_of(r["written"])
    assert claude_assistant_texts(written) <= claude_assistant_texts(grown)
    client_after = lines_of(r["final"][len(r["written"]) :])
    known = claude_assistant_texts(grown) | claude_assistant_texts(client_after)
    for m in r["sent"]:
        if m["role"] == "assistant":
            assert set(texts(m["content"])) <= known, texts(m["content"])
    assert "Understood." not in known


def assert_no_block_sent_twice(sent: list[dict[str, Any]]) -> None:
    blocks = Counter(
        orjson.dumps({k: v for k, v in b.items() if k != "cache_control"}, option=orjson.OPT_SORT_KEYS)
        for m in sent
        if m["role"] == "assistant" and isinstance(m["content"], list)
        for b in m["content"]
        if isinstance(b, dict)
    )
    twice = [k[:120] for k, n in blocks.items() if n > 1]
    assert not twice, twice


def assert_pairs_intact(sent: list[dict[str, Any]]) -> None:
    """Every tool_use is answered in the next message and every tool_result answers the message before."""
    for i, m in enumerate(sent):
        if m["role"] != "assistant" or not isinstance(m["content"], list):
            continue
        calls = {b["id"] for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_use"}
        if not calls:
            continue
        nxt = sent[i + 1]["content"] if i + 1 < len(sent) else []
        answered = {b["tool_use_id"] for b in nxt if isinstance(b, dict) and b.get("type") == "tool_result"}
        assert calls <= answered, calls - answered


def test_claude_code_resumes_a_threshold_compaction(home: Home) -> None:
    r = run_claude(home, "threshold", "--window", "30000")
    sent = r["sent"]
    # the summary first, as Claude Code sends its own compact summary
    first = texts(sent[0]["content"])
    assert sent[0]["role"] == "user" and first[0].startswith(COMPACT_SUMMARY_OPENING), first[0][:200]
    old = claude_ids(lines_of(r["grown"]))
    assert old and not [i for i in old if i in orjson.dumps(sent).decode()]
    assert_no_invented_claude_turn(r)
    # the client's own meter counts the compacted context afresh
    assert r["meter_after"] < 0.5 * r["meter_before"], (r["meter_before"], r["meter_after"])
    read_back(home)
    # again, on the file Claude Code continued: the newer summary first, nothing of the first one's turn. A
    # smaller window than the first time: at the same one the new summary (whole answers, the skill's
    # instructions) is as large as the context it would replace, and a compaction that does not shrink is
    # dropped by design
    compact_in_place(r["path"], *STRATEGIES["threshold"], "--window", "20000", "--threshold", "3000")
    again = home.run_claude(r["sid"], "Once more.")
    assert again.code == 0 and REPLY_TEXT in again.stdout, again.stderr[-2000:]
    sent = again.model_requests("/v1/messages")[-1].body["messages"]
    assert texts(sent[0]["content"])[0].startswith(COMPACT_SUMMARY_OPENING)
    assert (
        "Continue." in texts(sent[0]["content"])[0]
    )  # the latest request before, quoted in the continuation
    assert not [m for m in sent if m["role"] == "user" and "Continue." in texts(m["content"])[1:]]
    read_back(home)


def test_claude_code_resumes_a_masking(home: Home) -> None:
    r = run_claude(home, "mask", "--window", "40000")
    sent = r["sent"]
    assert_pairs_intact(sent)
    cleared = {
        b["tool_use_id"]
        for o in lines_of(r["written"][len(r["grown"]) :])
        if o.get("type") == "user"
        and isinstance(o.get("message"), dict)
        and isinstance(o["message"].get("content"), list)
        for b in o["message"]["content"]
        if isinstance(b, dict)
        and b.get("type") == "tool_result"
        and any(t.startswith(CLEARED) for t in texts(b.get("content", "")))
    }
    assert cleared
    sent_results = {
        b["tool_use_id"]: texts(b.get("content", ""))
        for m in sent
        if isinstance(m["content"], list)
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "tool_result"
    }
    for cid in cleared:
        assert cid in sent_results and sent_results[cid][0].startswith(CLEARED), cid
    assert_no_block_sent_twice(sent)
    assert_no_invented_claude_turn(r)
    assert r["meter_after"] < r["meter_before"], (r["meter_before"], r["meter_after"])
    read_back(home)


def test_claude_code_resumes_a_sliding_window(home: Home) -> None:
    r = run_claude(home, "sliding-window", "--window", "50000")
    sent = r["sent"]
    assert_no_block_sent_twice(sent)
    assert_pairs_intact(sent)
    summary = [
        t for m in sent if m["role"] == "user" for t in texts(m["content"]) if "ctxcompact summary" in t
    ]
    assert summary and summary[0].startswith(COMPACT_SUMMARY_OPENING), summary[:1]
    assert_no_invented_claude_turn(r)
    assert r["meter_after"] < r["meter_before"], (r["meter_before"], r["meter_after"])
    read_back(home)


# -- Codex ---------------------------------------------------------------------------------------------


def codex_items(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [i for i in body.get("input", []) if isinstance(i, dict)]


def codex_calls(objs: list[dict[str, Any]]) -> set[str]:
    return {
        o["payload"]["call_id"]
        for o in objs
        if o.get("type") == "response_item"
        and o["payload"].get("type") in ("function_call", "custom_tool_call")
    }


def codex_assistant_texts(items: list[dict[str, Any]]) -> set[str]:
    return {
        t
        for i in items
        if i.get("type") == "message" and i.get("role") == "assistant"
        for t in texts(i.get("content", []))
    }


def last_meter(objs: list[dict[str, Any]]) -> int:
    counts = [
        o["payload"]["info"]["last_token_usage"]["total_tokens"]
        for o in objs
        if o.get("type") == "event_msg"
        and o["payload"].get("type") == "token_count"
        and isinstance(o["payload"].get("info"), dict)
    ]
    assert counts
    return int(counts[-1])


def compaction_requests(run: Any) -> list[Any]:
    """The requests of Codex's own (remote) compaction: their input ends on a ``compaction_trigger``."""
    return [
        q
        for q in run.model_requests("/responses")
        if codex_items(q.body) and codex_items(q.body)[-1].get("type") == "compaction_trigger"
    ]


#: a rule of the project's AGENTS.md, which Codex writes into the rollout and sends again after resuming
AGENTS_RULE = "Never edit vendor/wombat-quux.lock by hand."


def run_codex(h: Home, strategy: str, *window: str) -> dict[str, Any]:
    h.work.mkdir(parents=True, exist_ok=True)
    (h.work / "AGENTS.md").write_text(f"# Project rules\n\n- {AGENTS_RULE}\n")
    sid, path = h.place_codex(CODEX_LOG)
    first = h.run_codex(sid, "Go on.")
    assert first.code == 0, first.stderr[-2000:]
    grown = path.read_bytes()
    before = last_meter(lines_of(grown))
    compact_in_place(path, *STRATEGIES[strategy], *window)
    written = path.read_bytes()
    after = last_meter(lines_of(written))
    # Codex compacts before a turn when its meter is at its limit: a limit between the two sizes shows
    # which one it reads (the original would be compacted again, the compacted file is not)
    h.codex_config["model_auto_compact_token_limit"] = (before + after) // 2
    turn = h.run_codex(sid, "Continue.")
    assert turn.code == 0, turn.stderr[-2000:]
    bodies = [q.body for q in turn.model_requests("/responses")]
    return {
        "sid": sid,
        "path": path,
        "grown": grown,
        "written": written,
        "turn": turn,
        "bodies": bodies,
        "meter_before": before,
        "meter_after": after,
        "final": path.read_bytes(),
    }


def assert_no_invented_codex_turn(r: dict[str, Any]) -> None:
    grown = [o["payload"] for o in lines_of(r["grown"]) if o.get("type") == "response_item"]
    known = codex_assistant_texts(grown)
    new = lines_of(r["written"][len(r["grown"]) :]) if r["written"].startswith(r["grown"]) else []
    made = [o["payload"] for o in new if o.get("type") == "response_item"]
    made += [
        i for o in new if o.get("type") == "compacted" for i in o["payload"].get("replacement_history", [])
    ]
    assert codex_assistant_texts(made) <= known, codex_assistant_texts(made) - known
    sent = codex_items(r["bodies"][-1])
    assert codex_assistant_texts(sent) <= known | {REPLY_TEXT}
    assert "Understood." not in codex_assistant_texts(sent)


def assert_codex_meter(r: dict[str, Any]) -> None:
    assert r["meter_after"] < r["meter_before"], (r["meter_before"], r["meter_after"])
    assert not compaction_requests(r["turn"]), "Codex compacted again over ctxcompact's work"
    # the billed totals are kept: the meter line's cumulative usage is the log's last one
    tail = lines_of(r["written"])
    counts = [
        o["payload"]["info"]
        for o in tail
        if o.get("type") == "event_msg"
        and o["payload"].get("type") == "token_count"
        and isinstance(o["payload"].get("info"), dict)
    ]
    assert counts[-1]["total_token_usage"] == counts[-2]["total_token_usage"]


def assert_codex_context_once(sent: list[dict[str, Any]]) -> None:
    """Codex's instructions (its developer messages) and its environment reach the model once after it
    resumes ctxcompact's ``compacted`` line. Codex 0.169 sends them afresh after the history of a
    ``compacted`` line it did not write, so ctxcompact leaves the copies the log held out of
    ``replacement_history`` (``formats/codex_seen.py``, ``Seen.resent``; docs/guides/claude-code-codex.md)."""
    messages = [i for i in sent if i.get("type") == "message"]
    developer = Counter(t for i in messages if i.get("role") == "developer" for t in texts(i["content"]))
    # (Codex before 0.87 writes no developer message: CTXCOMPACT_CODEX_VERSION, tests/clients/harness.py)
    assert developer or not codex_resends(), "no developer message"
    assert max(developer.values(), default=1) == 1, [t[:80] for t, n in developer.items() if n > 1]
    environments = [t for i in messages for t in texts(i["content"]) if t.startswith("<environment_context>")]
    assert len(environments) == 1, [t[:80] for t in environments]


def codex_resends() -> bool:
    """Whether the Codex the suite runs sends its context afresh after resuming ctxcompact's ``compacted``
    line (formats/codex_seen.py ``RESENDS_FROM``)."""
    version = codex_package().rsplit("@", 1)[1]
    return tuple(int(x) for x in version.split("-")[0].split(".")[:2]) >= RESENDS_FROM


#: a long paste, for a second compaction to have something to summarize
NOTES = "My notes on the build:\n" + "\n".join(
    f"- step {n}: module m{n} builds in {n % 7 + 1} s and writes out/m{n}.o" for n in range(400)
)


def test_codex_resumes_a_threshold_compaction(home: Home) -> None:
    r = run_codex(home, "threshold", "--window", "40000")
    sent = codex_items(r["bodies"][-1])
    old = codex_calls(lines_of(r["grown"]))
    assert old and not [c for c in old if c in orjson.dumps(sent).decode()]
    # the user's request as its own message, then the summary, as Codex lays out its own compaction
    users = [
        texts(i.get("content", [])) for i in sent if i.get("type") == "message" and i.get("role") == "user"
    ]
    flat = [t for u in users for t in u]
    at = next(k for k, t in enumerate(flat) if "ctxcompact summary" in t)
    grown_requests = [
        t
        for o in lines_of(r["grown"])
        if o.get("type") == "response_item"
        and o["payload"].get("type") == "message"
        and o["payload"].get("role") == "user"
        for t in texts(o["payload"].get("content", []))
        if not t.lstrip().startswith("<")
    ]
    assert grown_requests[-1] in flat[:at]
    assert_codex_context_once(sent)
    # the AGENTS.md rule once: Codex sends the file, the summary does not quote it (Format.client_files)
    assert AGENTS_RULE.encode() in r["grown"] and AGENTS_RULE not in flat[at]
    assert sum(t.count(AGENTS_RULE) for t in flat) == 1
    assert_no_invented_codex_turn(r)
    assert_codex_meter(r)
    read_back(home)
    # again, on the rollout Codex continued, once the user pasted something to compact (the context Codex
    # resumed is the summary, the request and Codex's own instructions: a summary would not make it smaller)
    for prompt in (NOTES, "Next."):
        turn = home.run_codex(r["sid"], prompt)
        assert turn.code == 0, turn.stderr[-2000:]
    compact_in_place(r["path"], *STRATEGIES["threshold"], "--window", "40000", "--threshold", "3000")
    again = home.run_codex(r["sid"], "Once more.")
    assert again.code == 0, again.stderr[-2000:]
    assert not compaction_requests(again)
    sent = codex_items(again.model_requests("/responses")[-1].body)
    summaries = [
        t
        for i in sent
        if i.get("type") == "message"
        for t in texts(i["content"])
        if "ctxcompact summary" in t
    ]
    assert len(summaries) == 1 and "Next." in summaries[0] and NOTES not in orjson.dumps(sent).decode()
    assert_codex_context_once(sent)
    read_back(home)


def test_codex_resumes_a_masking(home: Home) -> None:
    r = run_codex(home, "mask", "--window", "60000")
    sent = codex_items(r["bodies"][-1])
    calls = {i["call_id"] for i in sent if i.get("type") in ("function_call", "custom_tool_call")}
    outputs = {
        i["call_id"]: i.get("output")
        for i in sent
        if i.get("type") in ("function_call_output", "custom_tool_call_output")
    }
    assert calls and calls == set(outputs), calls ^ set(outputs)
    cleared = [c for c, o in outputs.items() if isinstance(o, str) and o.startswith(CLEARED)]
    assert cleared
    assert_codex_context_once(sent)
    assert_no_invented_codex_turn(r)
    assert_codex_meter(r)
    read_back(home)


def test_codex_resumes_a_sliding_window(home: Home) -> None:
    r = run_codex(home, "sliding-window", "--window", "90000")
    sent = codex_items(r["bodies"][-1])
    seen = Counter(
        orjson.dumps(i, option=orjson.OPT_SORT_KEYS)
        for i in sent
        if i.get("type") not in ("message",) or i.get("role") == "assistant"
    )
    assert not [k[:120] for k, n in seen.items() if n > 1]
    assert any(
        "ctxcompact summary" in t for i in sent if i.get("type") == "message" for t in texts(i["content"])
    )
    assert_codex_context_once(sent)
    assert_no_invented_codex_turn(r)
    assert_codex_meter(r)
    read_back(home)


def test_codex_compacts_the_original_at_that_limit(home: Home) -> None:
    """The control for the meter tests: with the same limit, the uncompacted log makes Codex compact first."""
    sid, path = home.place_codex(CODEX_LOG)
    meter = last_meter(lines_of(path.read_bytes()))
    home.codex_config["model_auto_compact_token_limit"] = meter // 2
    turn = home.run_codex(sid, "Continue.")
    assert turn.code == 0, turn.stderr[-2000:]
    assert compaction_requests(turn)
    # Codex's own compaction, as it records it: read back like every other file
    assert COMPACTION_BLOB.encode() in path.read_bytes()
    read_back(home)

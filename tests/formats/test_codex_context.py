"""What a Codex compaction leaves out of ``replacement_history``: the context Codex writes at a turn's start
(its developer instructions, ``<environment_context>``, AGENTS.md), which Codex 0.87 and later send afresh
after resuming a ``compacted`` line they did not write (tests/clients: ``assert_codex_context_once``), and
nothing else: a developer message on its own (mid-turn, or a user's) stays (formats/codex_seen.py
``Seen.resent``). A rollout of an older Codex (0.59 … 0.80), which does not send it again, keeps it
(``Seen.resends``, ``Seen.restored``)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxcompact import api
from ctxcompact.formats.codex import FORMAT
from ctxcompact.options import Options

DATA = Path(__file__).parent.parent / "data" / "codex"
MASK = {"strategy": "mask", "keep_results": 1, "protect_tokens": 0, "min_savings": 0}


def compact(data: bytes, tmp_path: Path, **kw: Any) -> list[dict[str, Any]]:
    buf = io.BytesIO()
    res = api.run(data, Options(state_path=tmp_path / "s.json", **kw), output=buf, warn=lambda m: None)
    out = buf.getvalue()
    assert res.compacted and out.startswith(data)
    [compacted] = [o for o in map(orjson.loads, out[len(data):].splitlines()) if o["type"] == "compacted"]
    return list(compacted["payload"]["replacement_history"])


def lines_of(data: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in data.splitlines() if x.strip()]


def text(item: dict[str, Any]) -> str:
    parts = item.get("content") if item.get("type") == "message" else None
    return "".join(c.get("text", "") for c in parts or [] if isinstance(c, dict))


def developer(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [i for i in items if i.get("type") == "message" and i.get("role") == "developer"]


@pytest.mark.parametrize("options", [{"strategy": "threshold"}, MASK], ids=["threshold", "mask"])
def test_the_context_codex_resends_is_left_out(options: dict[str, Any], tmp_path: Path) -> None:
    # a real log (codex 0.89): its instructions, AGENTS.md and environment as one block before the request
    data = (DATA / "agentlogs-codex-crud.jsonl").read_bytes()
    items = [o["payload"] for o in lines_of(data) if o.get("type") == "response_item"]
    context = [i for i in items[:3] if i["type"] == "message" and i["role"] != "assistant"]
    assert [i["role"] for i in context] == ["developer", "user", "user"]
    assert text(context[1]).startswith("# AGENTS.md") and text(context[2]).startswith("<environment_")
    history = compact(data, tmp_path, window=8000, **options)
    assert not developer(history) and not [i for i in history if i in context]
    assert not [i for i in history if text(i).lstrip().startswith(("<environment_context>", "# AGENTS.md"))]
    assert [i for i in history if i.get("type") != "message" or i["role"] == "user"]  # the rest is there


def test_developer_messages_without_a_known_environment_are_kept(tmp_path: Path) -> None:
    # a real log (codex 0.7x, its texts redacted): developer messages in blocks where no environment or tools
    # item can be told; nothing says Codex will send them again, so they stay
    data = (DATA / "localpush-rollout-tools.jsonl").read_bytes()
    dev = [o["payload"] for o in lines_of(data)
           if o.get("type") == "response_item" and o["payload"].get("role") == "developer"]
    assert len(dev) == 4
    # (its usage says the prompt holds 82k tokens the log does not: the window is above them)
    history = compact(data, tmp_path, window=120000, strategy="threshold")
    assert developer(history) == dev


LOG_058 = DATA / "codex-session-view-lmstudio-0.58.0.jsonl"
#: the context block a Codex 0.87 or later writes when it resumes a rollout (its permissions instructions)
RESUMED_BY_NEWER = [
    {"type": "message", "role": "developer",
     "content": [{"type": "input_text", "text": "<permissions instructions>p</permissions instructions>"}]},
    {"type": "message", "role": "user",
     "content": [{"type": "input_text", "text": "<environment_context><cwd>/w</cwd></environment_context>"}]},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Go on."}]},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]},
]


def environments(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [i for i in items if text(i).lstrip().startswith("<environment_context>")]


def test_a_users_developer_message_after_the_context_is_kept(tmp_path: Path) -> None:
    # the 0.58 log (its environment first), with a developer message given mid-session, after a turn
    lines = lines_of(LOG_058.read_bytes())
    at = next(k for k, o in enumerate(lines) if o["type"] == "turn_context" and k > 20)
    rule = {"type": "message", "role": "developer",
            "content": [{"type": "input_text", "text": "From now on, answer in French."}]}
    lines.insert(at, {"timestamp": lines[at]["timestamp"], "type": "response_item", "payload": rule})
    data = b"".join(orjson.dumps(o) + b"\n" for o in lines)
    history = compact(data, tmp_path, window=8000, **MASK)
    assert developer(history) == [rule]
    # (and it does not say a newer Codex continued the rollout: the environment stays, as for 0.58's own)
    assert len(environments(history)) == 1


@pytest.mark.parametrize(("name", "window", "options"), [
    ("agtrace-codex-session.jsonl", 3000, MASK),  # (one turn: nothing a threshold compaction summarizes)
    ("codex-session-view-lmstudio-0.58.0.jsonl", 8000, MASK),
    ("codex-session-view-lmstudio-0.58.0.jsonl", 8000, {"strategy": "threshold"}),
], ids=["0.66-mask", "0.58-mask", "0.58-threshold"])
def test_an_older_codexs_context_stays(name: str, window: int, options: dict[str, Any],
                                       tmp_path: Path) -> None:
    # real rollouts of Codex 0.66 and 0.58: a client before 0.87 does not send its context again after
    # resuming (tests/clients), so the environment that opened the session stays in the history, once: where
    # it was (a masking keeps every line), or before the summary that replaced its turn
    data = (DATA / name).read_bytes()
    env = environments([o["payload"] for o in lines_of(data) if o.get("type") == "response_item"])
    assert len(env) == 1
    history = compact(data, tmp_path, window=window, **options)
    assert environments(history) == env
    if options is not MASK:
        at = next(k for k, i in enumerate(history) if "ctxcompact summary" in text(i))
        assert history[at - 1] == env[0]


def test_an_older_codexs_context_kept_after_the_summary_is_not_repeated(tmp_path: Path) -> None:
    # a 0.80 session whose last turn opened with a new environment (the user changed directory): a sliding
    # window keeps that turn after the compacted line, its environment with it, not before the summary too
    stamp = lines_of(LOG_058.read_bytes())[-1]["timestamp"]
    data = LOG_058.read_bytes().replace(b'"cli_version":"0.58.0"', b'"cli_version":"0.80.0"', 1) + b"".join(
        orjson.dumps({"timestamp": stamp, "type": "response_item", "payload": p}) + b"\n"
        for p in RESUMED_BY_NEWER[1:])
    buf = io.BytesIO()
    options = Options(state_path=tmp_path / "s.json", window=40000, strategy="sliding-window",
                      invocation_threshold=10)
    assert api.run(data, options, output=buf, warn=lambda m: None).compacted
    added = lines_of(buf.getvalue()[len(data):])
    [history] = [o["payload"]["replacement_history"] for o in added if o["type"] == "compacted"]
    kept = [o["payload"] for o in added if o["type"] == "response_item"]
    assert RESUMED_BY_NEWER[1] in kept and RESUMED_BY_NEWER[1] not in history
    assert len(environments(history)) == 1  # the session's first, where the window kept it


def test_an_older_codex_gets_the_latest_context_of_each_kind(tmp_path: Path) -> None:
    # a 0.80 session: AGENTS.md and an environment at its start, a second environment when the user changed
    # directory; a threshold compaction keeps the instructions and the newer environment, each once
    lines = lines_of(LOG_058.read_bytes())
    lines[0]["payload"]["cli_version"] = "0.80.0"
    agents = message("user", "# AGENTS.md instructions for /w\n\n<INSTRUCTIONS>never push</INSTRUCTIONS>")
    moved = message("user", "<environment_context>\n  <cwd>/elsewhere</cwd>\n</environment_context>")
    at = next(k for k, o in enumerate(lines) if o["type"] == "turn_context" and k > 20)
    stamp = lines[at]["timestamp"]
    lines.insert(1, {"timestamp": stamp, "type": "response_item", "payload": agents})
    lines.insert(at + 1, {"timestamp": stamp, "type": "response_item", "payload": moved})
    data = b"".join(orjson.dumps(o) + b"\n" for o in lines)
    history = compact(data, tmp_path, window=8000, strategy="threshold")
    context = [i for i in history if text(i).lstrip().startswith(("<environment_context>", "# AGENTS.md"))]
    assert context == [agents, moved]


@pytest.mark.parametrize("options", [{"strategy": "threshold"}, MASK], ids=["threshold", "mask"])
def test_a_rollout_a_newer_codex_continued_leaves_the_context_out(options: dict[str, Any],
                                                                 tmp_path: Path) -> None:
    # the 0.58 rollout resumed by a newer Codex (as tests/clients does with 0.169): the block it wrote holds a
    # developer message, which no Codex before 0.87 writes; both blocks are left out, the old one too
    stamp = lines_of(LOG_058.read_bytes())[-1]["timestamp"]
    data = LOG_058.read_bytes() + b"".join(
        orjson.dumps({"timestamp": stamp, "type": "response_item", "payload": p}) + b"\n"
        for p in RESUMED_BY_NEWER)
    history = compact(data, tmp_path, window=8000, **options)
    assert not environments(history) and not developer(history)
    assert [i for i in history if text(i) == "Go on."]


def meta(version: str | None) -> bytes:
    payload = {"id": "s", "timestamp": "2026-01-01T00:00:00Z"}
    if version is not None:
        payload["cli_version"] = version
    return orjson.dumps({"timestamp": "2026-01-01T00:00:00Z", "type": "session_meta", "payload": payload})


@pytest.mark.parametrize(("version", "resends"), [
    ("0.58.0", False), ("0.66.0", False), ("0.80.0", False), ("0.87.0", True), ("0.104.0-alpha.1", True),
    ("0.169.0", True), ("1.2.0", True), (None, False), ("dev", False),
])
def test_the_client_is_told_by_its_version(version: str | None, resends: bool) -> None:
    seen = FORMAT.compaction_seen()
    env = line(KINDS["env"])
    for raw in (meta(version), env, line(KINDS["user"])):
        seen.add(orjson.loads(raw), raw)
    assert seen.resends() is resends and seen.resent(env) is resends


def test_the_newest_session_meta_tells() -> None:
    # (a rollout with a second session_meta, as a fork's or a resumed session's may hold)
    seen = FORMAT.compaction_seen()
    for raw in (meta("0.169.0"), meta("0.66.0")):
        seen.add(orjson.loads(raw), raw)
    assert seen.resends()


def line(payload: dict[str, Any]) -> bytes:
    return orjson.dumps({"timestamp": "2026-01-01T00:00:00Z", "type": "response_item", "payload": payload})


def message(role: str, words: str) -> dict[str, Any]:
    return {"type": "message", "role": role, "content": [{"type": "input_text", "text": words}]}


KINDS = {
    "dev": message("developer", "<permissions instructions>p</permissions instructions>"),
    "env": message("user", "<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"),
    "tools": {"type": "additional_tools", "role": "developer", "tools": []},
    "agents": message("user", "# AGENTS.md instructions for /w\n\n<INSTRUCTIONS>x</INSTRUCTIONS>"),
    "user": message("user", "do the thing"),
    "assistant": message("assistant", "done"),
    "call": {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c"},
}
CONTEXT = {"dev", "env", "tools", "agents"}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(sorted(KINDS)), max_size=14))
def test_resent_is_a_block_of_context_items_that_holds_an_environment_or_tools(kinds: list[str]) -> None:
    seen = FORMAT.compaction_seen()
    started = meta("0.169.0")  # (a client that sends it again: test_the_client_is_told_by_its_version)
    seen.add(orjson.loads(started), started)
    raws = []
    for n, kind in enumerate(kinds):
        raw = line({**KINDS[kind], "id": f"i{n}"})  # each line its own
        raws.append(raw)
        seen.add(orjson.loads(raw), raw)
    # the expected blocks: runs of context items; resent when the run holds an environment or the tools
    expected = [False] * len(kinds)
    start = 0
    for end in range(len(kinds) + 1):
        if end == len(kinds) or kinds[end] not in CONTEXT:
            if {"env", "tools"} & set(kinds[start:end]):
                expected[start:end] = [True] * (end - start)
            start = end + 1
    assert [seen.resent(r) for r in raws] == expected


def test_the_streamed_and_the_held_route_leave_out_the_same(tmp_path: Path) -> None:
    # the file is compacted without holding it (compaction_stream feeds Seen line by line), the bytes held
    path = tmp_path / "rollout.jsonl"
    path.write_bytes((DATA / "agentlogs-codex-crud.jsonl").read_bytes())
    outs = []
    for n, source in enumerate((path, path.read_bytes())):
        buf = io.BytesIO()
        res = api.run(source, Options(state_path=tmp_path / f"{n}.json", window=8000, strategy="threshold"),
                      output=buf, warn=lambda m: None)
        outs.append((res.streamed is not None, buf.getvalue()))
    assert [streamed for streamed, _ in outs] == [True, False]
    assert outs[0][1] == outs[1][1]
    history = orjson.loads(outs[0][1].splitlines()[-2])["payload"]["replacement_history"]
    assert history and not developer(history)

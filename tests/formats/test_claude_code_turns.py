"""Issue 14.6a: one API message written over several Claude Code lines (same ``message.id``) is one assistant
turn, also when a block comes after the result of its own tool_use; Claude Code out still writes the log as
it was. Real logs of the corpus and a minimal synthetic log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from ctxcompact.api import clean_file
from ctxcompact.convert import convert
from ctxcompact.formats import read_transcript
from ctxcompact.formats.jsonl import write_transcript

DATA = Path(__file__).resolve().parent.parent / "data" / "claude-code"
# real logs where a later line of one message.id follows the tool result of its earlier tool_use line
SPLIT = [DATA / "spotter-tool-heavy.jsonl", DATA / "spotter-subagent-command.jsonl"]


def out_messages(data: bytes | Path, fmt: str) -> list[dict[str, Any]]:
    transcript = read_transcript(data, "claude-code").transcript
    lines = b"".join(write_transcript(convert(transcript, fmt)))
    return [orjson.loads(x) for x in lines.splitlines() if x.strip()]


def block_key(b: dict[str, Any]) -> str | None:
    if b.get("type") == "tool_use":
        return "tool_use:" + b["id"]
    if b.get("type") == "text":
        return "text:" + b["text"]
    if b.get("type") in ("thinking", "redacted_thinking"):
        return "thinking:" + str(b.get("signature") or b.get("data"))
    return None


@pytest.mark.parametrize("path", SPLIT, ids=lambda p: p.name)
def test_one_message_id_is_one_turn_real_log(path: Path) -> None:
    records = read_transcript(path).transcript.records
    by_id: dict[str, set[str]] = {}
    for rec in records:
        if rec.message is not None and rec.message.role.value == "assistant" and "message_id" in rec.meta:
            for b in rec.data["message"]["content"]:
                key = block_key(b)
                if key:
                    by_id.setdefault(rec.meta["message_id"], set()).add(key)
    split = [mid for mid, keys in by_id.items() if len(keys) > 1]
    assert split  # the log has messages written over several lines
    out = out_messages(path, "anthropic")
    where: dict[str, int] = {}
    for i, m in enumerate(out):
        if m["role"] == "assistant" and isinstance(m["content"], list):
            for b in m["content"]:
                key = block_key(b)
                if key:
                    where[key] = i
    for mid in split:
        assert len({where[k] for k in by_id[mid]}) == 1, mid  # every block of the message in one turn


BASE = {"sessionId": "s", "userType": "external", "cwd": "/w", "version": "2.1.0", "isSidechain": False}


def line(uuid: str, parent: str | None, kind: str, content: Any, mid: str | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": kind, "content": content}
    extra: dict[str, Any] = {}
    if mid:
        msg.update(id=mid, usage={"input_tokens": 10, "output_tokens": 5})
        extra["requestId"] = "req-" + mid
    return {**BASE, "uuid": uuid, "parentUuid": parent, "type": kind, "message": msg, **extra}


def split_log(after: dict[str, Any]) -> bytes:
    lines = [
        line("u1", None, "user", "list the files"),
        line("a1", "u1", "assistant", [{"type": "thinking", "thinking": "list", "signature": "S1"}], "m1"),
        line("a2", "a1", "assistant", [{"type": "tool_use", "id": "t1", "name": "Bash",
                                        "input": {"command": "ls"}}], "m1"),
        line("r1", "a2", "user", [{"type": "tool_result", "tool_use_id": "t1", "content": "a.py"}]),
        line("a3", "r1", "assistant", [after], "m1"),  # a block of m1 after its tool_use's result
        line("a4", "a3", "assistant", [{"type": "text", "text": "There is a.py."}], "m2"),
    ]
    return b"\n".join(orjson.dumps(x) for x in lines) + b"\n"


AFTER = [
    {"type": "text", "text": "Listing now."},
    {"type": "thinking", "thinking": "more", "signature": "S2"},
    {"type": "redacted_thinking", "data": "ENCRYPTED"},
]


@pytest.mark.parametrize("after", AFTER, ids=lambda b: b["type"])
@pytest.mark.parametrize("fmt", ["anthropic", "openai"])
def test_block_after_tool_use_stays_in_its_turn(after: dict[str, Any], fmt: str) -> None:
    out = out_messages(split_log(after), fmt)
    roles = [m["role"] for m in out]
    if fmt == "anthropic":
        assert roles == ["user", "assistant", "user", "assistant"]
        first = [block_key(b) for b in out[1]["content"]]
        assert block_key(after) in first and "tool_use:t1" in first
        assert out[3]["content"] == [{"type": "text", "text": "There is a.py."}]
    else:  # OpenAI: the text joins the call's message; thinking has no place there
        assert roles == ["user", "assistant", "tool", "assistant"]
        assert out[1]["tool_calls"][0]["id"] == "t1"
        assert "There is a.py." in str(out[3]["content"]) and "Listing now." not in str(out[3]["content"])
        if after["type"] == "text":
            assert "Listing now." in str(out[1]["content"])


def test_claude_code_out_unchanged_by_turns(tmp_path: Path) -> None:
    data = split_log(AFTER[0])
    path = tmp_path / "s.jsonl"
    path.write_bytes(data)
    assert b"".join(clean_file(path).lines()) == data  # Claude Code out: the log as it was, byte for byte
    for real in SPLIT:
        assert b"".join(clean_file(real).lines()) == real.read_bytes()

"""``--to codex`` / ``--to claude-code`` from another format writes an agent's own log, which the agent
resumes: its next model turn answers a trailing tool result
(docs/guides/claude-code-codex.md#what-ctxcompact-writes-into-a-clients-log), so cleaning adds no
``Understood.`` there, as for a Codex or Claude Code input. A format the caller sends itself (``--to
anthropic``) still gets it: the Messages API wants the assistant turn."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from ctxcompact import api
from ctxcompact.formats import read_transcript
from ctxcompact.model import Origin, Role

DATA = Path(__file__).resolve().parent.parent / "data"


def _session(tail_text: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "Run the tests. " + "x" * 200},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "bash", "arguments": '{"cmd": "pytest"}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": tail_text}]


def _write(tmp_path: Path, records: list[dict[str, Any]]) -> Path:
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


def _replies(out: Path, fmt: str) -> list[str]:
    recs = read_transcript(out.open("rb"), fmt).transcript.records
    return [r.message.text() for r in recs if r.message is not None and r.message.role is Role.ASSISTANT
            and r.message.text().strip()]


@pytest.mark.parametrize("to", ["codex", "claude-code"])
@pytest.mark.parametrize("compact", [False, True], ids=["passed-through", "compacted"])
def test_no_understood_in_an_agent_log_written_from_another_format(tmp_path: Path, to: str,
                                                                   compact: bool) -> None:
    path = _write(tmp_path, _session("12 passed " + "y" * (40_000 if compact else 10)))
    out = tmp_path / "out.jsonl"
    opts = api.Options(to=to, use_state=False, window=4_000 if compact else 200_000)
    res = api.run(path, opts, output=out, warn=lambda _m: None)
    assert res.compacted is compact
    assert "Understood." not in out.read_text()
    assert not [r for r in res.transcript.records if r.origin is Origin.SYNTHETIC]
    # the result is still the last thing the model reads: it answers it
    recs = [r for r in read_transcript(out.open("rb"), to).transcript.records if r.message is not None]
    assert recs[-1].message is not None and recs[-1].message.tool_results()


def test_a_real_openai_log_cut_at_a_result_to_codex(tmp_path: Path) -> None:
    lines = (DATA / "openai" / "agent_session.jsonl").read_bytes().splitlines()
    last = max(i for i, ln in enumerate(lines) if json.loads(ln).get("role") == "tool")
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"\n".join(lines[: last + 1]) + b"\n")
    out = tmp_path / "out.jsonl"
    api.run(path, api.Options(to="codex", use_state=False), output=out, warn=lambda _m: None)
    assert "Understood." not in out.read_text()


def test_the_messages_api_still_gets_its_closing_reply(tmp_path: Path) -> None:
    path = _write(tmp_path, _session("12 passed"))
    out = tmp_path / "out.jsonl"
    api.run(path, api.Options(to="anthropic", use_state=False), output=out, warn=lambda _m: None)
    assert _replies(out, "anthropic")[-1] == "Understood."

"""Every kind of earlier summary (docs/concepts/handoff.md#earlier-summaries), recognised and carried into the
next summary, each on a minimal synthetic case (real logs of each kind that has one:
tests/facts/test_handoff.py and below). An encrypted one is kept as it is wherever it sits, also inside a
Codex ``replacement_history`` (it used to be dropped there)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import orjson
import pytest

from ctxcompact import api
from ctxcompact.facts.earlier import earlier_summaries, opaque_records
from ctxcompact.formats import read_transcript
from ctxcompact.model import Record

DATA = Path(__file__).resolve().parents[1] / "data"
PAD = "w" * 20_000  # worth compacting


def _jsonl(objs: list[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(o) + b"\n" for o in objs)


def _records(data: bytes, fmt: str = "auto") -> list[Record]:
    return read_transcript(io.BytesIO(data), fmt).transcript.records


def _compact(data: bytes, **opts: Any) -> api.RunResult:
    res = api.run(data, api.Options(window=400_000, threshold="200", **opts), dry_run=True,
                  warn=lambda _m: None)
    assert res.compacted and res.summary is not None
    return res


def _earlier_part(res: api.RunResult) -> str:
    assert res.summary is not None
    _, sep, rest = res.summary.text.partition("## Earlier summary\n")
    assert sep, res.summary.text
    return rest.split("\n## ", 1)[0]


def _cc(kind: str, uuid: str, parent: str | None, content: Any, **extra: Any) -> dict[str, Any]:
    return {"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": "s", "isSidechain": False,
            "timestamp": "2026-01-01T00:00:00.000Z", "message": {"role": kind, "content": content}, **extra}


def _codex(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": "2026-01-01T00:00:00.000Z", "type": kind, "payload": payload}


def _codex_session(compacted: dict[str, Any]) -> bytes:
    def msg(role: str, text: str) -> dict[str, Any]:
        part = "output_text" if role == "assistant" else "input_text"
        content = [{"type": part, "text": text}]
        return _codex("response_item", {"type": "message", "role": role, "content": content})

    return _jsonl([
        _codex("session_meta", {"id": "x", "instructions": "You are Codex."}),
        msg("user", "first request"), msg("assistant", "first answer " + PAD),
        _codex("compacted", compacted),
        msg("user", "second request"),
        _codex("response_item", {"type": "function_call", "name": "shell", "arguments": '{"cmd":"ls"}',
                                 "call_id": "c1"}),
        _codex("response_item", {"type": "function_call_output", "call_id": "c1", "output": PAD}),
        msg("assistant", "Listed."),
    ])


def test_claude_code_compact_summary_synthetic() -> None:
    data = _jsonl([
        _cc("user", "u1", None, "EARLIER: the API listens on port 8443; never push to main.",
            isCompactSummary=True, isVisibleInTranscriptOnly=True),
        _cc("user", "u2", "u1", "now add the index"),
        _cc("assistant", "a1", "u2",
            [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]),
        _cc("user", "u3", "a1", [{"type": "tool_result", "tool_use_id": "t1", "content": PAD}]),
        _cc("assistant", "a2", "u3", [{"type": "text", "text": "Added."}]),
    ])
    assert [s.source for s in earlier_summaries(_records(data))] == ["claude-code"]
    assert "port 8443; never push to main." in _earlier_part(_compact(data))


@pytest.mark.parametrize("compacted", [
    {"message": "EARLIER: the parser lives in src/parse.rs."},  # the message only (older Codex)
    {"message": "", "replacement_history": [  # the history Codex rebuilds from
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "first request"}]},
        {"type": "message", "role": "user",
         "content": [{"type": "input_text", "text": "EARLIER: the parser lives in src/parse.rs."}]}]},
], ids=["message", "replacement_history"])
def test_codex_compacted_synthetic(compacted: dict[str, Any]) -> None:
    data = _codex_session(compacted)
    assert [s.source for s in earlier_summaries(_records(data))] == ["codex"]
    assert "the parser lives in src/parse.rs." in _earlier_part(_compact(data))


def _written_replacement(res: api.RunResult) -> list[dict[str, Any]]:
    lines = [r.data for r in res.transcript.records if isinstance(r.data, dict)]
    return [d for d in lines if d.get("type") == "compacted"][-1]["payload"]["replacement_history"]


def test_an_encrypted_summary_inside_a_replacement_history_is_kept_synthetic() -> None:
    blob = {"type": "compaction", "encrypted_content": "gAAAA-nested-blob"}
    data = _codex_session({"message": "", "replacement_history": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "EARLIER: use uv."}]},
        blob]})
    recs = _records(data)
    assert [s.source for s in earlier_summaries(recs)] == ["codex"]  # readable: carried in the summary
    assert [r.message.blocks[0].raw for r in opaque_records(recs)] == [blob]  # type: ignore[union-attr]
    res = _compact(data)
    assert "EARLIER: use uv." in _earlier_part(res)
    assert blob in _written_replacement(res)  # kept as it is, never dropped
    # and again at the next compaction of the log ctxcompact wrote
    written = b"".join(line + b"\n" for line in res.lines())
    grown = b"".join(line + b"\n" for line in _codex_session({"message": ""}).splitlines()[4:])
    again = _compact(written + grown)  # the session went on after ctxcompact's compacted line
    assert blob in _written_replacement(again)


def test_an_encrypted_summary_inside_a_real_replacement_history_is_kept() -> None:
    """The real localpush rollout: its compacted line's replacement_history ends with Codex's encrypted
    compaction item (13,412 characters, redacted)."""
    path = DATA / "codex" / "localpush-rollout-compacted-excerpt.jsonl"
    recs = _records(path.read_bytes())
    (nested,) = opaque_records(recs)
    blob = nested.message.blocks[0].raw  # type: ignore[union-attr]
    assert blob["type"] == "compaction"
    assert blob["encrypted_content"].startswith("[REDACTED_ENCRYPTED_CONTENT")
    res = _compact(path.read_bytes())
    assert blob in _written_replacement(res)
    assert "[REDACTED_TEXT len=7665 sha=49c85161]" in _earlier_part(res)  # the readable part carried
    ev = api.evaluate(str(path), api.Options(window=400_000, threshold="200"), calibration=False)
    got = ev["handoff"]["earlier_summaries"]
    assert (got["found"], got["carried"], got["opaque"]) == (2, 2, 1)


def test_no_earlier_summary_no_opaque_record() -> None:
    assert opaque_records([]) == [] and earlier_summaries([]) == []
    data = _codex_session({"message": ""})
    assert opaque_records(_records(data)) == []

"""ADK events stay events (issue 15 item 5; docs/reference/formats.md#how-each-is-read): a compacted ADK
session is written as the input's events followed by the compaction events ADK's LlmEventSummarizer writes."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers import jsonl

from ctxcompact import api
from ctxcompact.options import Options


def adk_session(turns: int = 10, snake: bool = False) -> list[dict[str, Any]]:
    inv, uid = ("invocation_id", "id") if snake else ("invocationId", "id")
    lines: list[dict[str, Any]] = []
    for t in range(turns):
        lines.append({"content": {"parts": [{"text": f"request {t}"}], "role": "user"}, inv: f"e-{t}",
                      "author": "user", "actions": {}, uid: f"u{t}", "timestamp": 1760000000.0 + t * 10})
        answer = {"parts": [{"text": "answer " + "z" * 3000}], "role": "model"}
        lines.append({"content": answer, inv: f"e-{t}", "author": "agent", "actions": {}, uid: f"a{t}",
                      "timestamp": 1760000001.0 + t * 10})
    return lines


def run(data: bytes, tmp_path: Path, **kw: Any) -> tuple[api.RunResult, bytes]:
    out = io.BytesIO()
    res = api.run(data, Options(state_path=tmp_path / "s.json", window=6000, **kw), output=out,
                  warn=lambda m: None)
    return res, out.getvalue()


@pytest.mark.parametrize("snake", [False, True])
@pytest.mark.parametrize("strategy", ["threshold", "sliding-window"])
def test_compacted_adk_session_is_events_with_compaction_actions(strategy: str, snake: bool,
                                                                   tmp_path: Path) -> None:
    lines = adk_session(snake=snake)
    data = jsonl(lines)
    res, out = run(data, tmp_path, strategy=strategy)
    assert res.compacted and res.output_format == "genai"
    assert out.startswith(data)  # every event as it was: author, invocation id, id, timestamp kept
    added = [orjson.loads(x) for x in out[len(data):].splitlines()]
    assert added
    start, end, inv, comp_key = (("start_timestamp", "end_timestamp", "invocation_id", "compacted_content")
                                 if snake else ("startTimestamp", "endTimestamp", "invocationId",
                                                "compactedContent"))
    stamps = [o["timestamp"] for o in lines]
    for ev in added:
        assert ev["author"] == "user" and ev[inv].startswith("e-") and ev["id"]
        assert ev["timestamp"] > max(stamps)
        comp = ev["actions"]["compaction"]
        assert comp[start] in stamps and comp[end] in stamps and comp[start] <= comp[end]
        assert comp[comp_key]["role"] == "model"
        assert "content" not in ev
    report = api.validate(out)
    assert report.format == "genai" and report.ok
    # read back, ADK's rule (events inside a compaction's range hidden) gives the compacted context
    back = api.load_transcript(out)
    active = [r for r in back.records if r.message is not None]
    assert len(active) < len(lines)
    assert all("compaction" in r.meta or r.meta["timestamp"] > max(o["actions"]["compaction"][end]
                                                                   for o in added) for r in active)


def test_bare_contents_stay_the_context(tmp_path: Path) -> None:
    lines = [{"role": "user" if i % 2 == 0 else "model", "parts": [{"text": f"m{i} " + "z" * 3000}]}
             for i in range(12)]
    res, out = run(jsonl(lines), tmp_path)
    assert res.compacted
    objs = [orjson.loads(x) for x in out.splitlines()]
    assert all("parts" in o and "actions" not in o for o in objs) and len(objs) < len(lines)

"""Codex rollouts out (issue 15 item 6; docs/reference/formats.md#how-each-is-read): a compacted rollout is
the input's lines, then a ``compacted`` line with ``replacement_history`` as Codex writes its own, then the
kept lines."""

from __future__ import annotations

import io
from pathlib import Path

import orjson
import pytest
from agent_logs import rollout
from helpers import jsonl

from ctxcompact import api
from ctxcompact.options import Options


@pytest.mark.parametrize("strategy", ["threshold", "sliding-window"])
def test_compacted_rollout_is_appended_as_codex_records_it(strategy: str, tmp_path: Path) -> None:
    lines = rollout()
    data = jsonl(lines)
    buf = io.BytesIO()
    res = api.run(data, Options(state_path=tmp_path / "s.json", window=8000, strategy=strategy,
                                invocation_threshold=3), output=buf, warn=lambda m: None)
    out = buf.getvalue()
    assert res.compacted and res.output_format == "codex"
    assert out.startswith(data)
    added = [orjson.loads(x) for x in out[len(data):].splitlines()]
    compacted = added[0]
    assert compacted["type"] == "compacted" and compacted["timestamp"] == lines[-1]["timestamp"]
    payload = compacted["payload"]
    assert payload["message"] and isinstance(payload["replacement_history"], list)
    assert all(item["type"] in ("message", "function_call", "function_call_output")
               for item in payload["replacement_history"])
    assert all(o["type"] == "response_item" for o in added[1:])  # the kept lines, as they were
    report = api.validate(out)
    assert report.format == "codex" and report.ok
    back = api.load_transcript(out)
    active = [r for r in back.records if r.message is not None and r.message.role.value != "system"]
    assert active[0].meta.get("compaction") and len(active) == 1 + len(added) - 1
    # the summary is read once, from replacement_history (Codex ignores message when it is present)
    texts = [c["text"] for item in payload["replacement_history"] if item["type"] == "message"
             for c in item["content"]]
    assert active[0].message is not None and active[0].message.text() == "\n\n".join(texts)

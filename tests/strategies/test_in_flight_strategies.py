"""The work in flight in every strategy (docs/concepts/handoff.md#the-work-in-flight): at each hook call
(``eval --replay`` calls ``run`` before every assistant turn, with a real state) where the session so far
ends inside a tool loop and a compaction happened, the next call sees the result the model asked for; an
in-flight result too large for the window is trimmed with a marker saying where the full text is, by every
strategy (one rule: ``strategies.tail``; mask and sliding-window used to exit 5), and stays trimmed on later
runs; eval counts such a call as trimmed, not as a missing result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from ctxcompact import api
from ctxcompact.evaluate.replay import replay
from ctxcompact.model import ToolResult

DATA = Path(__file__).resolve().parents[1] / "data"
STRATEGIES: dict[str, dict[str, Any]] = {
    "threshold": {},
    "mask": {"keep_results": 1, "min_savings": 0, "protect_tokens": 0},
    "sliding-window": {"invocation_threshold": 2},
}


def _call(cid: str, cmd: str) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": cid, "type": "function", "function": {"name": "bash", "arguments": json.dumps({"cmd": cmd})}}]}


def _loops(requests: int = 6, calls: int = 4, result_chars: int = 2_800) -> list[dict[str, Any]]:
    """A coding session: each request reads files in a tool loop, then answers."""
    out: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    for q in range(requests):
        out.append({"role": "user", "content": f"Request {q}: fix module m{q}. Never push to main."})
        for k in range(calls):
            cid = f"c{q}_{k}"
            out.append(_call(cid, f"cat m{q}/f{k}.py"))
            body = "def f(): pass  # ünïcode ✓\n" * (result_chars // 28)
            out.append({"role": "tool", "tool_call_id": cid, "content": f"RESULT-{cid}\n{body}"})
        out.append({"role": "assistant", "content": f"Fixed m{q}."})
    return out


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_the_in_flight_result_is_visible_at_every_hook_call(tmp_path: Path, strategy: str) -> None:
    path = _write(tmp_path / "s.jsonl", _loops())
    out = replay(path, api.Options(window=6_000, strategy=strategy, **STRATEGIES[strategy]))
    flights = [c["in_flight"] for c in out["curve"] if c["in_flight"] is not None]
    assert out["compactions"] >= 3 and len(flights) >= 3, out["curve"]
    assert all(flights), out["curve"]


def test_the_in_flight_result_on_a_real_log_threshold() -> None:
    """A real Claude Code session replayed at a window that compacts it inside its tool loops."""
    out = replay(DATA / "claude-code" / "spotter-subagent-command.jsonl", api.Options(window=36_000))
    flights = [c["in_flight"] for c in out["curve"] if c["in_flight"] is not None]
    assert len(flights) >= 5 and all(flights), out["curve"]


def _huge_tail(tmp_path: Path) -> Path:
    records = _loops(requests=2, calls=1)
    records.append({"role": "user", "content": "Now read the big log."})
    records.append(_call("big", "cat big.log"))
    records.append({"role": "tool", "tool_call_id": "big", "content": "line of output ✓\n" * 20_000})
    return _write(tmp_path / "big.jsonl", records)


def _result_text(res: api.RunResult, call_id: str) -> str:
    texts = [b.text() for r in res.transcript.records if r.message is not None for b in r.message.blocks
             if isinstance(b, ToolResult) and b.call_id == call_id]
    assert len(texts) == 1
    return texts[0]


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_every_strategy_trims_an_oversized_in_flight_result(tmp_path: Path, strategy: str) -> None:
    path = _huge_tail(tmp_path)
    opts = api.Options(window=32_000, strategy=strategy)
    res = api.run(path, opts, output=tmp_path / "out.jsonl", warn=lambda _m: None)
    assert res.exit_code == 0 and res.compacted and res.tokens_after <= 32_000, res.warnings
    text = _result_text(res, "big")
    assert text.startswith("line of output ✓\n") and len(text) < 340_000 // 4
    assert text.endswith(f"the full text is in {path} line {len(path.read_bytes().splitlines())}]")
    # the next run shows the same trimmed text (the state's masking) and has nothing more to do
    again = api.run(path, opts, dry_run=True, warn=lambda _m: None)
    assert not again.compacted and again.exit_code == 0
    assert _result_text(again, "big") == text


def test_sliding_window_leaves_an_in_flight_result_that_fits(tmp_path: Path) -> None:
    records = _loops(requests=3, calls=2)
    path = _write(tmp_path / "s.jsonl", records[:-1])  # ends on the last result
    res = api.run(path, api.Options(window=4_000, strategy="sliding-window", invocation_threshold=1),
                  dry_run=True, warn=lambda _m: None)
    assert res.compacted
    assert _result_text(res, "c2_1") == records[-2]["content"]


def test_eval_tells_a_trimmed_result_from_a_missing_one(tmp_path: Path) -> None:
    path = _huge_tail(tmp_path)
    r = api.evaluate(str(path), api.Options(window=32_000, use_state=False), calibration=False)
    flight = r["handoff"]["in_flight"]
    assert flight["open"] and flight["present"] is False
    assert flight["trimmed"] == 1 and flight["fits"] is False
    small = _write(tmp_path / "small.jsonl", _loops(requests=3, calls=2)[:-1])
    r = api.evaluate(str(small), api.Options(window=6_000, use_state=False), calibration=False)
    flight = r["handoff"]["in_flight"]
    assert r["compacted"] and flight["present"] is True and flight["trimmed"] == 0 and flight["fits"] is True

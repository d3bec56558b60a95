"""The native layout of Claude Code and Codex outputs (issue 24 items 1-5), without the clients: the
suite in tests/clients proves the same with Claude Code 2.1.328 and Codex 0.169.0 themselves."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import orjson
import pytest
from agent_logs import long_session, rollout
from helpers import jsonl

from ctxcompact import api
from ctxcompact.formats.claude_code_out import COMPACT_SUMMARY_OPENING, copy_message_id
from ctxcompact.options import Options

DATA = Path(__file__).parent.parent / "data"

#: the shape of the lines Claude Code 2.1.328 writes beside each request (issue 24 item 1): a system-role
#: message that is not part of the conversation
BLOB = {
    "type": "api-request-blob",
    "sessionId": "55604662-cf2a-4331-851a-ec234028f8ca",
    "hash": "ab" * 32,
    "message": {"role": "system", "content": [{"type": "text", "text": "# Environment\nYou have " * 40}]},
}
UNKNOWN = {
    "type": "some-future-line",
    "sessionId": "55604662-cf2a-4331-851a-ec234028f8ca",
    "message": {"role": "narrator", "content": 17},
}


def run(data: bytes, tmp_path: Path, **kw: Any) -> tuple[api.RunResult, bytes]:
    buf = io.BytesIO()
    res = api.run(data, Options(state_path=tmp_path / "s.json", **kw), output=buf, warn=lambda m: None)
    return res, buf.getvalue()


# -- item 1 --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("extra", [BLOB, UNKNOWN], ids=["api-request-blob", "unknown-type"])
def test_lines_outside_the_conversation_pass_through_unchecked_and_uncounted(
    extra: dict[str, Any], tmp_path: Path
) -> None:
    real = (DATA / "claude-code" / "spotter-short.jsonl").read_bytes()
    lines = real.splitlines(keepends=True)
    data = b"".join([*lines[:6], orjson.dumps(extra) + b"\n", *lines[6:]])
    report = api.validate(data)
    assert report.format == "claude-code" and report.ok, [str(p) for p in report.errors()]
    assert api.estimate(data).heuristic == api.estimate(real).heuristic
    res, out = run(data, tmp_path, window=200000)
    assert not res.compacted and out == data  # written back byte for byte


def test_a_conversation_line_is_still_held_to_the_schema() -> None:
    line = {"type": "user", "uuid": "u", "sessionId": "s", "message": {"role": "system", "content": "x"}}
    report = api.validate(jsonl([line]), "claude-code")
    assert not report.ok and "'system'" in str(report.errors()[0])


# -- item 2 --------------------------------------------------------------------------------------------------


def test_copy_ids_are_fresh_stable_and_shaped_like_the_providers() -> None:
    a, b = copy_message_id("msg_01MKH1ccEGrZGNPvu8pYiiQa"), copy_message_id("msg_01MKH1ccEGrZGNPvu8pYiiQb")
    assert a == copy_message_id("msg_01MKH1ccEGrZGNPvu8pYiiQa") and a != b
    assert a.startswith("msg_") and len(a) == 26 and a[4:].isalnum()
    assert copy_message_id(a) != a


def test_sliding_window_copies_in_claude_code_never_share_an_id_with_their_originals(tmp_path: Path) -> None:
    lines = long_session()
    for i, o in enumerate(lines):  # a response split over two lines, as Claude Code writes it
        if o["type"] == "assistant":
            o["message"]["usage"] = {"input_tokens": 100 + i, "output_tokens": 5}
    f10 = lines[-6]  # turn 10's answer, then a second line of the same response, as Claude Code splits it
    assert f10["uuid"] == "f10" and lines[-5]["parentUuid"] == "f10"
    split = {
        **f10,
        "uuid": "f10b",
        "parentUuid": "f10",
        "message": {**f10["message"], "content": [{"type": "text", "text": "and one more"}]},
    }
    lines[-5]["parentUuid"] = "f10b"
    lines.insert(len(lines) - 5, split)
    data = jsonl(lines)
    res, out = run(data, tmp_path, window=8000, strategy="sliding-window", invocation_threshold=3)
    assert res.compacted and out.startswith(data)
    added = [orjson.loads(x) for x in out[len(data) :].splitlines()]
    old_ids = {o["message"]["id"] for o in lines if o["type"] == "assistant"}
    copies = [o for o in added if o.get("type") == "assistant"]
    assert copies and not {o["message"]["id"] for o in copies} & old_ids
    assert all(o["message"]["usage"]["input_tokens"] == 0 for o in copies)
    pair = [o for o in copies if o["message"]["id"] == copy_message_id("m10b")]
    assert len(pair) == 2  # the two lines of one response keep one (new) id
    summary = next(o for o in added if o.get("isCompactSummary"))
    text = summary["message"]["content"]
    assert text.startswith(COMPACT_SUMMARY_OPENING) and "Do not ask the user to repeat anything." in text


# -- item 4 --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["mask", "sliding-window", "threshold"])
def test_a_codex_rollout_ending_on_a_result_gets_no_invented_reply(strategy: str, tmp_path: Path) -> None:
    lines = rollout()[:-1]  # ends on the last function_call_output: the model has not answered yet
    data = jsonl(lines)
    res, out = run(
        data,
        tmp_path,
        window=8000,
        strategy=strategy,
        invocation_threshold=3,
        keep_results=1,
        protect_tokens=0,
        min_savings=0,
    )
    assert res.compacted and out.startswith(data)
    texts = {
        c["text"]
        for o in (orjson.loads(x) for x in out.splitlines())
        for item in (
            [o["payload"]]
            if o["type"] == "response_item"
            else o["payload"].get("replacement_history", [])
            if o["type"] == "compacted"
            else []
        )
        if item.get("type") == "message" and item.get("role") == "assistant"
        for c in item["content"]
    }
    assert texts <= {f"done {t}" for t in range(10)}
    assert not [r for r in res.repairs if r.kind == "appended_reply"]


def test_a_claude_code_log_ending_on_a_result_gets_no_invented_reply(tmp_path: Path) -> None:
    lines = long_session()[:-1]
    assert lines[-1]["type"] == "user" and lines[-1]["message"]["content"][0]["type"] == "tool_result"
    res, out = run(jsonl(lines), tmp_path, window=8000)
    assert res.compacted
    added = [o for o in (orjson.loads(x) for x in out.splitlines()) if o.get("type") == "assistant"]
    assert not [o for o in added if "Understood." in orjson.dumps(o["message"]).decode()]


# -- items 3 and 5 -------------------------------------------------------------------------------------------


def counted(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rollout()`` with a token_count after each answer and a usage record, as Codex 0.169 writes."""
    out: list[dict[str, Any]] = []
    total = 0
    for o in lines:
        out.append(o)
        if o["type"] == "response_item" and o["payload"].get("role") == "assistant":
            total += 5000
            usage = {
                "input_tokens": 5000,
                "cached_input_tokens": 0,
                "output_tokens": 10,
                "reasoning_output_tokens": 0,
                "total_tokens": 5010,
            }
            out.append({**o, "type": "token_usage_record", "payload": {"usage": usage, "response_id": "r"}})
            out.append(
                {
                    **o,
                    "type": "event_msg",
                    "payload": {
                        "type": "token_count",
                        "info": {
                            "total_token_usage": {**usage, "input_tokens": total, "total_tokens": total + 10},
                            "last_token_usage": usage,
                            "model_context_window": 258400,
                        },
                        "rate_limits": None,
                    },
                }
            )
    env = {
        "timestamp": lines[0]["timestamp"],
        "type": "response_item",
        "payload": {
            "type": "message",
            "role": "user",
            "content": [
                {
                    "type": "input_text",
                    "text": "<environment_context>\n  <cwd>/w</cwd>\n</environment_context>",
                }
            ],
        },
    }
    return [out[0], env, *out[1:]]


@pytest.mark.parametrize("version", ["0.66.0", "0.169.0"])
@pytest.mark.parametrize("strategy", ["threshold", "mask"])
def test_codex_compaction_carries_its_meter_and_keeps_the_billed_totals(
    strategy: str, version: str, tmp_path: Path
) -> None:
    lines = counted(rollout())
    lines[0]["payload"]["cli_version"] = version
    data = jsonl(lines)
    res, out = run(
        data, tmp_path, window=8000, strategy=strategy, keep_results=1, protect_tokens=0, min_savings=0
    )
    assert res.compacted and out.startswith(data)
    added = [orjson.loads(x) for x in out[len(data) :].splitlines()]
    compacted, meter = added[0], added[-1]
    assert compacted["type"] == "compacted"
    last_record = next(o for o in reversed(lines) if o["type"] == "token_usage_record")
    assert compacted["payload"]["latest_token_usage_record"] == last_record["payload"]
    last_count = next(o for o in reversed(lines) if o["type"] == "event_msg")["payload"]["info"]
    info = meter["payload"]["info"]
    assert meter["type"] == "event_msg" and meter["payload"]["type"] == "token_count"
    assert info["total_token_usage"] == last_count["total_token_usage"]  # what was billed, kept
    assert info["last_token_usage"]["total_tokens"] == res.tokens_after < res.tokens_before
    assert info["last_token_usage"]["input_tokens"] == 0
    assert [o for o in added if o["type"] == "event_msg"] == [meter]  # no stale count after it
    history = compacted["payload"]["replacement_history"]
    users = [c["text"] for i in history if i.get("role") == "user" for c in i["content"]]
    if strategy == "threshold":
        # Codex's own layout: the request as its own message before the summary, then the latest
        # environment for a Codex before 0.87, which does not send it afresh after resuming; not for a later
        # one, which does (formats/codex_seen.py Seen.resends)
        assert compacted["payload"]["message"]
        at = next(k for k, t in enumerate(users) if "ctxcompact summary" in t)
        env = lines[1]["payload"]["content"][0]["text"]
        assert users[:at] == (["request 9", env] if version == "0.66.0" else ["request 9"])
        assert [t for t in users if t.startswith("<environment_context>")] == [env][: version == "0.66.0"]
    else:
        assert compacted["payload"]["message"] == ""  # as Codex's remote compaction writes it
        outputs = [i["output"] for i in history if i["type"] == "function_call_output"]
        assert len(outputs) == 10 and sum(o.startswith("[tool result cleared: ") for o in outputs) >= 8
        # read back, the masked history counts: its calls and outputs, not only its messages
        kept = sum(len(i.get("output", "")) + len(i.get("arguments", "")) for i in history)
        assert api.estimate(out).heuristic >= kept // 4
    report = api.validate(out)
    assert report.ok and report.format == "codex"


def test_verbose_validate_names_the_lines_it_passed_through(tmp_path: Path) -> None:
    from helpers import ctxcompact

    real = (DATA / "claude-code" / "spotter-short.jsonl").read_bytes()
    path = tmp_path / "s.jsonl"
    path.write_bytes(
        real + orjson.dumps(UNKNOWN) + b"\n" + orjson.dumps(BLOB) + b"\n" + orjson.dumps(UNKNOWN) + b"\n"
    )
    done = ctxcompact("validate", "--verbose", str(path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().splitlines()[-1].endswith("does not know): some-future-line ×2")
    quiet = ctxcompact("validate", str(path))
    assert b"passed through" not in quiet.stdout
    assert api.validate(path).to_json()["passed_through"] == {"some-future-line": 2}
    assert "passed_through" not in api.validate(real).to_json()

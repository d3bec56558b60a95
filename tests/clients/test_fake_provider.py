"""The fake provider's own rule, without the clients (so it runs in the main suite): a request whose tool
calls and results do not pair is what both real APIs refuse, and the fake refuses it with a 400."""

from __future__ import annotations

import urllib.error
import urllib.request
from typing import Any

import orjson
import pytest

from tests.clients.fake_provider import FakeProvider, orphans


def _use(i: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": i, "name": "Bash", "input": {}}


def _result(i: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": i, "content": "ok"}


GO = [{"type": "text", "text": "go"}]


def _messages(*contents: list[dict[str, Any]]) -> dict[str, Any]:
    roles = ["user", "assistant"]
    return {"messages": [{"role": roles[n % 2], "content": c} for n, c in enumerate(contents)]}


def test_paired_messages_pass() -> None:
    body = _messages(GO, [_use("a"), _use("b")], [_result("a"), _result("b")])
    assert orphans("/v1/messages", body) == []


@pytest.mark.parametrize(
    ("contents", "found"),
    [
        # the call's result is missing, or one message too late
        ([GO, [_use("a")], GO], "tool_use a, no tool_result"),
        ([GO, [_use("a")], GO, [_result("a")]], "tool_result for a"),
        # a result no call before it asked for
        ([[_result("z")]], "tool_result for z"),
        ([GO, [_use("a")], [_result("a"), _result("b")]], "tool_result for b"),
    ],
)
def test_orphan_messages_are_found(contents: list[list[dict[str, Any]]], found: str) -> None:
    got = orphans("/v1/messages", _messages(*contents))
    assert got and found in " ".join(got), got


def test_responses_orphans_are_found() -> None:
    call = {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}"}
    out = {"type": "function_call_output", "call_id": "c1", "output": "ok"}
    assert orphans("/v1/responses", {"input": [call, out]}) == []
    assert orphans("/v1/responses", {"input": [call]}) == ["no tool output found for function call c1"]
    first = orphans("/v1/responses", {"input": [out, call]})[0]
    assert first.startswith("input.0: function_call_output for c1")
    custom = {"type": "custom_tool_call_output", "call_id": "c2", "output": "ok"}
    assert orphans("/v1/responses", {"input": [call, out, custom]})


def test_the_fake_refuses_an_orphan_with_400() -> None:
    with FakeProvider() as fp:
        req = urllib.request.Request(
            fp.url + "/v1/messages",
            data=orjson.dumps({"model": "m", **_messages([_result("z")])}),
            headers={"content-type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=10)
        assert e.value.code == 400
        assert fp.rejected == ["messages.0: tool_result for z, no tool_use before it"]

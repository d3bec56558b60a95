"""Parallel calls written one per line (Claude Code, Codex) are one turn: their results, written after the
last call line, are already in place and cleaning must not move them."""

from __future__ import annotations

from ctxcompact.clean import clean
from ctxcompact.formats.base import Layout
from ctxcompact.model import Message, Record, Role, TextBlock, ToolCall, ToolResult, Transcript


def rec(i: int, role: Role, *blocks: object) -> Record:
    return Record(index=i, line=i + 1, raw=b"{}", data={}, message=Message(role=role, blocks=list(blocks)))


def transcript() -> Transcript:
    return Transcript("test", [
        rec(0, Role.USER, TextBlock("read both files")),
        rec(1, Role.ASSISTANT, ToolCall("a", "read", "{}")),
        rec(2, Role.ASSISTANT, ToolCall("b", "read", "{}")),
        rec(3, Role.USER, ToolResult("a", [TextBlock("A")])),
        rec(4, Role.USER, ToolResult("b", [TextBlock("B")])),
        rec(5, Role.ASSISTANT, TextBlock("done")),
    ])


def test_split_turn_results_stay_where_they_are() -> None:
    layout = Layout(results_per_message=True, result_role=Role.USER, alternate=False, split_turns=True)
    t = transcript()
    result = clean(t, layout)
    assert result.repairs == []
    assert all(a is b for a, b in zip(result.transcript.records, t.records, strict=True))


def test_without_split_turns_the_first_result_moves_up() -> None:
    layout = Layout(results_per_message=True, result_role=Role.USER, alternate=False)
    result = clean(transcript(), layout)
    assert {r.kind for r in result.repairs} == {"moved_result"}
    order = [r.message.blocks[0] for r in result.transcript.records if r.message]
    assert isinstance(order[2], ToolResult) and order[2].call_id == "a"


def test_latest_request_skips_lines_a_format_flags_as_injected() -> None:
    from ctxcompact.facts import latest_request

    typed = rec(0, Role.USER, TextBlock("please fix the flaky test"))
    injected = rec(1, Role.USER, TextBlock("cwd: /repo, shell: zsh"))
    injected.meta = {"injected": True}  # a record with facts has its own meta (model.NO_META is shared)
    assert latest_request([typed, injected]) == "please fix the flaky test"

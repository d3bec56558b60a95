"""Cleaning (docs/reference/cli.md#ctxcompact-clean-file): each repair in both layouts, idempotence and
invariants (hypothesis), golden files."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path
from typing import Any

import pytest
from helpers import check_golden
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxcompact.clean import (
    CONTINUES,
    MOVED_SYSTEM,
    NO_RESPONSE,
    REPAIR_KINDS,
    UNDERSTOOD,
    CleanResult,
    clean,
)
from ctxcompact.formats.base import Layout
from ctxcompact.model import (
    Block,
    ImageBlock,
    Message,
    Origin,
    Record,
    Role,
    TextBlock,
    ToolCall,
    ToolResult,
    Transcript,
)

OPENAI = Layout(results_per_message=True, result_role=Role.TOOL, alternate=False)
ANTHROPIC = Layout(results_per_message=False, result_role=Role.USER, alternate=True)
LAYOUTS = {"openai": OPENAI, "anthropic": ANTHROPIC}

S, U, A, T = Role.SYSTEM, Role.USER, Role.ASSISTANT, Role.TOOL


# -- building transcripts from model objects ----------------------------------------------------------------
def call(cid: str, name: str = "bash", args: str = "{}") -> ToolCall:
    return ToolCall(id=cid, name=name, arguments=args)


def res(cid: str, text: str = "out", **kw: Any) -> ToolResult:
    return ToolResult(call_id=cid, content=[TextBlock(text)], **kw)


def msg(role: Role, *blocks: Block | str) -> Message:
    bl: list[Block] = [TextBlock(b) if isinstance(b, str) else b for b in blocks]
    return Message(role=role, blocks=bl, source_role=role.value)


def build(*items: Message | None, fmt: str = "test") -> Transcript:
    """Records on lines 1..n; ``None`` is a line that carries no message (progress, metadata)."""
    recs = []
    for i, m in enumerate(items):
        data: Any = {"n": i} if m is None else {"role": m.role.value}
        recs.append(Record(index=i, line=i + 1, raw=f"line {i + 1}".encode(), data=data, message=m))
    return Transcript(format=fmt, records=recs)


def shape(t: Transcript) -> list[tuple[str, ...]]:
    """A readable picture of a transcript: role then one token per block."""
    out: list[tuple[str, ...]] = []
    for r in t.records:
        if r.message is None:
            out.append(("-",))
            continue
        toks: list[str] = [r.message.role.value]
        for b in r.message.blocks:
            if isinstance(b, ToolCall):
                toks.append(f"call:{b.id}")
            elif isinstance(b, ToolResult):
                toks.append(f"result:{b.call_id}={b.text()}")
            elif isinstance(b, TextBlock):
                toks.append(b.text)
            else:
                toks.append(type(b).__name__)
        out.append(tuple(toks))
    return out


def kinds(r: CleanResult) -> list[str]:
    return [x.kind for x in r.repairs]


def assert_unchanged(t: Transcript, layout: Layout) -> None:
    r = clean(t, layout)
    assert r.repairs == []
    assert len(r.transcript.records) == len(t.records)
    assert all(a is b for a, b in zip(r.transcript.records, t.records, strict=True))


# -- no repair ---------------------------------------------------------------------------------------------
def test_empty_transcript_is_unchanged() -> None:
    for layout in LAYOUTS.values():
        assert_unchanged(build(), layout)


def test_only_non_message_lines_are_unchanged() -> None:
    for layout in LAYOUTS.values():
        assert_unchanged(build(None, None), layout)


def test_valid_openai_conversation_is_returned_as_the_same_records() -> None:
    t = build(msg(S, "sys"), msg(U, "hi"), msg(A, "let me look", call("a"), call("b")),
              None, msg(T, res("a")), msg(T, res("b")), msg(A, "done"))
    assert_unchanged(t, OPENAI)


def test_valid_anthropic_conversation_is_returned_as_the_same_records() -> None:
    t = build(msg(S, "sys"), msg(U, "hi"), msg(A, call("a"), call("b")), None,
              msg(U, res("a"), res("b"), "and also this"), msg(A, "done"))
    assert_unchanged(t, ANTHROPIC)


def test_input_records_are_never_mutated() -> None:
    t = build(msg(U, "hi"), msg(A, call("a"), call("a")), msg(U, "x"), msg(T, res("a")), msg(T, res("zz")))
    before = [dataclasses.replace(r, message=dataclasses.replace(r.message, blocks=list(r.message.blocks))
                                  if r.message else None) for r in t.records]
    for layout in LAYOUTS.values():
        out = clean(t, layout)
        assert out.repairs
        assert t.records == before
        assert all(not r.dirty for r in t.records)


# -- 1. missing results ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["openai", "anthropic"])
def test_missing_result_gets_synthetic_result_right_after_the_call(name: str) -> None:
    layout = LAYOUTS[name]
    t = build(msg(U, "go"), msg(A, call("a", "grep")), msg(A, "ok"))
    r = clean(t, layout)
    assert kinds(r) == ["missing_result"]
    rep = r.repairs[0]
    assert (rep.line, rep.call_id) == (2, "a")
    made = r.transcript.records[2]
    assert made.origin == Origin.SYNTHETIC and made.dirty and made.raw is None
    assert made.message is not None and made.message.role == layout.result_role
    (block,) = made.message.blocks
    assert isinstance(block, ToolResult) and block.synthetic and block.text() == NO_RESPONSE
    assert block.call_id == "a"
    # the records around it are the input's own objects
    assert r.transcript.records[1] is t.records[1] and r.transcript.records[3] is t.records[2]


def test_missing_result_before_user_text_anthropic_merges_results_first() -> None:
    t = build(msg(U, "go"), msg(A, call("a", "grep")), msg(U, "next"), msg(A, "ok"))
    r = clean(t, ANTHROPIC)
    assert shape(r.transcript) == [("user", "go"), ("assistant", "call:a"),
                                   ("user", f"result:a={NO_RESPONSE}", "next"), ("assistant", "ok")]
    assert kinds(r) == ["missing_result"]
    assert r.transcript.records[2].line == 3 and r.transcript.records[2].origin == Origin.INPUT
    r2 = clean(t, OPENAI)
    assert shape(r2.transcript)[2:4] == [("tool", f"result:a={NO_RESPONSE}"), ("user", "next")]


def test_missing_one_of_parallel_results_openai_keeps_call_order() -> None:
    t = build(msg(U, "go"), msg(A, call("a"), call("b"), call("c")), msg(T, res("a")), msg(T, res("c")),
              msg(A, "done"))
    r = clean(t, OPENAI)
    assert shape(r.transcript)[2:5] == [("tool", "result:a=out"), ("tool", f"result:b={NO_RESPONSE}"),
                                        ("tool", "result:c=out")]
    assert "missing_result" in kinds(r)
    # the real results are the input's records, moved or not, written back byte for byte
    assert r.transcript.records[2] is t.records[2] and r.transcript.records[4] is t.records[3]


def test_missing_one_of_parallel_results_anthropic_merges_into_the_result_message() -> None:
    t = build(msg(U, "go"), msg(A, call("a"), call("b")), msg(U, res("b")), msg(A, "done"))
    r = clean(t, ANTHROPIC)
    assert shape(r.transcript) == [("user", "go"), ("assistant", "call:a", "call:b"),
                                   ("user", f"result:a={NO_RESPONSE}", "result:b=out"), ("assistant", "done")]
    assert kinds(r) == ["missing_result"]
    host = r.transcript.records[2]
    assert host.dirty and host.line == 3 and host.origin == Origin.INPUT


# -- 2. separated results ----------------------------------------------------------------------------------
def test_result_separated_by_a_user_message_is_moved_openai() -> None:
    t = build(msg(U, "go"), msg(A, call("a")), msg(U, "interrupt"), msg(T, res("a")), msg(A, "k"))
    r = clean(t, OPENAI)
    assert shape(r.transcript) == [("user", "go"), ("assistant", "call:a"), ("tool", "result:a=out"),
                                   ("user", "interrupt"), ("assistant", "k")]
    assert kinds(r) == ["moved_result"]
    assert r.repairs[0].line == 4 and r.repairs[0].call_id == "a"
    # a move does not change the record: it is still written from its raw bytes
    assert r.transcript.records[2] is t.records[3] and not r.transcript.records[2].dirty


def test_result_before_its_call_is_moved_after_it() -> None:
    t = build(msg(U, "go"), msg(T, res("a")), msg(A, call("a")), msg(A, "k"))
    r = clean(t, OPENAI)
    assert shape(r.transcript) == [("user", "go"), ("assistant", "call:a"), ("tool", "result:a=out"),
                                   ("assistant", "k")]
    assert kinds(r) == ["moved_result"]


def test_result_separated_anthropic_is_merged_after_the_call_text_stays_after() -> None:
    t = build(msg(U, "go"), msg(A, call("a"), call("b")), msg(U, res("a"), "note"), msg(A, "x"),
              msg(U, res("b")), msg(A, "k"))
    r = clean(t, ANTHROPIC)
    assert shape(r.transcript) == [
        ("user", "go"), ("assistant", "call:a", "call:b"), ("user", "result:a=out", "result:b=out", "note"),
        ("assistant", "x", "k")]
    assert kinds(r) == ["moved_result", "merged_messages"]
    assert r.repairs[0].line == 5


def test_parallel_results_out_of_order_openai_are_put_in_call_order() -> None:
    t = build(msg(U, "go"), msg(A, call("a"), call("b")), None, msg(T, res("b", "B")), msg(T, res("a", "A")))
    r = clean(t, OPENAI)
    assert shape(r.transcript) == [("user", "go"), ("assistant", "call:a", "call:b"), ("tool", "result:a=A"),
                                   ("tool", "result:b=B"), ("-",), ("assistant", UNDERSTOOD)]
    assert kinds(r) == ["reordered_blocks", "appended_reply"]


def test_text_before_tool_results_anthropic_is_reordered() -> None:
    t = build(msg(U, "go"), msg(A, call("a"), call("b")), msg(U, "note", res("b"), res("a")), msg(A, "k"))
    r = clean(t, ANTHROPIC)
    assert shape(r.transcript)[2] == ("user", "result:a=out", "result:b=out", "note")
    assert kinds(r) == ["reordered_blocks"]
    assert r.transcript.records[2].line == 3 and r.transcript.records[2].dirty


def test_results_spread_over_two_user_messages_are_merged_anthropic() -> None:
    t = build(msg(U, "go"), msg(A, call("a"), call("b")), msg(U, res("a")), msg(U, res("b")), msg(A, "k"))
    r = clean(t, ANTHROPIC)
    assert shape(r.transcript) == [("user", "go"), ("assistant", "call:a", "call:b"),
                                   ("user", "result:a=out", "result:b=out"), ("assistant", "k")]
    assert kinds(r) == ["moved_result"]


def test_non_message_lines_keep_their_place() -> None:
    t = build(None, msg(U, "go"), None, msg(A, call("a")), None, msg(U, "x"), None, msg(T, res("a")), None)
    r = clean(t, OPENAI)
    assert shape(r.transcript) == [("-",), ("user", "go"), ("-",), ("assistant", "call:a"),
                                   ("tool", "result:a=out"), ("-",), ("user", "x"), ("-",), ("-",)]
    nonmsg = [x for x in r.transcript.records if x.message is None]
    assert nonmsg == [x for x in t.records if x.message is None]


# -- 3. orphans and 5. duplicate results --------------------------------------------------------------------
def test_orphan_tool_message_becomes_user_text_openai() -> None:
    t = build(msg(U, "go"), msg(T, res("ghost", "lost output")), msg(A, "k"))
    r = clean(t, OPENAI)
    assert kinds(r) == ["orphan_result", "role_changed"]
    rec = r.transcript.records[1]
    assert rec.message is not None and rec.message.role == Role.USER and rec.line == 2 and rec.dirty
    assert rec.message.text() == "[tool result for call ghost (no matching call)]: lost output"


def test_orphan_in_anthropic_user_message_stays_as_text_in_place() -> None:
    t = build(msg(U, "go", res("ghost", "lost", is_error=True)), msg(A, "k"))
    r = clean(t, ANTHROPIC)
    assert kinds(r) == ["orphan_result"]
    assert shape(r.transcript)[0] == ("user", "go",
                                      "[tool result for call ghost (no matching call) (error)]: lost")


def test_orphan_keeps_its_images() -> None:
    img = ImageBlock(media_type="image/png", raw={"type": "image"})
    orphan = ToolResult(call_id="g", content=[TextBlock("see"), img])
    r = clean(build(msg(U, "go"), msg(T, orphan), msg(A, "k")), OPENAI)
    blocks = r.transcript.records[1].message.blocks  # type: ignore[union-attr]
    assert blocks[1] is img


def test_duplicate_result_becomes_text_first_one_answers() -> None:
    t = build(msg(U, "go"), msg(A, call("a")), msg(T, res("a", "first")), msg(T, res("a", "second")),
              msg(A, "k"))
    r = clean(t, OPENAI)
    assert shape(r.transcript) == [
        ("user", "go"), ("assistant", "call:a"), ("tool", "result:a=first"),
        ("user", "[tool result for call a (duplicate result)]: second"), ("assistant", "k")]
    assert kinds(r) == ["orphan_result", "role_changed"]
    assert r.repairs[0].line == 4


def test_result_before_call_and_after_call_the_later_one_answers() -> None:
    t = build(msg(U, "go"), msg(T, res("a", "early")), msg(A, call("a")), msg(T, res("a", "late")),
              msg(A, "k"))
    r = clean(t, OPENAI)
    assert shape(r.transcript)[1:4] == [("user", "[tool result for call a (duplicate result)]: early"),
                                        ("assistant", "call:a"), ("tool", "result:a=late")]


# -- 4. duplicate call ids ---------------------------------------------------------------------------------
def test_reused_call_id_is_renamed_with_its_result() -> None:
    t = build(msg(U, "go"), msg(A, call("call_id")), msg(T, res("call_id", "one")),
              msg(A, call("call_id")), msg(T, res("call_id", "two")), msg(A, "k"))
    r = clean(t, OPENAI)
    assert shape(r.transcript) == [
        ("user", "go"), ("assistant", "call:call_id"), ("tool", "result:call_id=one"),
        ("assistant", "call:call_id_2"), ("tool", "result:call_id_2=two"), ("assistant", "k")]
    assert kinds(r) == ["duplicate_call_id"]
    assert r.repairs[0].line == 4 and r.repairs[0].call_id == "call_id_2"
    assert r.transcript.records[1] is t.records[1] and r.transcript.records[2] is t.records[2]
    assert r.transcript.records[3].dirty and r.transcript.records[4].dirty


def test_renamed_id_avoids_ids_already_in_use_and_patches_raw() -> None:
    c1 = ToolCall(id="x", name="f", arguments="{}", raw={"type": "tool_use", "id": "x"})
    c2 = ToolCall(id="x", name="f", arguments="{}", raw={"type": "tool_use", "id": "x"})
    r2 = ToolResult(call_id="x", content=[TextBlock("2")], raw={"type": "tool_result", "tool_use_id": "x"})
    t = build(msg(U, "go"), msg(A, call("x_2")), msg(U, res("x_2")), msg(A, c1, c2),
              msg(U, res("x", "1"), r2), msg(A, "k"))
    r = clean(t, ANTHROPIC)
    assert kinds(r) == ["duplicate_call_id"]
    new_call = r.transcript.records[3].message.blocks[1]  # type: ignore[union-attr]
    new_res = r.transcript.records[4].message.blocks[1]  # type: ignore[union-attr]
    assert isinstance(new_call, ToolCall) and new_call.id == "x_3" and new_call.raw == {"type": "tool_use",
                                                                                         "id": "x_3"}
    assert isinstance(new_res, ToolResult) and new_res.call_id == "x_3"
    assert new_res.raw == {"type": "tool_result", "tool_use_id": "x_3"}
    assert c2.id == "x" and c2.raw == {"type": "tool_use", "id": "x"}  # the input block is untouched


# -- 6. ending on a tool result ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["openai", "anthropic"])
def test_ending_on_tool_result_appends_understood(name: str) -> None:
    layout = LAYOUTS[name]
    result_msg = msg(T, res("a")) if name == "openai" else msg(U, res("a"))
    t = build(msg(U, "go"), msg(A, call("a")), result_msg, None)
    r = clean(t, layout)
    assert kinds(r) == ["appended_reply"]
    assert r.repairs[0].line == 3
    last = r.transcript.records[-1]
    assert last.origin == Origin.SYNTHETIC and last.message is not None
    assert last.message.role == Role.ASSISTANT and last.message.text() == UNDERSTOOD
    assert r.transcript.records[:-1] == t.records


def test_user_message_with_results_and_text_is_not_a_tool_ending() -> None:
    assert_unchanged(build(msg(U, "go"), msg(A, call("a")), msg(U, res("a"), "more")), ANTHROPIC)


# -- 7. role order -----------------------------------------------------------------------------------------
def test_consecutive_same_role_merged_only_for_alternating_layouts() -> None:
    t = build(msg(S, "s1"), msg(S, "s2"), msg(U, "a"), None, msg(U, "b"), msg(A, "c"), msg(A, "d"))
    assert_unchanged(t, OPENAI)
    r = clean(t, ANTHROPIC)
    assert shape(r.transcript) == [("system", "s1", "s2"), ("user", "a", "b"), ("-",),
                                   ("assistant", "c", "d")]
    assert kinds(r) == ["merged_messages"] * 3
    assert [x.line for x in r.repairs] == [2, 5, 7]
    assert r.transcript.records[1].line == 3 and r.transcript.records[1].dirty


def test_merge_keeps_first_extra_and_latest_usage() -> None:
    from ctxcompact.model import Usage
    m1 = Message(role=A, blocks=[TextBlock("x")], source_role="assistant", extra={"id": "m1"})
    m2 = Message(role=A, blocks=[TextBlock("y")], source_role="assistant", extra={"id": "m2"})
    t = build(msg(U, "go"), m1, m2)
    recs = list(t.records)
    recs[2] = dataclasses.replace(recs[2], usage=Usage(prompt_tokens=99))
    r = clean(dataclasses.replace(t, records=recs), ANTHROPIC)
    merged = r.transcript.records[1]
    assert merged.message is not None and merged.message.extra == {"id": "m1"}
    assert merged.usage is not None and merged.usage.prompt_tokens == 99


def test_system_after_start_becomes_user_for_anthropic_only() -> None:
    t = build(msg(S, "sys"), msg(U, "q"), msg(A, "a"), msg(S, "late rule"), msg(U, "q2"))
    assert_unchanged(t, OPENAI)
    r = clean(t, ANTHROPIC)
    # the moved text says it is a system message, so it is never taken for the user's words
    assert shape(r.transcript) == [("system", "sys"), ("user", "q"), ("assistant", "a"),
                                   ("user", f"{MOVED_SYSTEM}\nlate rule", "q2")]
    assert kinds(r) == ["role_changed", "merged_messages"]


def test_assistant_first_gets_a_user_opener_for_anthropic_only() -> None:
    t = build(msg(S, "sys"), None, msg(A, "hello"), msg(U, "q"))
    assert_unchanged(t, OPENAI)
    r = clean(t, ANTHROPIC)
    assert shape(r.transcript) == [("system", "sys"), ("-",), ("user", CONTINUES), ("assistant", "hello"),
                                   ("user", "q")]
    assert kinds(r) == ["inserted_message"] and r.repairs[0].line == 3


def test_every_reported_kind_is_documented() -> None:
    t = build(msg(A, call("a"), call("a")), msg(U, "x"), msg(S, "s"), msg(T, res("q")), msg(U, res("a")))
    for layout in LAYOUTS.values():
        assert set(kinds(clean(t, layout))) <= set(REPAIR_KINDS)


def test_unicode_and_huge_content_survive() -> None:
    big = "é" * 200_000 + "🦀"
    t = build(msg(U, "go"), msg(A, call("ä")), msg(U, "x"), msg(T, res("ä", big)))
    r = clean(t, OPENAI)
    assert shape(r.transcript)[2] == ("tool", f"result:ä={big}")


# -- properties (hypothesis) -------------------------------------------------------------------------------
IDS = ["a", "b", "c", "d"]  # a small pool, so calls repeat ids and results miss or find no call


@st.composite
def transcripts(draw: st.DrawFn) -> tuple[Transcript, Layout]:
    name = draw(st.sampled_from(["openai", "anthropic"]))
    layout = LAYOUTS[name]
    counter = iter(range(10_000))

    def text() -> str:
        return f"t{next(counter)}"

    def result(cid: str) -> ToolResult:
        return ToolResult(call_id=cid, content=[TextBlock(f"r{next(counter)}")],
                          is_error=draw(st.booleans()))

    items: list[Message | None] = []
    kinds_of_item = ["system", "user", "assistant", "calls", "result", "results", "none"]
    ops = draw(st.lists(st.sampled_from(kinds_of_item), max_size=14))
    for op in ops:
        if op == "none":
            items.append(None)
        elif op in ("system", "user", "assistant"):
            items.append(msg(Role(op), text()))
        elif op == "calls":
            ids = draw(st.lists(st.sampled_from(IDS), min_size=1, max_size=3))
            lead: list[Block] = [TextBlock(text())] if draw(st.booleans()) else []
            items.append(msg(A, *lead, *(call(i, f"tool_{i}", f'{{"n": "{text()}"}}') for i in ids)))
        elif op == "result" or name == "openai":
            items.append(msg(layout.result_role, result(draw(st.sampled_from(IDS)))))
        else:  # an Anthropic user message with several results and maybe text, in any order
            blocks: list[Block] = [result(i) for i in draw(st.lists(st.sampled_from(IDS), min_size=1,
                                                                     max_size=3))]
            if draw(st.booleans()):
                blocks.insert(draw(st.integers(0, len(blocks))), TextBlock(text()))
            items.append(msg(U, *blocks))
    return build(*items), layout


def check_invariants(t: Transcript, layout: Layout) -> None:
    msgs = [r.message for r in t.records if r.message is not None]
    calls = [c for m in msgs for c in m.tool_calls()]
    results = [b for m in msgs for b in m.blocks if isinstance(b, ToolResult)]
    call_ids = [c.id for c in calls]
    assert len(set(call_ids)) == len(call_ids), "call ids are unique"
    assert sorted(r.call_id for r in results) == sorted(call_ids), "every call has exactly one result"
    for i, m in enumerate(msgs):
        ids = [c.id for c in m.tool_calls()]
        if not ids:
            continue
        assert not m.tool_results()
        if layout.results_per_message:
            after = msgs[i + 1: i + 1 + len(ids)]
            assert [a.role for a in after] == [layout.result_role] * len(ids)
            assert all(len(a.blocks) == 1 for a in after)
            assert [a.blocks[0].call_id for a in after] == ids  # type: ignore[union-attr]
        else:
            nxt = msgs[i + 1]
            assert nxt.role == layout.result_role
            head = nxt.blocks[: len(ids)]
            assert [b.call_id for b in head if isinstance(b, ToolResult)] == ids
            assert len(nxt.tool_results()) == len(ids)
    if msgs:
        last = msgs[-1]
        assert not (last.role == Role.TOOL or (last.role == layout.result_role and last.is_tool_result_only))
    if layout.alternate:
        roles = [m.role for m in msgs]
        assert all(a != b for a, b in itertools.pairwise(roles)), "roles alternate"
        rest = roles[1:] if roles and roles[0] == Role.SYSTEM else roles
        assert Role.SYSTEM not in rest, "system only at the start"
        if rest:
            assert rest[0] == Role.USER


def everything_text(t: Transcript) -> str:
    parts = []
    for r in t.records:
        if r.message is not None:
            for b in r.message.blocks:
                parts.append(b.text() if isinstance(b, ToolResult) else getattr(b, "text", ""))
    return "\n".join(parts)


@settings(max_examples=300, deadline=None)
@given(transcripts())
def test_clean_is_idempotent(case: tuple[Transcript, Layout]) -> None:
    t, layout = case
    once = clean(t, layout)
    twice = clean(once.transcript, layout)
    assert twice.repairs == []
    assert all(a is b for a, b in zip(twice.transcript.records, once.transcript.records, strict=True))


@settings(max_examples=300, deadline=None)
@given(transcripts())
def test_cleaned_transcript_is_valid_for_its_layout(case: tuple[Transcript, Layout]) -> None:
    t, layout = case
    r = clean(t, layout)
    check_invariants(r.transcript, layout)
    assert set(kinds(r)) <= set(REPAIR_KINDS)
    originals = {id(x) for x in t.records}
    for rec in r.transcript.records:
        # a record is either the input's own, untouched object or one marked for rewriting
        assert rec.dirty or id(rec) in originals
    lines_without_message = [x for x in t.records if x.message is None]
    assert [x for x in r.transcript.records if x.message is None] == lines_without_message
    if not r.repairs:
        assert r.transcript.records == t.records


@settings(max_examples=300, deadline=None)
@given(transcripts())
def test_cleaning_loses_nothing(case: tuple[Transcript, Layout]) -> None:
    t, layout = case
    r = clean(t, layout)
    out_text = everything_text(r.transcript)
    out_calls = sorted((c.name, c.arguments) for m in r.transcript.messages() for c in m.tool_calls())
    in_calls = sorted((c.name, c.arguments) for m in t.messages() for c in m.tool_calls())
    assert out_calls == in_calls
    for m in t.messages():
        for b in m.blocks:
            if isinstance(b, TextBlock):
                assert b.text in out_text
            elif isinstance(b, ToolResult):
                assert b.text() in out_text
    synthetic = [b for m in r.transcript.messages() for b in m.tool_results() if b.synthetic]
    assert len(synthetic) == kinds(r).count("missing_result")


# -- golden files: read → clean → write, in the real formats -------------------------------------------------
GOLDEN = Path(__file__).parent / "data" / "clean"
CASES = sorted(p.name for p in GOLDEN.iterdir() if p.is_dir())


def _formats_ready() -> bool:
    try:
        from ctxcompact.formats import anthropic, openai, read_transcript, write_transcript  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not _formats_ready(), reason="the openai/anthropic format modules are not there yet")
@pytest.mark.parametrize("case", CASES)
def test_golden(case: str) -> None:
    from ctxcompact.formats import read_transcript, write_transcript

    fmt = case.split("_", 1)[0]
    folder = GOLDEN / case
    t = read_transcript(folder / "input.jsonl", fmt, schema=False).transcript
    r = clean(t)  # the layout comes from the format
    check_golden(b"".join(write_transcript(r.transcript)), folder / "expected.jsonl")
    check_golden("".join(f"{x}\n" for x in r.repairs).encode(), folder / "expected_report.txt")
    expected = (folder / "expected.jsonl").read_bytes()
    again = clean(read_transcript(expected, fmt, schema=False).transcript)
    assert again.repairs == []
    assert b"".join(write_transcript(again.transcript)) == expected


def test_golden_cases_cover_every_repair_in_both_formats() -> None:
    for fmt in ("openai", "anthropic"):
        for what in ("no_repair", "missing_result", "moved_result", "orphan_result", "duplicate_call_id",
                     "duplicate_result", "appended_reply", "role_order"):
            assert f"{fmt}_{what}" in CASES


def test_large_transcript_with_one_reused_id() -> None:
    # (that this is linear in n is a doubling case: tests/scan_cases.py, "every call reusing one id")
    n = 10_000
    items: list[Message | None] = [msg(U, "go")]
    for i in range(n):  # the fine-tuning habit: every call has the placeholder id "call_id"
        items += [msg(A, call("call_id", "f", f'{{"i": {i}}}')), msg(T, res("call_id", f"r{i}"))]
    items += [msg(U, f"u{i}") for i in range(n)]  # a long run of user lines, merged for Anthropic
    t = build(*items)
    r = clean(t, OPENAI)
    assert kinds(r).count("duplicate_call_id") == n - 1
    ids = [c.id for m in r.transcript.messages() for c in m.tool_calls()]
    assert ids[:3] == ["call_id", "call_id_2", "call_id_3"] and len(set(ids)) == n
    r2 = clean(t, ANTHROPIC)
    # the last call's results message opens the user run, so all n user lines merge into it
    assert kinds(r2).count("merged_messages") == n
    assert r2.transcript.records[-1].message is not None
    assert r2.transcript.records[-1].message.text().endswith(f"u{n - 1}")


# issue 26 item 15: whatever CRs end a line, cleaning twice gives what cleaning once gave
_LINES = [b'{"role":"user","content":"hi"}', b'{"role":"assistant","content":"ok"}',
          b'{"role":"user","content":"a\\r\\nb"}', b'{"role":"assistant","content":"x"} ',
          b'{"role":"user",\r"content":"cr inside"}']
_ENDINGS = [b"\n", b"\r\n", b"\r\r\n", b"\r\r\r\n", b" \r\n", b"\r \n", b"\n\n", b"\r\n\r\n"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_LINES), st.sampled_from(_ENDINGS)), min_size=1, max_size=6),
       st.sampled_from([b"", b"\r", b"\r\r"]))
def test_cleaning_is_idempotent_whatever_the_line_endings(lines: list[tuple[bytes, bytes]],
                                                          tail: bytes) -> None:
    from ctxcompact import api

    data = b"".join(a + b for a, b in lines)
    data = data[:-1] + tail if data.endswith(b"\n") and tail else data
    once = b"".join(api.clean_file(data, "openai", warn=lambda _m: None).lines())
    twice = b"".join(api.clean_file(once, "openai", warn=lambda _m: None).lines())
    assert twice == once

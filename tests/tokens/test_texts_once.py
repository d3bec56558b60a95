"""A record's token texts worked out once per count (``tokens.counts.count_records``: the heuristic and the
exact counter from one ``token_text``), and ``report.context_stats`` tallied in locals: the same figures as
each message counted and described on its own."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxcompact.model import (
    ImageBlock,
    Message,
    OpaqueBlock,
    Origin,
    Record,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResult,
    token_text,
)
from ctxcompact.options import Options
from ctxcompact.report import context_stats
from ctxcompact.tokens import exact, heuristic
from ctxcompact.tokens.counts import count_records

_text = st.text(alphabet=st.sampled_from("ab é\n{}:\"'0 \t日"), max_size=40)
_leaf = st.one_of(
    st.builds(TextBlock, _text),
    st.builds(ThinkingBlock, _text),
    st.builds(ImageBlock),
    st.builds(OpaqueBlock, st.just("refusal"), _text),
    st.builds(ToolCall, st.sampled_from(["c1", "c2"]), _text, _text),
)
_block = st.one_of(_leaf, st.builds(ToolResult, st.sampled_from(["c1", "c2"]), st.lists(_leaf, max_size=3)))
_record = st.builds(
    lambda role, blocks, has, origin, i: Record(i, i + 1, None, None, Message(role, blocks) if has else None,
                                                origin=origin),
    st.sampled_from(list(Role)), st.lists(_block, max_size=4), st.booleans(),
    st.sampled_from(list(Origin)), st.integers(0, 100))


@settings(max_examples=25, deadline=None)
@given(st.lists(_record, max_size=12))
def test_count_records_is_each_message_counted_alone(records: list[Record]) -> None:
    messages = [r.message for r in records if r.message is not None]
    alone_heuristic = [heuristic.message_tokens(m) for m in messages]
    alone_exact = exact.count_messages(messages, "o200k_base")
    for opts in (Options(exact="none"), Options(encoding="o200k_base")):
        counts = count_records(records, opts)
        assert [n for n, r in zip(counts.heuristic, records, strict=True) if r.message is not None] \
            == alone_heuristic
        assert all(n == 0 for n, r in zip(counts.heuristic, records, strict=True) if r.message is None)
        if opts.exact == "none":
            assert counts.exact is None
        else:
            assert counts.exact is not None
            assert [n for n, r in zip(counts.exact, records, strict=True) if r.message is not None] \
                == alone_exact


@settings(max_examples=25, deadline=None)
@given(st.lists(_record, max_size=12))
def test_context_stats_is_the_records_described_one_by_one(records: list[Record]) -> None:
    s = context_stats(records, "openai", 7, 2, 1)
    roles: dict[str, int] = {}  # in order of first appearance
    for r in records:
        if r.message is not None:
            roles[r.message.role.value] = roles.get(r.message.role.value, 0) + 1
    assert list(s.messages.items()) == list(roles.items())
    assert s.tool_calls == sum(len(r.message.tool_calls()) for r in records if r.message is not None)
    assert s.chars == sum(len(t) for r in records if r.message is not None
                          for t in token_text(r.message)[0])
    assert s.from_input == sum(r.origin is Origin.INPUT for r in records)
    assert (s.format, s.records, s.covered, s.repairs) == ("openai", 7, 2, 1)

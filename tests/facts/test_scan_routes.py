"""The fact feed calls for each record only the scans that read its kind (facts.seen.Kind, ``Scanner.reads``,
facts.gather.FactFeed's routes): a scan left out for a record would have done nothing with it, so the routed
feed gives the facts of every scan fed every record (what the feed did before it was routed)."""

from __future__ import annotations

import copy
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxcompact.facts.gather import FactFeed
from ctxcompact.facts.seen import Kind, Seen, kind_of
from ctxcompact.model import (
    EARLIER_SUMMARY,
    INSTRUCTIONS,
    SUBAGENT_MESSAGE,
    Message,
    Origin,
    Record,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResult,
)

TEXTS = ["", "  ", "Fixed: all tests pass now.", "The build is not fixed yet.",
         "Never push to main. Always run make.",
         "Let me read UserCache in src/app.py.", "İstanbul ſtraße ı KELVİN — 日本語 🙂", "See https://example.com/x.",
         "<system-reminder>noise</system-reminder>", "[Request interrupted by user]",
         "Contents of /repo/AGENTS.md (project instructions for /repo):\n\nNever edit generated files.",
         "Traceback (most recent call last):\n  File \"x.py\"\nValueError: boom", "Error: no such thing",
         "ok"]
ARGS = [{"command": "pytest -q tests/t.py"}, {"command": "rg foo"}, {"file_path": "src/app.py"},
        {"file_path": "src/app.py", "old_string": "a", "new_string": "b"},
        {"todos": [{"content": "fix it", "status": "pending"}]}, {}, {"cmd": ["bash", "-lc", "make"]}]
TOOLS = ["bash", "Read", "Edit", "TodoWrite", "Grep", "shell"]
IDS = ["c0", "c1", "c2"]


@st.composite
def _block(draw: st.DrawFn) -> Any:
    which = draw(st.integers(0, 3))
    if which == 0:
        return TextBlock(draw(st.sampled_from(TEXTS)))
    if which == 1:
        args = draw(st.sampled_from(ARGS))
        return ToolCall(draw(st.sampled_from(IDS)), draw(st.sampled_from(TOOLS)), orjson.dumps(args).decode())
    if which == 2:
        return ToolResult(draw(st.sampled_from(IDS)), [TextBlock(draw(st.sampled_from(TEXTS)))],
                          is_error=draw(st.booleans()), synthetic=draw(st.booleans()),
                          succeeded=draw(st.sampled_from([None, True, False])))
    return ThinkingBlock(draw(st.sampled_from(TEXTS)))


@st.composite
def _record(draw: st.DrawFn) -> Record:
    role = draw(st.sampled_from([None, Role.SYSTEM, Role.USER, Role.USER, Role.ASSISTANT, Role.ASSISTANT,
                                 Role.TOOL]))
    meta: dict[str, Any] = {}
    for key, value in ((INSTRUCTIONS, True), (EARLIER_SUMMARY, "codex"), ("author", "someone"),
                       (SUBAGENT_MESSAGE, Message(Role.USER, [TextBlock("a subagent's task")]))):
        if draw(st.integers(0, 5)) == 0:
            meta[key] = value
    message = None if role is None else Message(role, draw(st.lists(_block(), max_size=3)))
    rec = Record(index=0, line=0, raw=None, data={}, message=message,
                 origin=draw(st.sampled_from([Origin.INPUT, Origin.INPUT, Origin.INPUT, Origin.SYNTHETIC,
                                              Origin.SUMMARY])))
    if meta:  # (else the shared empty meta, as the readers leave it)
        rec.meta = meta
    return rec


class _Unrouted(FactFeed):
    """Every step for every record: the feed as it was before routes."""

    def _steps(self, kind: Kind) -> Any:
        return (self._request, *[s.feed for s in self.scans], self._earlier, self._subagent)


def _placed(records: list[Record]) -> list[Record]:
    for i, rec in enumerate(records):
        rec.index = rec.line = i
    return records


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_record(), max_size=30), st.booleans())
def test_the_routed_feed_gives_the_facts_of_every_scan_fed_every_record(records: list[Record],
                                                                         bounded: bool) -> None:
    records = _placed(records)
    routed, unrouted = FactFeed(bounded=bounded), _Unrouted(bounded=bounded)
    for rec in records:
        routed.feed(Seen(rec))
        unrouted.feed(Seen(rec))
    assert routed.complete == unrouted.complete
    assert routed.facts(records=records) == unrouted.facts(records=records)
    # what the scans hold, not only what facts() makes of it (the files' order, the errors' places)
    for mine, theirs in zip(routed.scans, unrouted.scans, strict=True):
        assert _held(mine) == _held(theirs), type(mine).__name__


def _held(scanner: Any) -> Any:
    return {k: v for k, v in vars(scanner).items() if k not in ("calls", "failed", "judge")}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_record(), min_size=1, max_size=12))
def test_a_scan_fed_a_record_of_a_kind_it_does_not_read_holds_the_same(records: list[Record]) -> None:
    records = _placed(records)
    feed = FactFeed()
    for rec in records:  # (scans with something held: a record left out must not change it)
        view = Seen(rec)
        kind = kind_of(view.kind)
        before = [copy.deepcopy(_held(s)) for s in feed.scans]
        for s in feed.scans:
            if not s.reads(kind):
                s.feed(view)
        assert [_held(s) for s in feed.scans] == before, kind
        feed.feed(Seen(rec))


def _rec(role: Role | None, blocks: list[Any], origin: Origin = Origin.INPUT,
         meta: dict[str, Any] | None = None) -> Record:
    rec = Record(index=0, line=0, raw=None, data={}, message=None if role is None else Message(role, blocks),
                 origin=origin)
    if meta:
        rec.meta = meta
    return rec


def _primed(feed: FactFeed | None = None) -> FactFeed:
    """A feed (``feed``, else a bounded FactFeed) whose scans all hold something a record could change: an
    open error, a pending answer, a step of the assistant, a call not yet answered."""
    feed = feed or FactFeed(bounded=True)
    test = '{"command": "pytest -q"}'
    for rec in _placed([
            _rec(Role.USER, [TextBlock("Please fix the build. Never push to main.")]),
            _rec(Role.ASSISTANT, [TextBlock("Running the tests."), ToolCall("c0", "bash", test)]),
            _rec(Role.TOOL, [ToolResult("c0", [TextBlock("FAILED t.py::x - AssertionError")])]),
            _rec(Role.ASSISTANT, [TextBlock("The cache in UserCache is stale; I will fix it."),
                                  ToolCall("c1", "bash", test)])]):
        feed.feed(rec)
    return feed


def _of_every_kind() -> list[Record]:
    """Records of every kind (role, origin, calls, results, meta), with texts that read as a claim of a fix,
    a rule, a request and a project file."""
    texts = ["Fixed: all tests pass now. Never push to main.", "",
             "Contents of /r/AGENTS.md (project instructions for /r):\n\nNever edit generated files."]
    metas: list[dict[str, Any] | None] = [
        None, {INSTRUCTIONS: True, EARLIER_SUMMARY: "codex",
               SUBAGENT_MESSAGE: Message(Role.USER, [TextBlock("a task")])}]
    out = []
    for role in [None, *Role]:
        for origin in (Origin.INPUT, Origin.SYNTHETIC):
            for calls in ([], [ToolCall("c2", "Edit", '{"file_path": "a.py", "old_string": "x"}')]):
                for results in ([], [ToolResult("c1", [TextBlock("1 passed")]),
                                     ToolResult("c0", [TextBlock("Error: boom")], is_error=True)]):
                    for meta in metas:
                        for text in texts:
                            out.append(_rec(role, [TextBlock(text), *calls, *results], origin, meta))
    return out


def test_no_scan_takes_anything_from_a_record_of_a_kind_it_does_not_read() -> None:
    records = _of_every_kind()
    assert len({Seen(r).kind for r in records}) == 4 * 16 + 4  # (every kind: no calls without a message)
    skipped = 0
    for rec in records:
        view = Seen(rec)
        kind = kind_of(view.kind)
        feed = _primed()  # (the scans hold apart: each is fed the record alone, the others not at all)
        left = [s for s in feed.scans if not s.reads(kind)]
        before = [copy.deepcopy(_held(s)) for s in left]
        view.n = feed.n
        for scanner in left:
            scanner.feed(view)
        for scanner, held in zip(left, before, strict=True):
            assert _held(scanner) == held, (type(scanner).__name__, kind)
        skipped += len(left)
        # and the feed's own steps (a request, an earlier summary, a subagent's line)
        routed, unrouted = _primed(), _primed(_Unrouted(bounded=True))
        routed.feed(rec)
        unrouted.feed(rec)
        assert routed.facts(records=[rec]) == unrouted.facts(records=[rec]), kind
    assert skipped > 68 * 5  # (most kinds are read by few scans)


def test_a_kind_says_the_record() -> None:
    call = ToolCall("c0", "bash", '{"command": "ls"}')
    rec = Record(index=0, line=1, raw=None, data={}, message=Message(Role.ASSISTANT, [TextBlock("x"), call]),
                 meta={"author": "a"})
    assert kind_of(Seen(rec).kind) == Kind(Role.ASSISTANT, True, True, False, True)
    result = Record(index=1, line=2, raw=None, data={}, origin=Origin.SYNTHETIC,
                    message=Message(Role.TOOL, [ToolResult("c9", [TextBlock("")], synthetic=True)]))
    assert kind_of(Seen(result).kind) == Kind(Role.TOOL, False, False, True, False)
    empty = Record(index=2, line=3, raw=None, data=None)
    assert kind_of(Seen(empty).kind) == Kind(None, True, False, False, False)
    keys = {Seen(r).kind for r in (rec, result, empty)}
    assert len(keys) == 3


def test_a_result_without_its_call_and_an_empty_text_are_read_as_before() -> None:
    records = _placed([
        Record(index=0, line=0, raw=None, data={}, message=Message(Role.USER, [TextBlock("")])),
        Record(index=0, line=0, raw=None, data={},
               message=Message(Role.TOOL, [ToolResult("gone", [TextBlock("Error: boom")], is_error=True)])),
        Record(index=0, line=0, raw=None, data={}, message=Message(Role.ASSISTANT, [TextBlock("  ")])),
        Record(index=0, line=0, raw=None, data={}, message=Message(Role.USER, [TextBlock("Fix İ ſ.")])),
    ])
    routed, unrouted = FactFeed(bounded=True), _Unrouted(bounded=True)
    for rec in records:
        routed.feed(rec)
        unrouted.feed(rec)
    facts = routed.facts()
    assert facts == unrouted.facts()
    assert [e.text for e in facts.facts.errors] == ["Error: boom"]  # (a result whose call is not known)
    assert facts.facts.latest_request == "Fix İ ſ."

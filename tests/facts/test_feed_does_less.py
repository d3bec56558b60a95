"""The fact feed's per-record steps do less for the same facts (docs/measurements/performance-log.md, branch
`cmp13`): what depends only on a tool's name is worked out once per name, the error scan looks up no success
keys while no error is open, the goals' cap is read without an import, and the feed enters one memo block
(counts and identities, not times)."""

from __future__ import annotations

import builtins
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxcompact.facts import calls, files, goals, outcomes
from ctxcompact.facts.calls import call_index, is_content_tool, writes_files
from ctxcompact.facts.gather import FactFeed
from ctxcompact.facts.seen import Seen
from ctxcompact.model import Message, Origin, Record, Role, TextBlock, ToolCall, ToolResult

_NAMES = st.sampled_from(["Edit", "MultiEdit", "Write", "apply_patch", "str_replace_editor", "bash", "Bash",
                          "shell", "Read", "read_file", "Grep", "Glob", "LS", "ls", "list_dir", "view",
                          "find_files", "search", "WebFetch", "execute_command", "run_shell", "editor",
                          "Writer", "", "ИЗМЕНИТЬ", "Ǆ"]) | st.text(max_size=12)


@settings(max_examples=200, deadline=None)
@given(_NAMES)
def test_a_tools_name_tests_are_the_rules_worked_out_once(name: str) -> None:
    # the cached tests are the functions themselves (their ``__wrapped__``): the same answer for every name
    assert calls._writer_name(name) is calls._writer_name.__wrapped__(name)
    assert is_content_tool(name) is is_content_tool.__wrapped__(name)  # type: ignore[attr-defined]
    assert files._searches(name) is files._searches.__wrapped__(name)
    call = ToolCall("c1", name, '{"path": "src/a.py"}', {"path": "src/a.py"})
    squashed = calls.squash(name)
    named = any(w in squashed for w in calls._WRITE_TOOL_WORDS) and squashed not in calls.SHELL_TOOLS
    assert writes_files(call) is named  # (no command: only the name decides)


def test_a_tools_name_is_read_once() -> None:
    calls._writer_name.cache_clear()
    for _ in range(5):
        writes_files(ToolCall("c1", "MultiEdit", "{}", {}))
    info = calls._writer_name.cache_info()
    assert info.misses == 1 and info.hits == 4


def _rec(i: int, role: Role, blocks: list[Any]) -> Record:
    return Record(index=i, line=i + 1, raw=None, data={}, message=Message(role, blocks), origin=Origin.INPUT)


def _run(n: int, t: int, command: str, output: str) -> list[Record]:
    return [_rec(n, Role.ASSISTANT, [ToolCall(f"c{t}", "bash", "", {"command": command})]),
            _rec(n + 1, Role.TOOL, [ToolResult(f"c{t}", [TextBlock(output)])])]


def _scanned(records: list[Record]) -> outcomes.ErrorScan:
    """An error scan fed ``records`` in order, as the feed gives them."""
    scan = outcomes.ErrorScan(call_index(records))
    for n, rec in enumerate(records):
        view = Seen(rec)
        view.n = n
        scan.feed(view)
    return scan


def test_the_error_scan_looks_up_no_success_keys_with_no_error_open(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = {"keys": 0}
    keys = outcomes.success_keys

    def counted(call: ToolCall) -> frozenset[str]:
        asked["keys"] += 1
        return keys(call)
    monkeypatch.setattr(outcomes, "success_keys", counted)
    scan = _scanned(_run(0, 0, "make", "built") + _run(2, 1, "make test", "12 passed"))
    assert asked["keys"] == 0 and scan.result() == []
    # an error open: the next success of the same command looks its keys up and resolves it
    scan = _scanned(_run(0, 0, "make", "Error: no rule to make target") + _run(2, 1, "make", "built"))
    errors = scan.result()
    assert asked["keys"] == 1 and len(errors) == 1 and errors[0].resolved
    assert not scan.open_by_key and not scan.open_by_file


def test_the_goals_cap_is_read_without_an_import(monkeypatch: pytest.MonkeyPatch) -> None:
    imports = {"n": 0}
    real = builtins.__import__

    def counted(*args: Any, **kwargs: Any) -> Any:
        imports["n"] += 1
        return real(*args, **kwargs)
    requests = goals.Requests(bounded=True)
    builtins.__import__ = counted
    try:
        for i in range(300):
            requests.add(f"please do task {i}")
    finally:
        builtins.__import__ = real
    assert imports["n"] == 0
    assert len(requests.kept) < goals.Requests.FIRST + 2 * requests.last_kept()  # (trimmed: the cap was read)
    monkeypatch.setattr(goals.store, "MAX_GOALS", 3)
    assert requests.last_kept() == 10  # read when asked: a cap made small is the one used


def test_the_feed_works_in_one_memo_block() -> None:
    feed = FactFeed(bounded=True)
    memo, block = feed.memo, feed.block
    session = [_rec(0, Role.USER, [TextBlock("Please build it.")]), *_run(1, 0, "make", "built")]
    feed.feed(Seen(session[0]))
    feed.feed(Seen(session[1]))
    assert memo  # the call awaits its result: what the scans read of it is in the one memo
    feed.feed(Seen(session[2]))
    assert not memo  # answered: emptied in place
    assert feed.memo is memo and feed.block is block and block.memo is memo
    assert [c.command for c in feed.facts().facts.commands] == ["make"]


@pytest.mark.parametrize(("positions", "ordered"), [
    ([0, 1, 1, 2, 5], True),  # a position again is in order
    ([0, 3, 2], False),
    ([-1, 0, 1], False),  # below where it starts: merge may order it first
    ([4, 4, 3, 9], False),  # once out of order, it stays so
])
def test_the_feed_knows_records_out_of_order(positions: list[int], ordered: bool) -> None:
    feed = FactFeed(bounded=True)
    for p in positions:
        feed.feed(Seen(_rec(p, Role.ASSISTANT, [TextBlock(f"Step {p} is done.")])))
    assert feed.ordered is ordered
    assert feed.last_at == max(0, *positions)

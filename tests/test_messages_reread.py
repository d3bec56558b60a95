"""A ``Session`` reads, finishes and cleans only the messages it has not seen (``context.Reread``): whatever
the split of appends, each call gives exactly what a call on the whole list gives (stateless, below the
threshold; and a session that reads whole, over it), with a tool call whose result comes in a later append,
repairs the cleaner must hold back, and a list edited in its prefix (read whole again, never a stale
answer)."""

from __future__ import annotations

import re
from typing import Any

import orjson
import pytest
from helpers import assistant, sys_msg, tool, user
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ctxcompact
from ctxcompact.clean import Cleaner
from ctxcompact.options import Options

KINDS = ("turn", "call", "answer", "dup", "orphan", "text", "system", "two", "usage")


def conversation(kinds: list[str]) -> list[dict[str, Any]]:
    """Messages of each kind: a whole turn, a call whose result comes later (``answer``: the oldest pending
    one's), a call id used again, a result of no call, plain text, a system message mid-list, two calls
    in one message answered at once, a reply with the provider's usage (what calibrates)."""
    out: list[dict[str, Any]] = [sys_msg("You are a coding agent.")]
    pending: list[str] = []
    for i, kind in enumerate(kinds):
        if kind == "turn":
            out += [user(f"step {i}: read m{i}.py"), assistant(None, [(f"t{i}", "read_file", {"p": i})]),
                    tool(f"t{i}", f"def f{i}():\n    return {i}\n" * 3), assistant(f"f{i} returns {i}.")]
        elif kind == "call":
            out.append(assistant(None, [(f"c{i}", "run", {"n": i})]))
            pending.append(f"c{i}")
        elif kind == "answer" and pending:
            out.append(tool(pending.pop(0), f"result {i}"))
        elif kind == "dup":
            out += [assistant(None, [("same", "run", {"n": i})]), tool("same", f"again {i}")]
        elif kind == "orphan":
            out.append(tool(f"nobody{i}", f"stray {i}"))
        elif kind == "system":
            out.append(sys_msg(f"Note {i}: be brief."))
        elif kind == "usage":
            out.append(assistant(f"done {i}", usage={"prompt_tokens": 900 + 41 * len(out) + i,
                                                     "completion_tokens": 5}))
        elif kind == "two":
            out += [assistant(None, [(f"a{i}", "ls", {}), (f"b{i}", "cat", {"f": i})]),
                    tool(f"a{i}", "x.py"), tool(f"b{i}", "print(1)")]
        else:
            out.append(user(f"message {i}") if i % 2 else assistant(f"reply {i}"))
    return out


def _edited(m: dict[str, Any]) -> dict[str, Any]:
    """``m`` with its text changed, its length kept (a read from a stale offset lands on a line start)."""
    text = m.get("content")
    if isinstance(text, str) and text.swapcase() != text:
        return {**m, "content": text.swapcase()}
    return {**m, "content": "edited"}


def _same(warm: Any, cold: Any) -> None:
    assert warm.run is not None and cold.run is not None
    assert b"".join(warm.run.lines()) == b"".join(cold.run.lines())
    assert warm.messages == cold.messages and warm.kept == cold.kept
    system = [{"role": "system", "content": warm.system}] if warm.system is not None else []
    assert [*system, *warm.messages] == [orjson.loads(line) for line in warm.run.lines()]  # (what was run)
    assert (warm.compacted, warm.tokens_before, warm.tokens_after, warm.fits, warm.warnings) == \
        (cold.compacted, cold.tokens_before, cold.tokens_after, cold.fits, cold.warnings)
    assert [(r.kind, r.line, r.detail) for r in warm.run.repairs] == \
        [(r.kind, r.line, r.detail) for r in cold.run.repairs]
    # the figures: counts, statistics, calibration (its points, factor, hidden part), budget, decision
    assert warm.estimate.to_json() == cold.estimate.to_json()
    assert warm.estimate.calibrated == cold.estimate.calibrated
    assert warm.run.context is not None and cold.run.context is not None
    assert [(r.index, r.line, r.offset, r.raw) for r in warm.run.context.records] == \
        [(r.index, r.line, r.offset, r.raw) for r in cold.run.context.records]


def _state(session: ctxcompact.Session) -> bytes:
    """The state a session keeps, as it would be written (its times aside)."""
    assert session._state is not None
    raw = orjson.dumps(session._state.to_json(), option=orjson.OPT_SORT_KEYS)
    return re.sub(rb'"duration_s":[0-9.e-]+', b"", re.sub(rb'"[0-9-]{10}T[0-9:.]+Z"', b'"T"', raw))


def _cache(session: ctxcompact.Session) -> tuple[Any, ...]:
    """What a session's count cache holds for its next call (what this call saw: the columns committed)."""
    c = session._counts
    c.commit()
    return (c.key, c.settled, c.settled_sha256, *(c.offsets, c.digests, c.heuristic, c.exact),
            *(c.text_keys, c.text_heuristic, c.text_exact))


def _whole() -> ctxcompact.Session:
    """A session that reads, cleans and counts the whole list on every call."""
    s = ctxcompact.Session()
    s._reread = None  # type: ignore[assignment]
    return s


def _kept_and_whole(turns: int, exact: str
                    ) -> tuple[list[Any], Options, ctxcompact.Session, ctxcompact.Session]:
    """A conversation of ``turns`` turns, the options of the counting tests, a session that keeps its read
    and one that reads whole (to compare with)."""
    opts = Options(window=1_000_000, exact=exact, keep_trailing_results=True)
    return conversation(["turn"] * turns), opts, ctxcompact.Session(), _whole()


def _counter_fails(*_: Any, **__: Any) -> Any:
    raise RuntimeError("the counter failed")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kinds=st.lists(st.sampled_from(KINDS), min_size=3, max_size=30),
       splits=st.lists(st.integers(1, 9), min_size=1, max_size=12),
       edit=st.none() | st.tuples(st.integers(0, 11), st.integers(1, 40)),
       fmt=st.sampled_from(["auto", "openai"]),
       exacts=st.lists(st.sampled_from(["none", "tiktoken"]), min_size=1, max_size=4))
def test_any_split_of_appends_gives_the_whole_list_s_answer(kinds: list[str], splits: list[int],
                                                             edit: tuple[int, int] | None, fmt: str,
                                                             exacts: list[str]) -> None:
    """Each call as a session that reads the whole list every call (and, with no usage, a stateless call):
    the same output, figures, state and count cache, the counter changing between calls (``exacts``:
    the counts kept of the settled messages are another counter's)."""
    msgs = conversation(kinds)
    session, whole = ctxcompact.Session(), _whole()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Cleaner, "FIRST_TRY", 3)  # (parts settle often: the read resumes within a short list)
        end, resumed = 0, 0
        for k, n in enumerate(splits):
            opts = Options(window=1_000_000, exact=exacts[k % len(exacts)], keep_trailing_results=True)
            end = min(len(msgs), end + n)
            if edit is not None and edit[0] == k and edit[1] < end:
                msgs = [*msgs[: edit[1]], _edited(msgs[edit[1]]), *msgs[edit[1] + 1:]]
            warm = ctxcompact.compact(msgs[:end], session=session, options=opts, format=fmt)
            if "usage" not in kinds:  # (a session's state keeps what the usage measured: not stateless)
                _same(warm, ctxcompact.compact(msgs[:end], options=opts, format=fmt))
            _same(warm, ctxcompact.compact(msgs[:end], session=whole, options=opts, format=fmt))
            assert _state(session) == _state(whole) and _cache(session) == _cache(whole)
            resumed += session._reread.read_from > 0
    if end > 40 and len(splits) > 6 and edit is None:
        assert resumed  # (the test reads on, not only whole)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kinds=st.lists(st.sampled_from(KINDS), min_size=20, max_size=40),
       splits=st.lists(st.integers(2, 12), min_size=3, max_size=10), replaces=st.booleans(),
       exact=st.sampled_from(["none", "tiktoken"]))
def test_a_session_that_compacts_gives_what_reading_whole_gives(kinds: list[str], splits: list[int],
                                                                replaces: bool, exact: str) -> None:
    """Over the threshold (a compaction, then a state with a watermark: read whole) and after it, a session
    that reads on gives what one that always reads whole gives (output, figures, state, count cache), the
    caller keeping its list or replacing it with the result."""
    msgs = conversation(kinds)
    opts = Options(window=2_000, exact=exact, keep_trailing_results=True)
    warm_s, cold_s = ctxcompact.Session(), _whole()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Cleaner, "FIRST_TRY", 3)
        end, held = 0, list(msgs[:0])
        for n in splits:
            new = msgs[end: end + n]
            end += n
            held = [*held, *new] if replaces else msgs[:end]
            warm = ctxcompact.compact(held, session=warm_s, options=opts)
            cold = ctxcompact.compact(held, session=cold_s, options=opts)
            _same(warm, cold)
            assert _state(warm_s) == _state(cold_s) and _cache(warm_s) == _cache(cold_s)
            if replaces:
                held = list(warm.messages)


def test_a_result_in_a_later_append_and_an_edit_in_the_prefix() -> None:
    """The cases by hand: the read resumes after a settled part, a call's result comes in the next append
    (the part holding the call settles only after it), and an edited prefix is read whole (the kept read is
    not a prefix of it), then read on again."""
    msgs = conversation(["turn"] * 30 + ["call", "answer"] + ["turn"] * 25)
    assert "tool_calls" in msgs[121] and msgs[122]["role"] == "tool"
    opts = Options(window=1_000_000, exact="none", keep_trailing_results=True)
    s = ctxcompact.Session()
    reads, kept = [], []
    for end in (40, 80, 122, 123, 160, 200, len(msgs)):
        _same(ctxcompact.compact(msgs[:end], session=s, options=opts),
              ctxcompact.compact(msgs[:end], options=opts))
        reads.append(s._reread.read_from)
        kept.append(len(s._reread.records))
    # the first call is too short to decide the format (read whole, nothing kept), the second reads whole
    # and keeps its start, the third reads from there and keeps where the cleaner settled, and so on
    assert reads[:3] == [-1, -1, 0] and all(r > 0 for r in reads[3:]) and reads == sorted(reads)
    assert kept[2] < 122 <= kept[-1]  # (the part with the pending call settled once its result came)
    late = [*msgs, sys_msg("A late system note.")]  # (after the conversation began: the carry says so)
    _same(ctxcompact.compact(late, session=s, options=opts), ctxcompact.compact(late, options=opts))
    assert s._reread.read_from > 0
    edited = [msgs[0], _edited(msgs[1]), *msgs[2:]]
    _same(ctxcompact.compact(edited, session=s, options=opts), ctxcompact.compact(edited, options=opts))
    assert s._reread.read_from == -1  # read whole
    longer = [*edited, user("and now?")]
    _same(ctxcompact.compact(longer, session=s, options=opts), ctxcompact.compact(longer, options=opts))
    assert s._reread.read_from == 0  # (then from its start, kept by the whole read)


def test_an_anthropic_list_read_on_carries_where_the_conversation_began() -> None:
    """An alternating API: the cleaner's carry says the conversation began (else the tail's first message
    would open it: a user message made before an assistant one), with the system prompt given apart."""
    msgs: list[dict[str, Any]] = []
    for t in range(40):
        msgs += [{"role": "user", "content": f"question {t}"},
                 {"role": "assistant", "content": [{"type": "text", "text": f"answer {t}"}]}]
    s = ctxcompact.Session()
    opts = Options(window=1_000_000, exact="none", keep_trailing_results=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Cleaner, "FIRST_TRY", 3)
        given: dict[str, Any] = {"options": opts, "system": "Be brief.", "format": "anthropic"}
        for end in range(9, len(msgs) + 1, 7):
            _same(ctxcompact.compact(msgs[:end], session=s, **given), ctxcompact.compact(msgs[:end], **given))
    assert s._reread.read_from > 0


def test_a_call_that_fails_while_counting_leaves_the_next_call_exact() -> None:
    """A call that fails after its read moved on (the counter raising, an interrupt) and before it counted
    what it settled: the next call does not take the counts kept before as those of the records it reads
    on from (they are of another offset), and gives what a session reading whole gives, count cache too."""
    from ctxcompact import stream_totals

    msgs, opts, session, whole = _kept_and_whole(50, "none")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Cleaner, "FIRST_TRY", 3)
        for end in (21, 41, 61, 81):  # (the first two read whole: the format is detected, then kept)
            _same(ctxcompact.compact(msgs[:end], session=session, options=opts),
                  ctxcompact.compact(msgs[:end], session=whole, options=opts))
        kept = session._reread.at
        assert session._reread.tally is not None and session._reread.tally["at"] == kept
        with pytest.MonkeyPatch.context() as failing:
            failing.setattr(stream_totals, "count_records", _counter_fails)
            with pytest.raises(RuntimeError, match="counter failed"):
                ctxcompact.compact(msgs[:121], session=session, options=opts)
        assert session._reread.at > kept  # (the read moved on; its counts were not kept)
        for end in (121, 161, len(msgs)):
            _same(ctxcompact.compact(msgs[:end], session=session, options=opts),
                  ctxcompact.compact(msgs[:end], session=whole, options=opts))
            assert _state(session) == _state(whole) and _cache(session) == _cache(whole)
            assert session._reread.read_from > 0


def _records_seen(mp: pytest.MonkeyPatch) -> list[int]:
    """A counter of the records a call reads and counts: the lines parsed (``context.parse_record``) and the
    records handed to the counting and the figures (``count_records``, ``context_stats``, ``usage_points``,
    ``recorded_window``, ``system_tokens``, wherever they are called from)."""
    from ctxcompact import context, pipeline, result, stream_totals

    seen = [0]

    def counting(f: Any, records_at: int | None) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            seen[0] += 1 if records_at is None else len(args[records_at])
            return f(*args, **kwargs)
        return wrapper

    mp.setattr(context, "parse_record", counting(context.parse_record, None))
    for module in (pipeline, stream_totals, result):
        for name, at in (("count_records", 0), ("context_stats", 0), ("usage_points", 0),
                         ("recorded_window", 0), ("system_tokens", 1)):
            if hasattr(module, name):
                mp.setattr(module, name, counting(getattr(module, name), at))
    return seen


def test_a_call_s_work_does_not_grow_with_the_list() -> None:
    """The doubling check of the scans (tests/facts/test_linear_scans.py), on what a call reads and counts
    instead of its time (deterministic): a session grown to n, 2n, 4n, 8n messages by whole turns, then 8
    calls of a turn each; the records they parse and count must not double with the list (bound ×1.2 a
    doubling; reading or counting the whole list gives ×2)."""
    from facts.test_linear_scans import super_linear

    opts = Options(window=10_000_000, exact="none", keep_trailing_results=True)
    by_size: dict[int, float] = {}

    def work_at(k: int, _repeats: int) -> float:
        if k not in by_size:
            turns = k * 25  # (100 messages a k)
            msgs = conversation(["turn"] * (turns + 8))
            s = ctxcompact.Session()
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(Cleaner, "FIRST_TRY", 3)
                for t in range(1, turns + 1):
                    ctxcompact.compact(msgs[: 1 + 4 * t], session=s, options=opts)
                seen = _records_seen(mp)
                for t in range(turns + 1, turns + 9):
                    assert not ctxcompact.compact(msgs[: 1 + 4 * t], session=s, options=opts).compacted
                    assert s._reread.read_from > 0
            by_size[k] = seen[0] / 8
        return by_size[k]

    why = super_linear("records parsed and counted a call", 1.2, work_at)
    assert why is None, why
    assert by_size[1] > 0


def test_counts_kept_before_an_edit_are_never_taken_after_it() -> None:
    """An edit in the prefix starts the kept read over (read whole, its start kept): the counts kept before
    it go with it, even where a later read lands on the very offset they were kept at (an edit of the same
    length, then a call that fails while counting: its read moved on to that offset, no counts kept)."""
    from ctxcompact import stream_totals

    msgs, opts, session, whole = _kept_and_whole(30, "tiktoken")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Cleaner, "FIRST_TRY", 3)
        for end in (41, 81, 101):
            ctxcompact.compact(msgs[:end], session=session, options=opts)
        assert session._reread.tally is not None
        at = session._reread.tally["at"]
        edited = [msgs[0], _edited(msgs[1]), *msgs[2:]]  # (the same length: the lines' offsets stay)
        ctxcompact.compact(edited[:101], session=session, options=opts)  # (read whole, its start kept)
        with pytest.MonkeyPatch.context() as failing:
            failing.setattr(stream_totals, "count_records", _counter_fails)
            with pytest.raises(RuntimeError, match="counter failed"):
                ctxcompact.compact(edited[:101], session=session, options=opts)
        assert session._reread.at == at  # (read on from the start to where the first read had settled)
        for end in (105, 121):
            _same(ctxcompact.compact(edited[:end], session=session, options=opts),
                  ctxcompact.compact(edited[:end], session=whole, options=opts))
            assert session._reread.read_from > 0


def test_the_usage_of_kept_messages_calibrates_after_the_counter_changes() -> None:
    """Usage recorded in messages the session kept counts as measured on every later call: once the counter
    changes, the state forgets the requests it measured with the other one, and the list's usage is all that
    calibrates (every point of it, kept or read on)."""
    msgs = conversation(["turn", "usage"] * 30)
    session, whole = ctxcompact.Session(), _whole()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Cleaner, "FIRST_TRY", 3)
        for end, exact in ((41, "none"), (81, "none"), (121, "none"), (131, "tiktoken"), (141, "tiktoken")):
            opts = Options(window=1_000_000, exact=exact, keep_trailing_results=True)
            warm = ctxcompact.compact(msgs[:end], session=session, options=opts)
            _same(warm, ctxcompact.compact(msgs[:end], session=whole, options=opts))
            assert _state(session) == _state(whole)
        assert warm.estimate.calibrated.points > 2 and session._reread.read_from > 0

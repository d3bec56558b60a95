"""Observation masking (docs/guides/strategies.md#mask-and-prune-the-masking-rules, issue 10): the pure
masking rules, every format, state across runs, and the
tiered decision of ``--prune``."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers import SAMPLES, assistant, check_golden, jsonl, sys_msg, tool, user
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxcompact import api
from ctxcompact.budget import make_budget
from ctxcompact.errors import ExitCode
from ctxcompact.formats import get_format, read_transcript, write_transcript
from ctxcompact.model import TextBlock, ThinkingBlock, ToolCall, ToolResult, Transcript
from ctxcompact.options import Options
from ctxcompact.strategies.mask import (
    PLACEHOLDER_PREFIX,
    Masking,
    MaskParams,
    is_placeholder,
    mask_params,
    mask_transcript,
    reapply_masking,
)
from ctxcompact.tokens.heuristic import message_tokens, text_tokens
from ctxcompact.validate import cross_record_problems

DATA = Path(__file__).parent.parent / "data" / "mask"


# --------------------------------------------------------------------------------------------------
# builders: the same session (requests, one read_file call per turn, its result, an answer) per format


def body(t: int, chars: int) -> str:
    return (f"line {t}: def handle_{t}(request): return process(request)\n" * (chars // 40 + 1))[:chars]


def openai_session(sizes: list[int], names: list[str] | None = None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [sys_msg("You are a coding agent.")]
    for t, n in enumerate(sizes):
        name = names[t] if names else "read_file"
        out += [user(f"turn {t}: look at src/m{t}.py"),
                assistant(None, [(f"call_{t}", name, {"path": f"src/m{t}.py"})]),
                tool(f"call_{t}", body(t, n)),
                assistant(f"done with turn {t}")]
    return out


def anthropic_session(sizes: list[int]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    for t, n in enumerate(sizes):
        out += [{"role": "user", "content": f"turn {t}: look at src/m{t}.py"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": f"I should read m{t}.", "signature": f"sig{t}"},
                    {"type": "tool_use", "id": f"toolu_{t}", "name": "read_file",
                     "input": {"path": f"src/m{t}.py"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{t}",
                                              "content": body(t, n), "is_error": t == 0}]},
                {"role": "assistant", "content": [{"type": "text", "text": f"done with turn {t}"}]}]
    return out


def genai_session(sizes: list[int]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for t, n in enumerate(sizes):
        out += [{"role": "user", "parts": [{"text": f"turn {t}: look at src/m{t}.py"}]},
                {"role": "model", "parts": [{"function_call": {"id": f"fc_{t}", "name": "read_file",
                                                               "args": {"path": f"src/m{t}.py"}}}]},
                {"role": "user", "parts": [{"function_response": {"id": f"fc_{t}", "name": "read_file",
                                                                  "response": {"result": body(t, n)}}}]},
                {"role": "model", "parts": [{"text": f"done with turn {t}"}]}]
    return out


def claude_code_session(sizes: list[int]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    prev: str | None = None

    def line(kind: str, message: dict[str, Any]) -> None:
        nonlocal prev
        uid = f"00000000-0000-4000-8000-{len(out):012d}"
        out.append({"parentUuid": prev, "isSidechain": False, "sessionId": "s-1", "type": kind,
                    "uuid": uid, "timestamp": f"2026-01-01T00:00:{len(out) % 60:02d}.000Z",
                    "message": message})
        prev = uid

    for t, n in enumerate(sizes):
        line("user", {"role": "user", "content": f"turn {t}: look at src/m{t}.py"})
        line("assistant", {"role": "assistant", "content": [
            {"type": "thinking", "thinking": f"I should read m{t}.", "signature": f"sig{t}"}]})
        line("assistant", {"role": "assistant", "content": [
            {"type": "tool_use", "id": f"toolu_{t}", "name": "Read",
             "input": {"file_path": f"src/m{t}.py"}}]})
        line("user", {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{t}",
                                                   "content": body(t, n)}]})
        line("assistant", {"role": "assistant", "content": [{"type": "text", "text": f"done with turn {t}"}]})
    return out


def codex_session(sizes: list[int]) -> list[dict[str, Any]]:
    def item(payload: dict[str, Any]) -> dict[str, Any]:
        return {"timestamp": "2026-01-01T00:00:00.000Z", "type": "response_item", "payload": payload}

    out: list[dict[str, Any]] = [{"timestamp": "2026-01-01T00:00:00.000Z", "type": "session_meta",
                                  "payload": {"id": "s-1", "timestamp": "2026-01-01T00:00:00.000Z",
                                              "cwd": "/w", "instructions": "You are a coding agent."}}]
    for t, n in enumerate(sizes):
        out += [item({"type": "message", "role": "user",
                      "content": [{"type": "input_text", "text": f"turn {t}: look at src/m{t}.py"}]}),
                item({"type": "reasoning", "encrypted_content": None,
                      "summary": [{"type": "summary_text", "text": f"I should read m{t}."}]}),
                item({"type": "function_call", "name": "shell", "call_id": f"call_{t}",
                      "arguments": orjson.dumps({"command": ["cat", f"src/m{t}.py"]}).decode()}),
                item({"type": "function_call_output", "call_id": f"call_{t}", "output": body(t, n)}),
                item({"type": "message", "role": "assistant",
                      "content": [{"type": "output_text", "text": f"done with turn {t}"}]})]
    return out


BUILDERS: dict[str, Callable[[list[int]], list[dict[str, Any]]]] = {
    "openai": openai_session, "anthropic": anthropic_session, "genai": genai_session,
    "claude-code": claude_code_session, "codex": codex_session,
}


def load(objs: list[dict[str, Any]], fmt: str = "auto") -> Transcript:
    return read_transcript(jsonl(objs), fmt).transcript


def heur(t: Transcript) -> list[int]:
    return [message_tokens(r.message) if r.message is not None else 0 for r in t.records]


def results(t: Transcript) -> list[ToolResult]:
    return [b for r in t.records if r.message is not None for b in r.message.blocks
            if isinstance(b, ToolResult)]


def calls(t: Transcript) -> list[ToolCall]:
    return [b for r in t.records if r.message is not None for b in r.message.tool_calls()]


def masked_ids(t: Transcript) -> list[str]:
    return [r.call_id for r in results(t) if is_placeholder(r)]


def params(**kw: Any) -> MaskParams:
    base: dict[str, Any] = {"keep_results": 3, "protect_tokens": 0, "min_savings": 0}
    base.update(kw)
    return MaskParams(**base)


# --------------------------------------------------------------------------------------------------
# the rules


def test_keep_results_boundary() -> None:
    t = load(openai_session([400] * 6))
    for keep, expect in [(0, 6), (3, 3), (5, 1), (6, 0), (10, 0)]:
        _, entries, _ = mask_transcript(t, heur(t), params(keep_results=keep))
        assert [e.call_id for e in entries] == [f"call_{i}" for i in range(expect)], keep


def test_protect_tokens_boundary_counts_the_crossing_result_as_outside() -> None:
    # each result is 400 chars = exactly 100 heuristic tokens (a tool message counts only its content)
    t = load(openai_session([400] * 6))
    tool_counts = [message_tokens(r.message) for r in t.records if r.message and r.message.tool_results()]
    assert tool_counts == [100] * 6
    _, entries, _ = mask_transcript(t, heur(t), params(keep_results=0, protect_tokens=300))
    assert [e.call_id for e in entries] == ["call_0", "call_1", "call_2"]  # newest 3 = 300 tokens protected
    _, entries, _ = mask_transcript(t, heur(t), params(keep_results=0, protect_tokens=299))
    assert [e.call_id for e in entries] == ["call_0", "call_1", "call_2", "call_3"]
    # either rule protects: keep 1 and protect 300 still protects three
    _, entries, _ = mask_transcript(t, heur(t), params(keep_results=1, protect_tokens=300))
    assert len(entries) == 3


def test_exclude_tools_never_cleared_and_not_counted() -> None:
    names = ["skill", "read_file", "read_file", "skill", "read_file", "read_file"]
    t = load(openai_session([400] * 6, names))
    _, entries, _ = mask_transcript(t, heur(t), params(keep_results=2, exclude_tools=frozenset({"skill"})))
    # the two skill results are not at stake: the 2 newest read_file results (4, 5) are kept
    assert [e.call_id for e in entries] == ["call_1", "call_2"]


def test_placeholder_names_tool_argument_and_size() -> None:
    t = load(openai_session([12_345, 400, 400, 400]))
    out, entries, _ = mask_transcript(t, heur(t), params())
    assert len(entries) == 1
    text = results(out)[0].content[0]
    assert isinstance(text, TextBlock)
    assert text.text == "[tool result cleared: read_file(src/m0.py), 12,345 chars; call again to see it]"
    assert entries[0].placeholder == text.text
    assert entries[0].chars == 12_345 and entries[0].tool == "read_file"


def test_pairs_and_other_messages_stay_verbatim_and_input_untouched() -> None:
    t = load(openai_session([2000] * 5))
    before = [r.raw for r in t.records]
    out, entries, _ = mask_transcript(t, heur(t), params())
    assert len(out.records) == len(t.records)
    assert [c.id for c in calls(out)] == [c.id for c in calls(t)]
    assert [r.call_id for r in results(out)] == [r.call_id for r in results(t)]
    for old, new in zip(t.records, out.records, strict=True):
        if new is not old:  # only the two old tool messages changed, and they are marked for rewriting
            assert new.dirty and old.message is not None and old.message.is_tool_result_only
            assert new.message is not None and new.message.extra == old.message.extra
        # untouched records are the very same objects: written back from their raw bytes
    assert [r.raw for r in t.records] == before and not any(r.dirty for r in t.records)
    assert len(entries) == 2


def test_tokens_freed_matches_the_heuristic() -> None:
    sizes = [4000, 3001, 400, 400, 400]
    t = load(openai_session(sizes))
    out, entries, freed = mask_transcript(t, heur(t), params())
    expect = sum(math.ceil(n / 4) - text_tokens(e.placeholder)
                 for n, e in zip(sizes[:2], entries, strict=True))
    assert freed == expect
    assert sum(heur(t)) - sum(heur(out)) == freed


def test_small_results_are_not_replaced_by_a_longer_placeholder() -> None:
    t = load(openai_session([20, 20, 5000, 400, 400, 400]))
    _, entries, _ = mask_transcript(t, heur(t), params())
    assert [e.call_id for e in entries] == ["call_2"]


def test_edges_empty_one_record_unicode_missing_call() -> None:
    empty = Transcript("openai", [])
    assert mask_transcript(empty, [], params(keep_results=0)) == (empty, [], 0)
    one = load([user("hi")])
    assert mask_transcript(one, heur(one), params(keep_results=0))[1] == []
    objs = openai_session([3000, 400, 400, 400])
    objs[3]["content"] = "日本語" * 1000  # 3,000 characters (code points), 9,000 bytes
    uni = load(objs)
    out, entries, _ = mask_transcript(uni, heur(uni), params())
    assert entries[0].chars == 3000 and "3,000 chars" in entries[0].placeholder
    assert masked_ids(read_transcript(b"".join(write_transcript(out))).transcript) == ["call_0"]
    # a result whose call is missing still gets a placeholder naming its tool
    orphan = load([user("x"), {"role": "tool", "tool_call_id": "gone", "name": "grep", "content": "x" * 900},
                   assistant("ok")], "openai")
    _, entries, _ = mask_transcript(orphan, heur(orphan), params(keep_results=0))
    assert entries[0].placeholder.startswith(f"{PLACEHOLDER_PREFIX}grep, 900 chars")
    with pytest.raises(ValueError):
        mask_transcript(orphan, [1], params())


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(min_value=0, max_value=3000), max_size=12),
       keep=st.integers(min_value=0, max_value=5), protect=st.integers(min_value=0, max_value=2000))
def test_masking_is_idempotent(sizes: list[int], keep: int, protect: int) -> None:
    t = load(openai_session(sizes))
    p = params(keep_results=keep, protect_tokens=protect)
    once, entries, freed = mask_transcript(t, heur(t), p)
    twice, again, freed2 = mask_transcript(once, heur(once), p)
    assert again == [] and freed2 == 0
    assert [r.message for r in twice.records] == [r.message for r in once.records]
    # and the newest `keep` results are never touched
    kept = results(t)[len(results(t)) - keep:] if keep else []
    assert not any(r.call_id in {e.call_id for e in entries} for r in kept)
    assert freed >= 0


def test_defaults_scale_with_the_window() -> None:
    for window, protect, min_savings in [(8_000, 1_600, 400), (32_000, 6_400, 1_600),
                                         (200_000, 40_000, 10_000), (1_000_000, 40_000, 20_000)]:
        p = mask_params(Options(), make_budget(window, None, None))
        assert (p.protect_tokens, p.min_savings, p.keep_results) == (protect, min_savings, 3)
    p = mask_params(Options(protect_tokens=0, min_savings=7, exclude_tools=("a",)),
                    make_budget(8000, None, None))
    assert (p.protect_tokens, p.min_savings, p.exclude_tools) == (0, 7, frozenset({"a"}))


# --------------------------------------------------------------------------------------------------
# every format: placeholders, pairs, a valid transcript of the output format


@pytest.mark.parametrize("fmt", list(BUILDERS))
def test_every_format_round_trips_valid(fmt: str) -> None:
    t = load(BUILDERS[fmt]([3000, 2500, 400, 400, 400]))
    assert t.format == fmt
    out, entries, freed = mask_transcript(t, heur(t), params())
    assert [e.call_id for e in entries] == [r.call_id for r in results(t)[:2]] and freed > 0
    target = get_format(fmt).fallback if not get_format(fmt).writable else fmt
    data = b"".join(write_transcript(out))
    back = read_transcript(data, target, schema=True).transcript  # strict: raises on any schema problem
    assert cross_record_problems(back) == []
    assert [c.id for c in calls(back)] == [c.id for c in calls(t)]
    assert masked_ids(back) == [e.call_id for e in entries]  # the placeholders survive writing and reading
    # what is not masked is written as it was
    assert [r.text() for r in results(back)[2:]] == [r.text() for r in results(t)[2:]] or fmt == "genai"
    if fmt == "anthropic":  # is_error kept on a cleared result
        assert results(back)[0].is_error is True
    # masking what was read back changes nothing
    assert mask_transcript(back, heur(back), params())[1] == []


@pytest.mark.parametrize("path", sorted(SAMPLES.glob("*-session.jsonl")), ids=lambda p: p.name)
def test_samples_stay_valid_with_everything_masked(path: Path) -> None:
    t = read_transcript(path).transcript
    out, entries, _ = mask_transcript(t, heur(t), params(keep_results=0, clear_thinking=True))
    fmt = get_format(t.format)
    target = fmt.name if fmt.writable else fmt.fallback
    back = read_transcript(b"".join(write_transcript(out)), target).transcript
    assert cross_record_problems(back) == []
    assert sorted(c.id for c in calls(back)) == sorted(c.id for c in calls(t))
    assert set(masked_ids(back)) == {e.call_id for e in entries}


# --------------------------------------------------------------------------------------------------
# --clear-thinking


def thinking_of(t: Transcript) -> list[ThinkingBlock]:
    return [b for r in t.records if r.message is not None for b in r.message.blocks
            if isinstance(b, ThinkingBlock)]


def test_clear_thinking_removes_old_blocks_keeps_the_latest_turn_signed() -> None:
    t = load(anthropic_session([400] * 4))
    out, _, freed = mask_transcript(t, heur(t), params(keep_results=10, clear_thinking=True))
    left = thinking_of(out)
    assert [b.signature for b in left] == ["sig3"]  # only the latest turn's thinking, intact
    assert freed > 0
    lines = [orjson.loads(x) for x in write_transcript(out)]
    # the old assistant messages keep their tool_use, without a thinking block (none left unsigned or empty)
    kinds = [[b["type"] for b in ln["content"]] for ln in lines if ln["role"] == "assistant"
             and isinstance(ln["content"], list) and any(b["type"] == "tool_use" for b in ln["content"])]
    assert kinds == [["tool_use"]] * 3 + [["thinking", "tool_use"]]
    # off by default
    assert len(thinking_of(mask_transcript(t, heur(t), params(keep_results=0))[0])) == 4


def test_clear_thinking_drops_item_lines_in_split_formats() -> None:
    t = load(BUILDERS["codex"]([400] * 3))
    out, _, _ = mask_transcript(t, heur(t), params(keep_results=10, clear_thinking=True))
    assert len(thinking_of(out)) == 1
    assert len(out.records) == len(t.records) - 2
    assert [c.id for c in calls(out)] == [c.id for c in calls(t)]


def test_clear_thinking_leaves_claude_code_thinking_alone() -> None:
    # each thinking line is a link of the parentUuid chain, its signature what the API returned
    t = load(BUILDERS["claude-code"]([400] * 3))
    out, _, _ = mask_transcript(t, heur(t), params(keep_results=10, clear_thinking=True))
    assert len(thinking_of(out)) == len(thinking_of(t)) == 3
    assert all(a is b for a, b in zip(out.records, t.records, strict=True))


# --------------------------------------------------------------------------------------------------
# reapply_masking


def test_reapply_replaces_by_call_id_idempotently() -> None:
    t = load(openai_session([3000] * 5))
    out, entries, _ = mask_transcript(t, heur(t), params())
    masking = Masking(results=list(entries))
    again = reapply_masking(t.records, masking, "openai")
    assert [r.message for r in again] == [r.message for r in out.records]
    assert all(a is b for a, b in zip(reapply_masking(again, masking, "openai"), again, strict=True))
    changed = [r for r, o in zip(again, t.records, strict=True) if r is not o]
    assert len(changed) == 2 and all(r.dirty for r in changed)
    assert reapply_masking([], masking, "openai") == []
    unchanged = reapply_masking(t.records, Masking(), "openai")
    assert all(a is b for a, b in zip(unchanged, t.records, strict=True))


def test_reapply_ignores_usage_measured_before_the_masking() -> None:
    objs = openai_session([3000] * 4)
    objs[2]["usage"] = {"prompt_tokens": 5000, "completion_tokens": 10}
    t = load(objs)
    assert t.records[2].usage is not None
    again = reapply_masking(t.records, Masking(input_records=3), "openai")
    assert again[2].usage is None and not again[2].dirty  # still written from its raw line
    assert reapply_masking(t.records, Masking(input_records=2), "openai")[2].usage is not None


# --------------------------------------------------------------------------------------------------
# through api.run / api.estimate


def opts(**kw: Any) -> Options:
    base: dict[str, Any] = {"window": 8_000, "exact": "none", "keep_results": 3}
    base.update(kw)
    return Options(**base)


def lines_of(result: api.RunResult) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in result.lines()]


def test_below_the_threshold_nothing_happens(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"
    log.write_bytes(jsonl(openai_session([400] * 3)))
    r = api.run(log, opts(strategy="mask"), output=tmp_path / "o.jsonl")
    assert not r.compacted and r.outcome is None
    assert (tmp_path / "o.jsonl").read_bytes() == log.read_bytes()
    assert api.estimate(log, opts(strategy="mask")).extras["tier"] == "none"


def test_mask_strategy_masks_records_state_and_keeps_calibration(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"
    objs = openai_session([6000] * 4 + [400] * 3)  # 6,000 heuristic tokens of old output, 300 recent
    objs[-1]["usage"] = {"prompt_tokens": 9000, "completion_tokens": 5}  # the last answer's request
    log.write_bytes(jsonl(objs))
    est = api.estimate(log, opts(strategy="mask"))
    assert est.would_compact and est.extras["tier"] == "mask" and est.extras["maskable_tokens"] > 5000
    assert est.projected_tokens_after == est.extras["tokens_after_mask"]  # the masked context, not a summary
    r = api.run(log, opts(strategy="mask"), output=tmp_path / "o.jsonl")
    assert r.compacted and r.outcome.tier == "mask" and r.outcome.exit_code == ExitCode.OK
    assert r.outcome.tokens_after < r.estimate.budget.threshold
    out = lines_of(r)
    assert [o["role"] for o in out] == [o["role"] for o in objs]  # nothing dropped, nothing added
    cleared = [o["tool_call_id"] for o in out
               if o["role"] == "tool" and o["content"].startswith(PLACEHOLDER_PREFIX)]
    assert cleared == ["call_0", "call_1", "call_2", "call_3"]
    state = api.load_state(Path(str(log) + ".ctxstate.json"))
    assert state is not None and state.section(Masking) is not None
    assert [e.call_id for e in state.section(Masking).results] == cleared
    assert state.watermark == 0 and state.summary is None
    assert state.compactions[-1].strategy == "mask" and state.compactions[-1].tier == "mask"
    # the factor measured from the transcript's usage is kept (not reset as after a summary)
    factor = r.estimate.calibrated.factor
    assert factor > 1.0 and state.calibration.factor == pytest.approx(factor, rel=1e-5)
    # the next run ignores the pre-masking usage and uses the kept factor
    nxt = api.estimate(log, opts(strategy="mask"))
    assert "transcript usage" not in nxt.calibrated.source and nxt.calibrated.factor == pytest.approx(factor)
    assert not nxt.would_compact


def test_mask_alone_not_enough_gives_exit_5_naming_prune(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"
    log.write_bytes(jsonl(openai_session([3000, 9000, 9000, 9000])))  # the 3 kept results are too big
    r = api.run(log, opts(strategy="mask"), output=tmp_path / "o.jsonl")
    assert r.outcome.exit_code == ExitCode.DOES_NOT_FIT and "--prune" in r.outcome.warning
    assert r.outcome.compacted  # what could be cleared was cleared
    nothing = tmp_path / "n.jsonl"
    nothing.write_bytes(jsonl([user("x" * 40_000), assistant("ok")]))
    r = api.run(nothing, opts(strategy="mask"), output=tmp_path / "o2.jsonl")
    assert not r.compacted and r.outcome.exit_code == ExitCode.DOES_NOT_FIT and "--prune" in r.outcome.warning
    assert r.outcome.warning and "nothing masked" in r.outcome.warning


def test_exit_5_reaches_the_run_result(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"
    log.write_bytes(jsonl(openai_session([3000, 9000, 9000, 9000])))
    r = api.run(log, opts(strategy="mask"), output=tmp_path / "o.jsonl")
    assert r.exit_code == ExitCode.DOES_NOT_FIT and any("--prune" in w for w in r.warnings)


@pytest.mark.parametrize("case", ["mask suffices", "mask then summarize", "nothing to mask"])
def test_prune_tiers(tmp_path: Path, case: str) -> None:
    sizes = {"mask suffices": [6000] * 4 + [400] * 3, "mask then summarize": [6000, 9000, 9000, 9000],
             "nothing to mask": [400] * 3}[case]
    objs = openai_session(sizes)
    if case == "nothing to mask":
        objs.insert(1, user("y" * 30_000))
    log = tmp_path / "s.jsonl"
    log.write_bytes(jsonl(objs))
    tier = {"mask suffices": "mask", "mask then summarize": "summary", "nothing to mask": "summary"}[case]
    est = api.estimate(log, opts(prune=True))
    assert est.extras["tier"] == tier and "projected_tokens_after" not in est.extras  # (the report's own)
    if tier == "mask":  # run would write the masked context, not a summary: that is the projection
        assert est.projected_tokens_after == est.extras["tokens_after_mask"] < est.calibrated.tokens
    r = api.run(log, opts(prune=True), output=tmp_path / "o.jsonl")
    assert r.compacted and r.outcome.tier == tier
    state = api.load_state(Path(str(log) + ".ctxstate.json"))
    assert state is not None and state.compactions[-1].tier == tier
    assert state.compactions[-1].strategy == "threshold"
    if tier == "mask":
        assert state.summary is None and state.section(Masking) and r.outcome.summary is None
        assert len(lines_of(r)) == len(objs)
    else:
        assert state.summary is not None and state.section(Masking) is None and state.watermark == len(objs)
        assert len(lines_of(r)) == 3  # system, summary, continuation
    # without --prune the default threshold strategy summarizes whatever the case
    plain = api.run(log, opts(use_state=False), dry_run=True)
    assert plain.outcome.tier is None and plain.summary is not None


def test_state_carried_across_five_runs_on_a_growing_transcript(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"
    objs = openai_session([3000] * 6)
    log.write_bytes(jsonl(objs))
    o = opts(strategy="mask")  # 8k window: every run is over the threshold again and masks
    ever_masked: list[str] = []
    for run in range(5):
        r = api.run(log, o, output=tmp_path / "o.jsonl")
        out = lines_of(r)
        by_id = {x["tool_call_id"]: x["content"] for x in out if x["role"] == "tool"}
        # every id masked earlier is still masked, with the same placeholder: nothing re-expands
        state = api.load_state(Path(str(log) + ".ctxstate.json"))
        assert state is not None
        masking = state.section(Masking)
        recorded = {e.call_id: e.placeholder for e in (masking.results if masking else [])}
        for cid in ever_masked:
            assert by_id[cid] == recorded[cid] and by_id[cid].startswith(PLACEHOLDER_PREFIX), (run, cid)
        ever_masked = [cid for cid, text in by_id.items() if text.startswith(PLACEHOLDER_PREFIX)]
        assert set(ever_masked) == set(recorded)
        # the newest three results are always verbatim
        newest = [x for x in out if x["role"] == "tool"][-3:]
        assert not any(x["content"].startswith(PLACEHOLDER_PREFIX) for x in newest)
        assert o.window is not None and r.tokens_after <= o.window
        assert r.outcome is not None and r.outcome.tokens_after < r.estimate.budget.threshold
        assert r.exit_code == ExitCode.OK
        # the agent works on: three more turns of large tool output
        n = len(objs) // 4
        more = openai_session([3000] * (n + 3))[1 + 4 * n:]
        objs += more
        log.write_bytes(jsonl(objs))
    assert len(ever_masked) >= 8
    state = api.load_state(Path(str(log) + ".ctxstate.json"))
    assert state is not None and [c.tier for c in state.compactions] == ["mask"] * len(state.compactions)
    assert len(state.compactions) == 5


def test_estimate_json_through_the_cli_keys(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"
    log.write_bytes(jsonl(openai_session([6000] * 4 + [400] * 3)))
    d = api.estimate(log, opts(strategy="mask")).to_json()
    assert d["strategy"] == "mask" and d["tier"] == "mask"
    # what masking frees: four 6,000-char results become placeholders
    assert d["maskable_tokens"] == 4 * 1500 - sum(
        text_tokens(f"[tool result cleared: read_file(src/m{i}.py), 6,000 chars; call again to see it]")
        for i in range(4))
    # the threshold strategy's estimate says the same (what --prune would free), without mask's own keys
    plain = api.estimate(log, opts()).to_json()
    assert (plain["maskable_tokens"], plain["maskable_results"]) == (d["maskable_tokens"], 4)
    assert "tier" not in plain


def test_fixture_files_mask_to_their_golden_output() -> None:
    src = DATA / "anthropic_in.jsonl"
    t = read_transcript(src).transcript
    out, _, _ = mask_transcript(t, heur(t), params(keep_results=1, clear_thinking=True))
    check_golden(b"".join(write_transcript(out)), DATA / "anthropic_out.jsonl")


def test_simulated_tool_chain_needs_fewer_summaries_with_prune() -> None:
    from ctxcompact.devtools.prune import simulate_with_pruning
    from ctxcompact.devtools.scenarios import select

    (row,) = simulate_with_pruning(select(["8k_ToolChain_MultipleRoundtrips"]))
    # a chain of tool round trips: most compactions are old tool output, which the mask tier clears alone
    assert row.failures_plain == [] and row.failures_prune == []  # no overflow, no loop either way
    assert row.masks_prune > 0 and row.summaries_prune < row.summaries_plain
    assert row.compactions_avoided == row.summaries_plain - row.summaries_prune
    assert 0 < row.summarized_tokens_prune < row.summarized_tokens_plain

"""What a sliding-window event records in the state (docs/guides/strategies.md#sliding-window): the
invocations it covers, by number and, where
the format has them, by id."""

from __future__ import annotations

from pathlib import Path

import orjson
from helpers import coding_session, jsonl, sys_msg, user

from ctxcompact import api
from ctxcompact.state import State
from ctxcompact.strategies.sliding_window_state import Event, WindowEvents


def events_of(state: State) -> list[Event]:
    own = state.section(WindowEvents)
    return own.events if own is not None else []


def test_events_record_the_invocations_they_cover(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"
    log.write_bytes(
        jsonl([sys_msg("You are a coding agent."), *coding_session(7, tool_chars=6000), user("what next?")])
    )
    opts = api.Options(
        window=200_000, exact="none", strategy="sliding-window", invocation_threshold=3, overlap=1
    )
    result = api.run(log, opts, output=tmp_path / "o.jsonl")
    assert result.compacted
    state = api.load_state(Path(str(log) + ".ctxstate.json"))
    assert state is not None and len(events_of(state)) == 2
    first, second = events_of(state)
    # θ=3, ω=1: invocations 1-3, then 3-6 (ADK's documented rule)
    assert (first.first_invocation, first.last_invocation) == (1, 3)
    assert (second.first_invocation, second.last_invocation) == (3, 6)
    assert first.invocation_ids is None  # openai lines carry no invocation id
    reloaded = api.load_state(Path(str(log) + ".ctxstate.json"))
    assert reloaded is not None and reloaded.to_json()["events"][1]["last_invocation"] == 6


def test_codex_log_sets_the_window_when_none_is_given() -> None:
    from helpers import SAMPLES

    sample = SAMPLES / "codex-session.jsonl"
    report = api.estimate(sample, api.Options(exact="none", use_state=False))
    assert report.budget.window == 258_400  # token_count.info.model_context_window in the sample
    assert report.budget.window_source.startswith("transcript")
    given = api.estimate(sample, api.Options(exact="none", use_state=False, window=32_000))
    assert given.budget.window == 32_000


def test_simulate_prune_compares_summary_only_with_pruning() -> None:
    from click.testing import CliRunner

    from ctxcompact.cli import cli

    result = CliRunner().invoke(cli, ["simulate", "--prune", "--only", "8k_RepeatedCompactions", "--json"])
    assert result.exit_code == 0, result.output
    (row,) = orjson.loads(result.output)
    assert row["name"] == "8k_RepeatedCompactions"
    assert row["masks_prune"] > 0  # the mask tier acted
    assert row["summaries_prune"] < row["summaries_plain"]  # and saved summaries
    assert row["failures_plain"] == [] and row["failures_prune"] == []


def test_token_trigger_with_nothing_before_the_first_request_is_not_a_crash(tmp_path: Path) -> None:
    """A real Claude Code log (one request with its tool calls) in a tiny window: the token trigger fires
    but no invocation precedes the split point; run must say so, not crash. (Its older calls can be compacted
    inside the request's own invocation now, but its 25,000-token hidden prompt alone is over the window.)"""
    from helpers import REPO

    log = REPO / "tests" / "data" / "claude-code" / "spotter-short.jsonl"
    messages: list[str] = []
    opts = api.Options(
        window=4000, strategy="sliding-window", invocation_threshold=1, overlap=0, use_state=False
    )
    result = api.run(log, opts, warn=messages.append)
    assert not result.compacted and result.exit_code == 5
    assert any("does not fit the 4,000-token window" in w and "hidden prompt" in w for w in result.warnings)

"""`eval` measures the handoff by the rules `run` follows (docs/guides/eval.md#the-handoff): one
implementation of the request's status, the work in flight and earlier summaries (``facts.handoff``,
``facts.earlier``), and every figure issue 23 asks for in one eval: the in-flight result, the request's
status, earlier summaries carried, the summary's tokens against its budget, probes per category for the
compaction and both baselines, and the recall after each compaction of a replay, whose recorded bills for the
uncompacted session are named, not learned."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxcompact import api
from ctxcompact.evaluate import handoff as eval_handoff
from ctxcompact.evaluate.core import original_records, read_input
from ctxcompact.evaluate.probes import load_probes
from ctxcompact.evaluate.scores import Compared
from ctxcompact.facts import earlier, handoff
from ctxcompact.facts.text import latest_request_record
from ctxcompact.model import Transcript

DATA = Path(__file__).resolve().parents[1] / "data"
REAL = sorted(p for d in ("claude-code", "codex", "genai", "openai", "anthropic")
              for p in (DATA / d).glob("*.jsonl"))


@pytest.mark.parametrize("path", REAL, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_eval_reads_the_handoff_by_runs_own_rules(path: Path) -> None:
    opts = api.Options()
    _, data, fmt = read_input(path, opts)
    recs = original_records(data, fmt, opts)
    status, answer = eval_handoff.request_status(recs)
    if latest_request_record(recs) is None:
        assert status is None
    else:
        facts = handoff.request_status(recs)
        assert (status, answer) == (facts.status, facts.answer)
    calls, _ = eval_handoff.in_flight(recs)
    assert bool(calls) == (handoff.in_flight_start(recs) is not None)
    # earlier summaries: what the summarizer carries (facts.earlier) is what eval counts
    c = Compared(recs, Transcript(fmt, recs, str(path)), "", "", [])
    score = eval_handoff.earlier_summaries_score(c)
    assert score["found"] == (len([s for s in earlier.earlier_summaries(recs) if not s.opaque])
                              + len(earlier.opaque_records(recs)))


def test_one_eval_shows_every_handoff_figure() -> None:
    """A real Claude Code session with its probe set, at the window of its set, and replayed."""
    log = DATA / "claude-code" / "spotter-subagent-command.jsonl"
    probes = load_probes(DATA / "probes" / "spotter-subagent-command.jsonl")
    opts = api.Options(window=33_000)
    r = api.evaluate(str(log), opts, probes, calibration=False)
    assert r["compacted"]
    h = r["handoff"]
    assert h["request"]["status"] in ("answered", "in_progress", "interrupted")
    assert set(h["in_flight"]) >= {"open", "present"}
    assert set(h["earlier_summaries"]) >= {"found", "carried", "opaque", "sources", "line_share"}
    sb = r["summary_budget"]
    assert sb["tokens"] > 0 and sb["within"] == (sb["tokens"] <= sb["budget"])
    for side in (r, r["baseline"], r["baseline_head"]):
        cats = side["probes"]["by_category"]
        assert sum(c["total"] for c in cats.values()) == len(probes)
    rep = api.replay(log, api.Options(window=34_000), probes)
    assert rep["curve"] and all({"answerable", "found", "in_flight", "rules_kept", "latest_request_kept"}
                                <= set(p) for p in rep["curve"])
    assert [p["compaction"] for p in rep["curve"]] == list(range(1, len(rep["curve"]) + 1))


def test_a_replay_names_the_bills_of_the_uncompacted_session() -> None:
    """The log fits a 50,000 window; its bills after the replay's compaction are the original session's
    (larger than what was written): not learned, so it compacts once and stays in the window."""
    log = DATA / "claude-code" / "spotter-subagent-command.jsonl"
    rep = api.replay(log, api.Options(window=50_000))
    assert 1 <= rep["compactions"] <= 2
    assert rep["max_tokens"] <= rep["window"]
    assert rep["ignored_usage"] and all(isinstance(line, int) and line > 0 for line in rep["ignored_usage"])
    # without a compaction nothing is ignored
    assert api.replay(log, api.Options(window=400_000))["ignored_usage"] == []


@pytest.mark.parametrize("name", ["spotter-compact-excerpt", "spotter-auto-compact-excerpt-a"])
def test_claude_codes_own_summary_is_carried_at_the_clients_window(name: str) -> None:
    """Claude Code's own 16k/15.7k-character compact summaries, at Claude Code's 200,000-token window with
    the threshold lowered so the excerpt compacts: carried whole, the summary within its budget."""
    r = api.evaluate(str(DATA / "claude-code" / f"{name}.jsonl"),
                     api.Options(window=200_000, threshold="40000"), calibration=False)
    assert r["compacted"]
    e = r["handoff"]["earlier_summaries"]
    assert e["found"] == e["carried"] == 1 and e["line_share"] == 1.0 and e["sources"] == ["claude-code"]
    assert r["summary_budget"]["within"]


def test_a_budget_smaller_than_the_earlier_summary_keeps_its_ends() -> None:
    """At a 50,000 window the summary's budget (5,000 tokens) is smaller than the 16,162-character summary
    alone: it is shortened from its middle (its task and its next step kept), within its budget."""
    r = api.evaluate(str(DATA / "claude-code" / "spotter-compact-excerpt.jsonl"), api.Options(window=50_000),
                     calibration=False)
    assert r["compacted"] and r["summary_budget"]["within"]
    assert r["handoff"]["earlier_summaries"]["line_share"] >= 0.8

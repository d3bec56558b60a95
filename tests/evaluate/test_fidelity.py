"""The probe sets (tests/data/probes) run through `eval`: what must hold whatever the summary's tuning (the
rules and the latest request verbatim, eval scoring exactly what `run` writes, the replay staying in its
window), and the parts of eval that read the handoff (in flight, request status, earlier summaries, the
head-of-each-message baseline) on synthetic edges. The figures themselves are bench/fidelity.py's."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers import assistant, jsonl, sys_msg, tool, user

from ctxcompact import api
from ctxcompact.errors import InputError
from ctxcompact.evaluate.baseline import HEAD_CHARS, heads
from ctxcompact.evaluate.handoff import in_flight, in_flight_score, request_status
from ctxcompact.evaluate.probes import CATEGORIES, load_probes
from ctxcompact.evaluate.scores import compare
from ctxcompact.facts.rules import client_file_records
from ctxcompact.formats import get_format, read_transcript
from ctxcompact.model import Transcript, token_text

DATA = Path(__file__).parent.parent / "data"
SETS: list[dict[str, Any]] = json.loads((DATA / "probes" / "sets.json").read_text(encoding="utf-8"))["sets"]
IDS = [Path(s["log"]).stem for s in SETS]


def _eval(entry: dict[str, Any], log: Path | None = None) -> dict[str, Any]:
    probes = load_probes(DATA / "probes" / entry["probes"])
    opts = api.Options(window=entry["window"])
    result: dict[str, Any] = api.evaluate(str(log or DATA / entry["log"]), opts, probes, calibration=False)
    return result


def _transcript(objs: list[dict[str, Any]]) -> Transcript:
    return read_transcript(io.BytesIO(jsonl(objs)), "openai").transcript


# ----------------------------------------------------------------------------------------- the probe sets


def test_the_probe_sets_cover_eight_real_logs_half_of_them_new_claude_code_and_codex() -> None:
    sources = {p.parent.name: p.read_text(encoding="utf-8") for p in DATA.glob("*/SOURCES.md")}
    assert len(SETS) >= 8
    new = [s for s in SETS if not s["seen"] and s["log"].split("/")[0] in ("claude-code", "codex")]
    assert len(new) >= len(SETS) / 2
    for s in SETS:
        sub, name = s["log"].split("/")
        assert f"`{name}`" in sources[sub], f"{s['log']} has no source and licence"
        probes = load_probes(DATA / "probes" / s["probes"])
        assert len(probes) >= 4 and all(p.category in CATEGORIES for p in probes)
        # every probe's answer is in the log: a probe that can never be found measures nothing
        log = read_transcript(io.BytesIO((DATA / s["log"]).read_bytes()), "auto").transcript
        text = "\n".join(t for r in log.records if r.message is not None for t in token_text(r.message)[0])
        assert [p.label for p in probes if not p.found_in(text)] == []


@pytest.mark.parametrize("entry", SETS, ids=IDS)
def test_one_compaction_keeps_the_rules_and_the_latest_request_verbatim(entry: dict[str, Any]) -> None:
    r = _eval(entry)
    assert r["compacted"] and r["fits"] and r["valid"], r["warnings"]
    assert r["rules"]["kept_verbatim"] == r["rules"]["found"], r["rules"]["lost"]
    assert r["latest_request"]["kept_verbatim"] in (True, None)
    assert r["probes"]["found"] == sum(c["found"] for c in r["probes"]["by_category"].values())
    # the baselines had the same budget (or less: truncation stops at the first unit that fits)
    assert r["baseline"]["tokens"] <= r["tokens"]["after"]
    assert r["baseline_head"]["tokens"] <= r["tokens"]["after"]
    # the summary fits its budget as the window counts it (its own counter and calibration)
    assert r["summary_budget"]["within"], r["summary_budget"]


@pytest.mark.parametrize("entry", SETS, ids=IDS)
def test_eval_scores_exactly_what_run_writes(entry: dict[str, Any], tmp_path: Path) -> None:
    """Each probe eval finds is in the file `run` writes, read back by its own format, or in the project
    instruction file the client sends itself (Codex's AGENTS.md: ``Format.client_files``), and the other way
    round: on a Codex rollout the summary lives in the ``compacted`` line, on Claude Code after the
    boundary."""
    log = tmp_path / Path(entry["log"]).name
    shutil.copyfile(DATA / entry["log"], log)
    r = _eval(entry, log)
    out = tmp_path / "out.jsonl"
    written = api.run(log, api.Options(window=entry["window"]), output=out, warn=lambda _: None)
    assert written.compacted
    seen = read_transcript(io.BytesIO(out.read_bytes()), written.output_format).transcript
    original = read_transcript(io.BytesIO(log.read_bytes()), written.output_format).transcript.records
    sent = client_file_records(original, get_format(written.output_format).client_files)
    text = "\n".join(t for rec in [*seen.records, *sent] if rec.message is not None
                     for t in token_text(rec.message)[0])
    probes = load_probes(DATA / "probes" / entry["probes"])
    assert [p.label for p in probes if not p.found_in(text)] == r["probes"]["missing"]


def test_a_codex_compaction_is_scored_from_its_compacted_line() -> None:
    entry = next(s for s in SETS if s["log"].startswith("codex/codemie"))
    r = _eval(entry)
    assert r["latest_request"]["kept_verbatim"] is True
    assert r["identifiers"]["recall"] is not None and r["identifiers"]["recall"] > 0.5
    assert r["probes"]["found"] > r["probes"]["total"] / 2


def test_rules_and_request_stay_verbatim_after_every_compaction_of_a_growing_session() -> None:
    entry = next(s for s in SETS if s["log"].startswith("codex/codemie"))
    rep = api.replay(str(DATA / entry["log"]), api.Options(window=entry["replay_window"]),
                     load_probes(DATA / "probes" / entry["probes"]))
    assert len(rep["curve"]) >= 3 and [p["compaction"] for p in rep["curve"]] == list(
        range(1, len(rep["curve"]) + 1))
    for point in rep["curve"]:
        assert point["rules_kept"] == point["rules"]
        assert point["latest_request_kept"] is True
        assert 0 <= point["found"] <= point["answerable"]
    assert rep["max_tokens"] <= rep["window"]


def test_a_replay_of_a_log_that_fits_does_not_feed_the_original_bills_back() -> None:
    """The original session's bills after ctxcompact's compaction are for the uncompacted context: learning
    them drew a compaction on nearly every turn and went over the window."""
    rep = api.replay(str(DATA / "codex" / "codex-session-view-lmstudio-0.58.0.jsonl"),
                     api.Options(window=60000), [])
    assert rep["compactions"] <= 1
    assert rep["max_tokens"] <= rep["window"]


def test_a_slash_command_request_in_an_uncompacted_log_is_kept() -> None:
    r = api.evaluate(str(DATA / "claude-code" / "claude-code-viewer-orchestrator-1.0.108.jsonl"),
                     api.Options(), calibration=False)
    assert not r["compacted"]
    assert r["latest_request"]["text"].startswith("/orchestrator")
    assert r["latest_request"]["kept_verbatim"] is True
    assert r["baseline"]["latest_request"]["kept_verbatim"] is True


@pytest.mark.parametrize("log", ["claude-code/agentlogs-claude-compact.jsonl",
                                 "claude-code/spotter-compact-excerpt.jsonl",
                                 "codex/localpush-rollout-compacted-excerpt.jsonl"])
def test_an_earlier_summary_is_found_and_carried_when_nothing_is_compacted(log: str) -> None:
    """Claude Code's isCompactSummary line, Codex's compacted line: without a compaction they are carried."""
    r = api.evaluate(str(DATA / log), api.Options(), calibration=False)
    assert not r["compacted"]
    got = r["handoff"]["earlier_summaries"]
    # the Codex one also holds an encrypted summary in its replacement_history: found and carried too
    assert got["found"] == got["carried"] == 1 + got["opaque"] and got["line_share"] == 1.0


# ----------------------------------------------------------------------------------------- synthetic edges


def test_the_head_baseline_cuts_every_message_and_keeps_the_system_prompt() -> None:
    long = "é" * 1000  # characters, not bytes
    t = _transcript([sys_msg("S" * 500), user(long), assistant(None, [("c1", "read", {"path": long})]),
                     tool("c1", long), assistant(long)])
    out = heads(t)
    assert out.records[0] is t.records[0]
    for rec in out.records[1:]:
        assert rec.message is not None and len("".join(token_text(rec.message)[0])) <= HEAD_CHARS
    roles = [r.message.role for r in t.records if r.message]
    assert [r.message.role for r in out.records if r.message] == roles
    assert heads(_transcript([])).records == []


@pytest.mark.parametrize(
    ("objs", "status", "open_"),
    [
        ([user("Fix the parser."), assistant("Fixed: the tokenizer skipped tabs.")], "answered", False),
        ([user("Fix it."), assistant(None, [("c1", "run", {"cmd": "pytest"})]), tool("c1", "3 failed")],
         "in_progress", True),
        ([user("Fix it."), assistant(None, [("c1", "run", {"cmd": "pytest"})])], "in_progress", True),
        ([user("Fix it."), assistant("Looking."), user("[Request interrupted by user]")], "interrupted",
         False),
        ([user("Fix it.")], "in_progress", False),
        ([sys_msg("You are helpful.")], None, False),
        ([], None, False),
    ],
    ids=["answered", "results-back", "call-pending", "interrupted", "request-only", "no-request", "empty"],
)
def test_request_status_and_the_work_in_flight(objs: list[dict[str, Any]], status: str | None,
                                              open_: bool) -> None:
    t = _transcript(objs)
    got, answer = request_status(t.records)
    assert got == status
    assert (answer is not None) == (status == "answered")
    calls, _ = in_flight(t.records)
    assert bool(calls) == open_
    if open_:  # the whole transcript as the context: the in-flight work is there
        score = in_flight_score(compare(t.records, t))
        assert score["open"] and score["present"] is True
        # a context without the last two records no longer shows it
        cut = Transcript(t.format, t.records[:1], t.source)
        assert in_flight_score(compare(t.records, cut))["present"] is False


def test_only_the_last_step_of_a_tool_loop_is_in_flight() -> None:
    t = _transcript([user("Fix it."), assistant(None, [("c1", "read", {"path": "a.py"})]), tool("c1", "A"),
                     assistant(None, [("c2", "read", {"path": "b.py"}), ("c3", "read", {"path": "c.py"})]),
                     tool("c2", "B"), tool("c3", "C")])
    calls, results = in_flight(t.records)
    assert [c.id for r in calls for c in r.message.tool_calls()] == ["c2", "c3"]  # type: ignore[union-attr]
    assert [x.call_id for r in results for x in r.message.tool_results()] == ["c2", "c3"]  # type: ignore[union-attr]
    # the step before is history: a context without it still has the work in flight
    kept = Transcript(t.format, [t.records[0], *t.records[3:]], t.source)
    assert in_flight_score(compare(t.records, kept))["present"] is True


def test_a_probe_with_an_unknown_category_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('{"expect": "ok", "category": "rules"}\n# note\n{"expect": "x", "category": "vibes"}\n',
                    encoding="utf-8")
    with pytest.raises(InputError, match=r"line 3: \"category\" must be one of rules"):
        load_probes(path)
    path.write_text('{"expect": "ok", "category": ""}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"line 1: \"category\" must be a non-empty string"):
        load_probes(path)


def test_probes_are_counted_per_category_with_other_for_the_uncategorised(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('{"expect": "tabs", "category": "decisions"}\n{"expect": "absent"}\n'
                    '{"expect": "Fix the parser.", "category": "request"}\n', encoding="utf-8")
    t = _transcript([user("Fix the parser."), assistant("Fixed: the tokenizer skipped tabs.")])
    from ctxcompact.evaluate.scores import probes_score

    got = probes_score(compare(t.records, t), load_probes(path))
    assert got["by_category"] == {"decisions": {"total": 1, "found": 1}, "other": {"total": 1, "found": 0},
                                  "request": {"total": 1, "found": 1}}
    assert got["found"] == 2 and got["missing"] == ["absent"]

"""End-to-end behaviour of `run` through the library API: compaction shape, the watermark across runs,
calibration, the fingerprint, exit codes and the promise that the input is never modified."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import orjson
import pytest
from helpers import SAMPLES, assistant, coding_session, jsonl, sys_msg, tool, user

from ctxcompact import api
from ctxcompact.errors import ExitCode, StateError
from ctxcompact.facts import CONTINUATION_MARKER, SUMMARY_MARKER
from ctxcompact.tokens.heuristic import text_tokens

SYSTEM = "You are a careful coding agent. Work in small steps and explain what you change."


def lines_of(result: api.RunResult) -> list[dict]:
    return [orjson.loads(line) for line in result.lines()]


def write(path: Path, objs: list[dict]) -> None:
    path.write_bytes(jsonl(objs))


def append(path: Path, objs: list[dict]) -> None:
    with path.open("ab") as fh:
        fh.write(jsonl(objs))


def opts(**kw: object) -> api.Options:
    base: dict[str, object] = {"window": 8_000, "exact": "none"}
    base.update(kw)
    return api.Options(**base)  # type: ignore[arg-type]


def test_compaction_writes_system_summary_and_continuation(tmp_path: Path) -> None:
    log = tmp_path / "session.jsonl"
    convo = [
        sys_msg(SYSTEM),
        *coding_session(12),
        user("Now rename handle_11 to serve_11 and keep the tests green."),
    ]
    write(log, convo)
    out = tmp_path / "out.jsonl"
    result = api.run(log, opts(), output=out)
    assert result.compacted
    written = [orjson.loads(x) for x in out.read_bytes().splitlines()]
    assert written[0] == sys_msg(SYSTEM)
    # the system line is copied byte for byte from the input
    assert out.read_bytes().splitlines()[0] == log.read_bytes().splitlines()[0]
    assert written[1]["role"] == "user" and written[1]["content"].startswith(SUMMARY_MARKER)
    assert written[2]["role"] == "user" and written[2]["content"].startswith(CONTINUATION_MARKER)
    # the continuation quotes the latest request verbatim
    assert "Now rename handle_11 to serve_11 and keep the tests green." in written[2]["content"]
    assert len(written) == 3
    # far below the threshold (8k window: threshold 6,400)
    assert result.tokens_after < result.estimate.budget.threshold / 2
    assert result.tokens_before >= result.estimate.budget.threshold


def test_summary_fits_its_budget(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"
    write(log, [sys_msg(SYSTEM), *coding_session(40, tool_chars=4000), user("continue")])
    result = api.run(log, opts(), output=tmp_path / "o.jsonl")
    assert result.compacted
    summary = lines_of(result)[1]["content"]
    assert text_tokens(summary) <= result.estimate.budget.summary_budget  # 800 for an 8k window


def test_watermark_keeps_context_compacted_across_runs(tmp_path: Path) -> None:
    """The production bug of the original design: compaction must not snap back on the next call."""
    log = tmp_path / "session.jsonl"
    write(log, [sys_msg(SYSTEM), *coding_session(12), user("Keep going with the refactor.")])
    first = api.run(log, opts(), output=tmp_path / "o1.jsonl")
    assert first.compacted
    state = api.load_state(Path(str(log) + ".ctxstate.json"))
    assert state is not None and state.watermark == 50  # 1 system + 48 + 1 user

    new = [assistant("Renaming now."), user("Also update the changelog.")]
    append(log, new)
    second = api.run(log, opts(), output=tmp_path / "o2.jsonl")
    assert not second.compacted
    out = lines_of(second)
    assert out[0] == sys_msg(SYSTEM)
    assert out[1]["content"].startswith(SUMMARY_MARKER)
    assert out[2]["content"].startswith(CONTINUATION_MARKER)
    assert out[3:] == new  # only the newer records follow the summary
    # the new records are copied byte for byte
    assert (tmp_path / "o2.jsonl").read_bytes().endswith(jsonl(new))
    assert second.tokens_before < second.estimate.budget.threshold
    state = api.load_state(Path(str(log) + ".ctxstate.json"))
    assert state is not None and len(state.compactions) == 1


def test_growing_transcript_never_loops(tmp_path: Path) -> None:
    """Many calls on an append-only log: each compaction has new content, and the output stays small."""
    log = tmp_path / "grow.jsonl"
    write(log, [sys_msg(SYSTEM)])
    compactions = 0
    watermark_seen: set[int] = set()
    for turn in range(30):
        append(log, coding_session(1, tool_chars=3000, start=turn))
        result = api.run(log, opts(), output=tmp_path / "out.jsonl")
        assert result.tokens_after <= result.estimate.budget.window
        if result.compacted:
            compactions += 1
            state = api.load_state(Path(str(log) + ".ctxstate.json"))
            assert state is not None
            assert state.watermark not in watermark_seen  # never compacts the same content twice
            watermark_seen.add(state.watermark)
            assert result.tokens_after < result.tokens_before
    assert compactions >= 3


def test_rules_files_errors_and_todos_survive_three_compactions(tmp_path: Path) -> None:
    log = tmp_path / "facts.jsonl"
    write(
        log,
        [
            sys_msg(SYSTEM),
            user("Fix the login bug. Never push to main. Don't change the public API of auth.py."),
            assistant(
                None,
                [
                    (
                        "c1",
                        "todo_write",
                        {
                            "todos": [
                                {"content": "reproduce the login bug", "status": "completed"},
                                {
                                    "content": "write a regression test for expired tokens",
                                    "status": "pending",
                                },
                            ]
                        },
                    )
                ],
            ),
            tool("c1", "ok"),
            assistant(None, [("c2", "bash", {"command": "pytest tests/test_auth.py"})]),
            tool("c2", "FAILED tests/test_auth.py::test_expired - AssertionError: token accepted"),
            assistant(None, [("c3", "edit_file", {"path": "src/app/auth.py", "old": "<", "new": "<="})]),
            tool("c3", "edited src/app/auth.py"),
        ],
    )
    state_path = Path(str(log) + ".ctxstate.json")
    for round_ in range(3):
        append(log, coding_session(10, tool_chars=2500, start=100 * (round_ + 1)))
        append(log, [user(f"Round {round_}: carry on.")])
        result = api.run(log, opts(), output=tmp_path / "out.jsonl")
        assert result.compacted, f"round {round_} should compact"
    state = api.load_state(state_path)
    assert state is not None and len(state.compactions) == 3
    assert state.summary is not None
    summary = state.summary.text
    assert "Never push to main." in summary
    assert "Don't change the public API of auth.py." in summary
    assert "src/app/auth.py" in summary
    assert "write a regression test for expired tokens" in summary
    assert "test_auth.py" in summary  # the error seen (and the file it was in)


def test_input_is_never_modified(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"
    write(log, [sys_msg(SYSTEM), *coding_session(12), user("go")])
    before = hashlib.sha256(log.read_bytes()).hexdigest()
    api.run(log, opts(), output=tmp_path / "o.jsonl")
    api.run(log, opts(), output=tmp_path / "o.jsonl")
    assert hashlib.sha256(log.read_bytes()).hexdigest() == before


def test_rewritten_transcript_is_detected(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"
    write(log, [sys_msg(SYSTEM), *coding_session(12), user("go")])
    api.run(log, opts(), output=tmp_path / "o.jsonl")
    write(log, [sys_msg(SYSTEM + " (edited)"), *coding_session(12), user("go")])
    with pytest.raises(StateError) as err:
        api.run(log, opts(), output=tmp_path / "o2.jsonl")
    assert err.value.exit_code == ExitCode.STATE
    assert "--reset-state" in str(err.value)
    # --reset-state starts over
    result = api.run(log, opts(reset_state=True), output=tmp_path / "o3.jsonl")
    assert result.compacted


def test_calibration_from_state_and_reset_after_compaction(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"
    state_path = Path(str(log) + ".ctxstate.json")
    write(log, [sys_msg(SYSTEM), *coding_session(2), user("hi")])
    r1 = api.run(log, opts(window=200_000), output=tmp_path / "o.jsonl")
    assert not r1.compacted
    est_written = r1.estimate.heuristic
    api.calibrate(state_path, est_written * 3)  # the provider saw 3x our estimate
    append(log, [assistant("ok"), user("next")])
    report = api.estimate(log, opts(window=200_000))
    assert report.calibrated.source == "state"
    assert report.calibrated.factor == pytest.approx(3.0, rel=0.01)
    assert report.calibrated.tokens >= report.heuristic * 3
    # force a compaction: calibration is reset and the written output's estimate stored
    r2 = api.run(log, opts(window=200_000, threshold="100"), output=tmp_path / "o.jsonl")
    assert r2.compacted
    state = api.load_state(state_path)
    assert state is not None
    assert state.calibration.real is None
    assert state.calibration.factor is None  # the pre-compaction factor is gone
    assert state.calibration.last_estimate  # the written output's estimate, for the next calibration


def test_usage_in_transcript_calibrates_against_its_prefix(tmp_path: Path) -> None:
    convo = [sys_msg(SYSTEM), *coding_session(3)]
    prefix = api.estimate(jsonl(convo), opts(use_state=False)).heuristic
    convo.append(
        assistant(
            "done",
            usage={"prompt_tokens": prefix * 2, "completion_tokens": 5, "total_tokens": prefix * 2 + 5},
        )
    )
    convo.append(user("thanks, next step"))
    report = api.estimate(jsonl(convo), opts(use_state=False))
    assert report.calibrated.source.startswith("transcript usage")
    assert report.calibrated.factor == pytest.approx(2.0, rel=0.01)


def test_system_prompt_larger_than_window_is_exit_5_not_a_loop(tmp_path: Path) -> None:
    log = tmp_path / "big.jsonl"
    write(log, [sys_msg("rules " * 8000), user("hello"), assistant("hi"), user("go")])
    result = api.run(log, opts(), output=tmp_path / "o.jsonl")
    assert result.exit_code == ExitCode.DOES_NOT_FIT
    assert any("system prompt" in w for w in result.warnings)
    assert (tmp_path / "o.jsonl").exists()  # written, with a warning


def test_below_threshold_passes_through_byte_for_byte(tmp_path: Path) -> None:
    data = (SAMPLES / "openai-session.jsonl").read_bytes()
    buf = io.BytesIO()
    src = tmp_path / "s.jsonl"
    # a clean transcript (no repairs needed) passes through unchanged
    convo = [sys_msg(SYSTEM), *coding_session(2), user("go")]
    src.write_bytes(jsonl(convo))
    api.run(src, opts(window=200_000), output=buf)
    assert buf.getvalue() == src.read_bytes()
    assert data  # the sample exists


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"
    write(log, [sys_msg(SYSTEM), *coding_session(12), user("go")])
    result = api.run(log, opts(), dry_run=True)
    assert result.compacted
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]


def test_threshold_zero_disables_compaction(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"
    write(log, [sys_msg(SYSTEM), *coding_session(12), user("go")])
    result = api.run(log, opts(threshold="0"), output=tmp_path / "o.jsonl")
    assert not result.compacted
    assert result.exit_code == ExitCode.DOES_NOT_FIT  # 8k window, ~15k tokens: it says so


def test_anthropic_compaction_keeps_alternation(tmp_path: Path) -> None:
    log = tmp_path / "a.jsonl"
    convo: list[dict] = [{"role": "system", "content": SYSTEM}]
    for t in range(15):
        convo.append({"role": "user", "content": f"Please read file_{t}.py"})
        convo.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Reading."},
                    {
                        "type": "tool_use",
                        "id": f"toolu_{t}",
                        "name": "read_file",
                        "input": {"path": f"file_{t}.py"},
                    },
                ],
            }
        )
        convo.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"toolu_{t}", "content": "x = 1\n" * 300}],
            }
        )
        convo.append({"role": "assistant", "content": f"file_{t}.py sets x."})
    convo.append({"role": "user", "content": "Summarize what all files do."})
    write(log, convo)
    result = api.run(log, opts(), output=tmp_path / "o.jsonl")
    assert result.compacted
    out = lines_of(result)
    assert out[0] == {"role": "system", "content": SYSTEM}
    assert [m["role"] for m in out[1:]] == ["user"]
    texts = [b["text"] for b in out[1]["content"]]
    assert texts[0].startswith(SUMMARY_MARKER)
    assert "Summarize what all files do." in texts[1]


def test_compaction_that_does_not_shrink_is_dropped(tmp_path: Path) -> None:
    """A large system prompt over a two-line conversation: summary + continuation would cost more than
    what they replace, so run must pass the context through instead of compacting on every call."""
    log = tmp_path / "s.jsonl"
    write(log, [sys_msg("rule " * 2000), user("hi"), assistant("hello")])
    messages: list[str] = []
    result = api.run(
        log, opts(window=32_000, threshold="100"), output=tmp_path / "o.jsonl", warn=messages.append
    )
    assert not result.compacted and not result.estimate.would_compact  # the one decision, before any work
    assert any("would not make the context smaller" in m for m in messages + result.warnings)
    assert (tmp_path / "o.jsonl").read_bytes() == log.read_bytes()
    state = api.load_state(Path(str(log) + ".ctxstate.json"))
    assert state is not None and state.compactions == [] and state.watermark == 0


def test_keep_trailing_results_for_a_before_model_hook(tmp_path: Path) -> None:
    """Right after tools ran, the hook's context must end on the results (the model answers them next);
    by default cleaning closes them with 'Understood.' (docs/reference/cli.md#ctxcompact-clean-file)."""
    log = tmp_path / "t.jsonl"
    write(
        log,
        [sys_msg(SYSTEM), user("list the files"), assistant(None, [("c1", "ls", {})]), tool("c1", "a.py")],
    )
    default = lines_of(api.run(log, opts(window=200_000, use_state=False)))
    assert default[-1] == {"role": "assistant", "content": "Understood."}
    hook = lines_of(api.run(log, opts(window=200_000, use_state=False, keep_trailing_results=True)))
    assert hook[-1] == tool("c1", "a.py")

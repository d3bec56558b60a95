"""`ctxcompact eval` measured for honesty: a missing probe is missing, a dropped rule is lost, the baseline is
worse than the summary where it should be, nothing is written, the replay stays in its window."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import orjson
import pytest
from helpers import SAMPLES, assistant, coding_session, ctxcompact, jsonl, sys_msg, tool, user

from ctxcompact import api
from ctxcompact.evaluate.baseline import truncate
from ctxcompact.evaluate.identifiers import extract
from ctxcompact.evaluate.scores import score
from ctxcompact.model import Role, Transcript

LONG = SAMPLES / "openai-long.jsonl"
REPO = Path(__file__).parent.parent.parent
RULE = "Never delete the migrations folder."
EVAL_KEYS = {
    "format",
    "strategy",
    "summarizer",
    "tokens",
    "fits",
    "valid",
    "latest_request",
    "rules",
    "todos",
    "errors",
    "identifiers",
    "probes",
    "baseline",
    "baseline_head",
    "handoff",
    "summary_budget",
    "calibration",
}


@pytest.fixture()
def planted(tmp_path: Path) -> Path:
    log = tmp_path / "planted.jsonl"
    log.write_bytes(
        jsonl(
            [
                sys_msg("You are a coding agent."),
                user(f"Refactor the app. {RULE}"),
                *coding_session(12),
                user("Carry on with the refactor."),
            ]
        )
    )
    return log


def _digest(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in directory.iterdir()}


def test_json_has_the_stable_fields_and_a_missing_probe_is_missing(planted: Path, tmp_path: Path) -> None:
    probes = tmp_path / "probes.jsonl"
    probes.write_text(
        '{"expect": "migrations folder"}\n{"expect": "a string nobody wrote"}\n'
        '{"expect_regex": "handle_1[01]", "question": "which handlers?"}\n',
        encoding="utf-8",
    )
    out = ctxcompact("eval", str(planted), "--window", "4000", "--probes", str(probes), "--json")
    assert out.returncode == 0, out.stderr
    r = orjson.loads(out.stdout)
    assert set(r) >= EVAL_KEYS
    assert set(r["tokens"]) == {"before", "after", "ratio"} and r["tokens"]["after"] < r["tokens"]["before"]
    assert r["probes"] == {"total": 3, "found": 2, "missing": ["a string nobody wrote"],
                           "by_category": {"other": {"total": 3, "found": 2}}}
    assert r["rules"]["found"] == 1 and r["rules"]["kept_verbatim"] == 1
    assert r["latest_request"] == {"text": "Carry on with the refactor.", "kept_verbatim": True}
    assert r["valid"] is True and r["fits"] is True
    assert set(r["identifiers"]["by_kind"]) == {"path", "command", "error", "url", "symbol"}


def test_a_compaction_that_drops_a_planted_rule_scores_it_lost(planted: Path) -> None:
    original = api.load_transcript(planted)
    records = original.records
    dropped = [r for r in records if r.message is None or r.message.role is Role.SYSTEM] + records[-5:]
    s = score(records, Transcript(original.format, dropped, original.source))
    assert s["rules"] == {"found": 1, "kept_verbatim": 0, "lost": [RULE]}
    assert s["identifiers"]["kept"] < s["identifiers"]["total"]
    # and the baseline, which drops the oldest records, loses it too
    r = api.evaluate(planted, api.Options(window=4000))
    assert r["baseline"]["rules"]["kept_verbatim"] == 0 and r["rules"]["kept_verbatim"] == 1


@pytest.mark.parametrize("window", [8000, 32000])
def test_the_baseline_keeps_fewer_identifiers_than_the_extractive_summary(window: int) -> None:
    r = api.evaluate(LONG, api.Options(window=window))
    assert r["compacted"] and r["baseline"]["tokens"] <= r["tokens"]["after"]
    assert r["baseline"]["identifiers"]["kept"] < r["identifiers"]["kept"]
    assert r["baseline"]["rules"]["kept_verbatim"] < r["rules"]["kept_verbatim"] == r["rules"]["found"]


def test_eval_leaves_the_input_byte_identical_and_writes_no_state(tmp_path: Path) -> None:
    log = tmp_path / "long.jsonl"
    shutil.copy(LONG, log)
    before = _digest(tmp_path)
    out = ctxcompact(
        "eval", str(log), "--window", "8000", "--strategy", "threshold,mask,sliding-window", "--replay"
    )
    assert out.returncode == 0, out.stderr
    assert _digest(tmp_path) == before


def test_replay_in_an_8k_window_compacts_at_least_twice_and_never_exceeds_it() -> None:
    r = api.replay(LONG, api.Options(window=8000))
    assert r["window"] == 8000 and r["turns"] == 28 and len(r["series"]) == 28
    assert r["compactions"] >= 2
    assert r["max_tokens"] <= 8000 and all(p["tokens"] <= 8000 for p in r["series"])
    assert r["final"]["rules"]["kept_verbatim"] == r["final"]["rules"]["found"] > 0


def test_a_probes_file_that_is_not_jsonl_names_its_line(planted: Path, tmp_path: Path) -> None:
    probes = tmp_path / "probes.jsonl"
    probes.write_text('{"expect": "ok"}\n\nnot json at all\n', encoding="utf-8")
    out = ctxcompact("eval", str(planted), "--probes", str(probes))
    assert out.returncode == 1
    assert b"line 3" in out.stderr and b"not JSON" in out.stderr and b"Traceback" not in out.stderr
    probes.write_text('{"expect_regex": "("}\n', encoding="utf-8")
    out = ctxcompact("eval", str(planted), "--probes", str(probes))
    assert out.returncode == 1 and b"line 1" in out.stderr


def test_bad_input_is_exit_1_with_its_line(tmp_path: Path) -> None:
    log = tmp_path / "bad.jsonl"
    log.write_bytes(jsonl([sys_msg("s"), user("hi")]) + b"{not json\n")
    out = ctxcompact("eval", str(log))
    assert out.returncode == 1 and b"line 3" in out.stderr and b"Traceback" not in out.stderr


def test_several_strategies_and_files_give_rows_and_a_mean(tmp_path: Path) -> None:
    for name in ("openai-long.jsonl", "openai-session.jsonl"):
        shutil.copy(SAMPLES / name, tmp_path / name)
    out = ctxcompact("eval", str(tmp_path), "--window", "8000", "--strategy", "threshold,mask")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.decode().splitlines()
    assert len(lines) == 1 + 4 + 1 and lines[-1].startswith("mean (4)")
    out = ctxcompact("eval", str(tmp_path / "openai-long.jsonl"), "--strategy", "nope")
    assert out.returncode == 2 and b"unknown strategy" in out.stderr


def test_calibration_replays_the_recorded_usage() -> None:
    """The replay matches engine.replay_calibration point for point; the first request (nothing before it
    to learn the hidden prompt from) is reported apart and left out of the mean and the undercounts."""
    from ctxcompact.evaluate.calibration import replay_calibration

    log = REPO / "tests" / "data" / "claude-code" / "spotter-subagent-command.jsonl"
    points = replay_calibration(log, api.Options())
    cal = api.evaluate(log, api.Options())["calibration"]
    assert cal["points"] == len(points) >= 3
    assert cal["first"] == {"line": points[0].line, "predicted": points[0].predicted,
                            "real": points[0].real, "error": round(points[0].error, 4)}
    assert cal["first"]["error"] < -0.5  # the hidden prompt is unknown before the first bill
    later = [p.error for p in points[1:]]
    assert cal["mape"] == round(sum(map(abs, later)) / len(later), 4) < 0.05
    assert cal["undercounts"] == sum(e < -0.05 for e in later)
    assert cal["worst"]["error"] == round(min(later), 4)
    one = api.evaluate(REPO / "tests" / "data" / "claude-code" / "spotter-short.jsonl", api.Options())
    assert one["calibration"]["points"] == 1 and one["calibration"]["mape"] is None
    assert one["calibration"]["worst"] is None
    assert api.evaluate(LONG, api.Options())["calibration"] is None  # the log records no usage


def test_identifier_rules() -> None:
    records = api.load_transcript(
        jsonl(
            [
                user("Fix `parse_since` in app/timeutil.py, see https://example.com/issue/7."),
                assistant(None, [("c1", "run_command", {"command": "pytest -q  tests/test_time.py"})]),
                tool("c1", 'Traceback (most recent call last):\n  File "x.py", line 1\nValueError: bad date'),
                assistant(
                    None,
                    [("c2", "write_file", {"path": "app/new.py", "content": "def make_order(x):\n  pass"})],
                ),
                tool("c2", "ok"),
                assistant("Done, see `Order.total` and the word `yes`."),
            ]
        )
    ).records
    found = extract(records).by_kind
    assert found["path"] == ["app/timeutil.py", "tests/test_time.py", "app/new.py"]
    assert found["url"] == ["https://example.com/issue/7"]
    assert found["command"] == ["pytest -q tests/test_time.py"]
    assert found["error"] == ["ValueError: bad date"]
    assert found["symbol"] == ["parse_since", "make_order", "Order.total"]


def test_truncation_keeps_the_system_prompt_and_pairs_whole() -> None:
    transcript = api.load_transcript(jsonl([sys_msg("s" * 400), *coding_session(6)]))
    for budget in (0, 300, 1000, 10**6):
        kept = truncate(transcript, budget, lambda recs: sum(len(r.raw or b"") for r in recs)).records
        assert kept[0].message is not None and kept[0].message.role is Role.SYSTEM
        calls = {c.id for r in kept if r.message for c in r.message.tool_calls()}
        results = {x.call_id for r in kept if r.message for x in r.message.tool_results()}
        assert calls == results
    assert len(truncate(transcript, 10**6, lambda recs: 0).records) == len(transcript.records)


def test_html_is_one_self_contained_page_and_the_text_draws_the_replay(tmp_path: Path) -> None:
    page = tmp_path / "eval.html"
    out = ctxcompact("eval", str(LONG), "--window", "8000", "--replay", "--html", str(page))
    assert out.returncode == 0, out.stderr
    html = page.read_text(encoding="utf-8")
    assert html.startswith("<!doctype html>") and "<svg" in html and "<polyline" in html
    assert "<script" not in html and "src=" not in html and "href=" not in html and "@import" not in html
    text = out.stdout.decode()
    assert "compactions (*)" in text and "8,000 -" in text


@pytest.fixture
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "CTXCOMPACT_API_KEY",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "http_proxy",
        "https_proxy",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_judge_asks_each_question_against_the_compacted_context(
    provider: str, planted: Path, no_keys: None
) -> None:
    from providers import ProviderServer, anthropic_message, openai_completion

    from ctxcompact.evaluate.probes import Probe

    probes = [
        Probe(1, expect="migrations", question="What must never be deleted?"),
        Probe(2, expect="handle_99", question="Which handler was renamed?"),
        Probe(3, expect="ignored"),
    ]  # no question: not asked
    with ProviderServer() as server:
        if provider == "openai":
            server.push(openai_completion("The migrations folder."), openai_completion("unknown"))
            base = server.openai_url
        else:
            server.push(anthropic_message("The migrations folder."), anthropic_message("unknown"))
            base = server.url
        opts = api.Options(
            window=4000, summary_model="judge-test", base_url=base, api_key="test-key", max_retries=0
        )
        r = api.evaluate(planted, opts, probes, judge=provider)
        path = "/v1/chat/completions" if provider == "openai" else "/v1/messages"
        asked = server.requests_to(path)
    assert r["judge"]["asked"] == 2 and r["judge"]["correct"] == 1
    assert [a["correct"] for a in r["judge"]["answers"]] == [True, False]
    assert len(asked) == 2
    prompt = orjson.dumps(asked[0].body).decode()
    assert "What must never be deleted?" in prompt and RULE in prompt  # the compacted context was sent


def test_the_judges_are_the_sdks_providers() -> None:
    """--judge offers each provider of the one SDK boundary (sdk.PROVIDERS), and the library's ``judge=``
    refuses any other name instead of asking another provider."""
    import click

    from ctxcompact import sdk
    from ctxcompact.cli.commands import cli
    from ctxcompact.errors import UsageError
    from ctxcompact.evaluate.judge import ASK, judge

    cmd = cli.get_command(click.Context(cli), "eval")
    assert cmd is not None
    choice = next(p.type for p in cmd.params if p.name == "judge")
    assert isinstance(choice, click.Choice) and list(choice.choices) == list(sdk.PROVIDERS) == list(ASK)
    with pytest.raises(UsageError, match="judge 'gemini': expected one of anthropic, openai"):
        judge("gemini", [], "context", api.Options(summary_model="m"))


def test_eval_takes_every_option_run_takes_that_shapes_the_result() -> None:
    """eval compacts "exactly as run would": every run option but where and how run writes is eval's too."""
    import click

    from ctxcompact.cli.commands import cli

    def names(command: str) -> set[str]:
        cmd = cli.get_command(click.Context(cli), command)  # eval's module is loaded on first use
        assert cmd is not None
        return {p.name for p in cmd.params if p.name}

    writing_only = {"output", "dry_run", "as_json", "quiet", "file", "strategy"}
    assert names("run") - writing_only <= names("eval"), names("run") - writing_only - names("eval")


def test_eval_passes_the_summarizer_options_to_run(tmp_path: Path) -> None:
    """--no-fallback reaches the summarizer: an LLM that cannot be reached exits 4 instead of falling back."""
    args = ["eval", str(LONG), "--window", "8000", "--summarizer", "openai", "--summary-model", "m",
            "--base-url", "http://127.0.0.1:9/v1", "--max-retries", "0", "--timeout", "2", "--json"]
    env = {"OPENAI_API_KEY": "sk-test", "NO_PROXY": "127.0.0.1"}
    fell_back = ctxcompact(*args, env=env)
    assert fell_back.returncode == 0, fell_back.stderr
    assert orjson.loads(fell_back.stdout)["summarizer"] == "extractive"
    strict = ctxcompact(*args, "--no-fallback", env=env)
    assert strict.returncode == 4, strict.stderr

"""Every real public log of the corpus (tests/data/real-corpus.json, built by bench/corpus_features.py) goes
through the commands a user would run: detected as the recorded format, valid, estimated, and compacted in a
small window without a traceback, the input left byte-identical. Real logs are the truth: a rejection here is
a reader or schema bug."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from ctxcompact import api
from ctxcompact.cli import main

REPO = Path(__file__).resolve().parent.parent.parent
DATA = REPO / "tests" / "data"
MANIFEST = json.loads((DATA / "real-corpus.json").read_text(encoding="utf-8"))
LOGS: list[dict[str, Any]] = MANIFEST["logs"]
IDS = [log["file"] for log in LOGS]


def cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run the CLI in this process (a child process per call would make the corpus test slow)."""
    with pytest.raises(SystemExit) as done:
        main(argv)
    out, err = capsys.readouterr()
    code = done.value.code
    return (code if isinstance(code, int) else 1), out, err


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_manifest_is_up_to_date() -> None:
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import corpus_features
    finally:
        sys.path.pop(0)
    assert corpus_features.manifest() == MANIFEST, "run: python bench/corpus_features.py"


def test_corpus_covers_what_the_issues_need() -> None:
    """The corpus is only useful if it holds the structures the reader must get right."""
    by_format: dict[str, list[dict[str, Any]]] = {}
    for log in LOGS:
        by_format.setdefault(log["format"], []).append(log)
    cc, codex, genai = by_format["claude-code"], by_format["codex"], by_format["genai"]
    assert len(cc) >= 6 and len(codex) >= 3 and len(genai) >= 1
    assert len({log["version"] for log in cc}) >= 4, "Claude Code logs should span CLI versions"
    assert sum(1 for log in cc if log["features"]["compact_boundary"]) >= 2
    for feature in ("sidechain", "progress_chain", "split_message", "custom_command", "local_command",
                    "compact_summary", "logical_parent"):
        assert any(log["features"][feature] for log in cc), feature
    assert any(log["features"]["codex_compacted"] and log["features"]["replacement_history"] for log in codex)
    assert all(log["usage_points"] >= 1 for log in codex)
    assert all(log["license"] and log["commit"] and log["repo"] for log in LOGS)


@pytest.mark.parametrize("log", LOGS, ids=IDS)
def test_real_log_detected_and_valid(log: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    path = DATA / log["file"]
    report = api.validate(str(path))
    assert report.format == log["format"]
    code, out, err = cli(["validate", str(path)], capsys)
    assert code == 0, err
    assert f"format {log['format']}" in out + err


@pytest.mark.parametrize("log", LOGS, ids=IDS)
def test_real_log_estimate_json(log: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    path = DATA / log["file"]
    code, out, err = cli(["estimate", str(path), "--json"], capsys)
    assert code == 0, err
    result = json.loads(out)
    assert result["format"] == log["format"]
    assert result["tokens"]["calibrated"] >= result["tokens"]["heuristic"] >= 0
    # every real log has a conversation, a subagent's own log (every line a sidechain) too (issue 28)
    assert result["tokens"]["heuristic"] > 0


# A small window: the hidden prompt of most real logs alone exceeds it (exit 5 is the documented answer).
# A large window with a low threshold: run compacts, and what it writes must read back as valid.
RUNS = {"small-window": ["--window", "8000"], "compacts": ["--window", "200000", "--threshold", "1%"]}


@pytest.mark.parametrize("options", list(RUNS.values()), ids=list(RUNS))
@pytest.mark.parametrize("log", LOGS, ids=IDS)
def test_real_log_run(log: dict[str, Any], options: list[str], tmp_path: Path,
                      capsys: pytest.CaptureFixture[str]) -> None:
    path = DATA / log["file"]
    before = digest(path)
    out_file = tmp_path / "out.jsonl"
    code, _, err = cli(["run", str(path), "--no-state", *options, "-o", str(out_file)], capsys)
    assert code in (0, 5), err
    assert "Traceback" not in err
    assert digest(path) == before
    assert out_file.exists() and out_file.stat().st_size > 0
    code, _, err = cli(["validate", str(out_file)], capsys)
    assert code == 0, err

"""Lenient reading and the lines of an append-only log (issue 26 items 5, 6 and 14).

A line lenient reading drops is gone from the context and from every output: the lines around it keep their
links (Claude Code's ``parentUuid`` chain is re-linked past it), and a compaction that copies the log's
lines (Claude Code, Codex, ADK events) copies only the lines that read as records. Lines end at ``\\n``
only: a CR inside a valid line is JSON whitespace, never a line break.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from ctxcompact import api
from ctxcompact.options import Options

DATA = Path(__file__).parent.parent / "data"
TOOL_HEAVY = DATA / "claude-code" / "spotter-tool-heavy.jsonl"


def _corrupt(data: bytes, line: int) -> bytes:
    """``data`` with one invalid UTF-8 byte in line ``line`` (1-based): lenient reading drops that line."""
    lines = data.split(b"\n")
    lines[line - 1] = lines[line - 1][:-1] + b"\xff}"
    return b"\n".join(lines)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ctxcompact", *args], capture_output=True, text=True,
                          timeout=300)


def _tokens(data: bytes) -> int:
    report = api.estimate(data, Options(use_state=False, lenient=True, exact="none"))
    return report.calibrated.tokens


def _main_chain_lines(data: bytes) -> list[int]:
    """Line numbers of the main-chain message lines (not the first, not the last)."""
    out = []
    lines = data.split(b"\n")
    for n, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        obj = orjson.loads(raw)
        if obj.get("type") in ("user", "assistant") and not obj.get("isSidechain") and 1 < n < len(lines) - 1:
            out.append(n)
    return out


def _without(data: bytes, line: int) -> bytes:
    """``data`` with line ``line`` removed and its children hung from its parent: what dropping it means."""
    lines = data.split(b"\n")
    gone = orjson.loads(lines[line - 1])
    out = []
    for n, raw in enumerate(lines, start=1):
        if n == line:
            continue
        if raw.strip():
            obj = orjson.loads(raw)
            if obj.get("parentUuid") == gone.get("uuid"):
                obj["parentUuid"] = gone.get("parentUuid")
                raw = orjson.dumps(obj)
        out.append(raw)
    return b"\n".join(out)


@pytest.mark.parametrize("line", _main_chain_lines(TOOL_HEAVY.read_bytes()))
def test_a_dropped_claude_code_line_keeps_its_ancestors_in_the_context(line: int) -> None:
    data = TOOL_HEAVY.read_bytes()
    # the context is that of the log without the line, relinked (before the fix, dropping line 36 cut
    # everything before it out: 29,413 -> 750 tokens)
    assert _tokens(_corrupt(data, line)) == _tokens(_without(data, line))


def test_a_dropped_line_that_names_its_links_only_in_broken_json_is_relinked() -> None:
    from ctxcompact.formats.claude_code_tree import salvage_link

    raw = b'{"parentUuid":"p-1","uuid":"u-2","message":{"content":"half'
    assert salvage_link(raw) == ("u-2", "p-1")
    assert salvage_link(b'{"parentUuid":null,"uuid":"u-3",') == ("u-3", None)
    assert salvage_link(b"not json at all") is None


@pytest.mark.parametrize(("path", "line", "args"), [
    (TOOL_HEAVY, 36, ["--window", "30000"]),
    (DATA / "codex" / "agtrace-codex-session.jsonl", 20, ["--window", "4000"]),
    (DATA / "synthetic" / "adk-long-events.jsonl", 5, ["--window", "8000"]),
], ids=["claude-code", "codex", "adk-events"])
def test_a_lenient_compaction_of_an_append_only_log_does_not_copy_the_dropped_line(
        tmp_path: Path, path: Path, line: int, args: list[str]) -> None:
    src = tmp_path / "in.jsonl"
    out = tmp_path / "out.jsonl"
    src.write_bytes(_corrupt(path.read_bytes(), line))
    done = _cli("run", str(src), "--lenient", "--no-state", "-o", str(out), *args)
    assert done.returncode == 0, done.stderr
    assert "compacted" in done.stderr
    written = out.read_bytes()
    assert b"\xff" not in written
    report = api.validate(out)
    assert report.ok, [str(p) for p in report.problems]


def test_a_cr_inside_a_codex_line_is_whitespace_not_a_line_break(tmp_path: Path) -> None:
    path = DATA / "codex" / "agtrace-codex-session.jsonl"
    lines = path.read_bytes().split(b"\n")
    lines[2] = lines[2].replace(b"{", b"{\r", 1)  # JSON whitespace: still one valid line
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"\n".join(lines))
    assert api.validate(src).ok
    out = tmp_path / "out.jsonl"
    done = _cli("run", str(src), "--no-state", "--window", "4000", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert "compacted" in done.stderr
    written = out.read_bytes()
    assert lines[2] + b"\n" in written  # copied whole, as it was
    report = api.validate(out)
    assert report.ok, [str(p) for p in report.problems]

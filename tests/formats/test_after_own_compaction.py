"""A client's log after ctxcompact compacted it (docs/guides/claude-code-codex.md#where-the-state-goes): the
log holds the compaction the way the client records its own, so

- ``estimate`` on it (no state) measures the compacted context from the size the compaction recorded
  (Claude Code's ``compactMetadata.postTokens``, Codex's meter after the ``compacted`` line), not at the
  default factor with the hidden prompt forgotten (a real Claude Code log: 735 tokens shown for 26,832);
- the next ``run`` with the state kept counts the summary once: the log already carries the state's
  summary, where the client put it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ctxcompact import api
from ctxcompact.facts.text import SUMMARY_MARKER

DATA = Path(__file__).resolve().parent.parent / "data"
LOGS = [DATA / "claude-code" / "spotter-tool-heavy.jsonl",
        DATA / "codex" / "codex-session-view-lmstudio-0.58.0.jsonl"]
WINDOW = 30_000


def _quiet(_m: str) -> None:
    pass


def _compact_in_place(tmp_path: Path, log: Path, *, state: bool) -> tuple[Path, api.RunResult]:
    path = tmp_path / log.name
    shutil.copyfile(log, path)
    out = tmp_path / "out.jsonl"
    res = api.run(path, api.Options(window=WINDOW, use_state=state), output=out, warn=_quiet)
    assert res.compacted
    out.replace(path)  # the recipe: the output in the input's place, the client resumes it
    return path, res


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.parent.name)
def test_estimate_after_our_compaction_measures_the_compacted_size(tmp_path: Path, log: Path) -> None:
    path, res = _compact_in_place(tmp_path, log, state=False)
    est = api.estimate(path, api.Options(window=WINDOW, use_state=False))
    assert est.calibrated.source != "default"
    # what run said it wrote, within a few tokens (the same counter, the figure the log records)
    assert abs(est.calibrated.tokens - res.tokens_after) <= max(50, res.tokens_after // 100), (
        est.calibrated.tokens, res.tokens_after)


def test_a_later_billed_request_wins_over_the_recorded_size(tmp_path: Path) -> None:
    """postTokens is only a fallback: once the client was billed again after the boundary, that counts."""
    import orjson

    path, _ = _compact_in_place(tmp_path, LOGS[0], state=False)
    lines = path.read_bytes().splitlines()
    last = orjson.loads(lines[-1])
    reply = {**last, "type": "assistant", "uuid": "after-1", "parentUuid": last["uuid"],
             "timestamp": "2099-01-01T00:00:00.000Z",
             "message": {"id": "msg_after", "role": "assistant", "type": "message", "model": "claude",
                         "content": [{"type": "text", "text": "Done."}],
                         "usage": {"input_tokens": 31_000, "output_tokens": 5}}}
    for key in ("isCompactSummary", "isVisibleInTranscriptOnly"):
        reply.pop(key, None)
    path.write_bytes(b"\n".join([*lines, orjson.dumps(reply)]) + b"\n")
    est = api.estimate(path, api.Options(window=200_000, use_state=False))
    assert est.calibrated.tokens >= 31_000


def test_estimate_without_a_recorded_size_is_unchanged(tmp_path: Path) -> None:
    """A boundary without postTokens (Claude Code's own, older builds) adds no measurement."""
    path = tmp_path / "c.jsonl"
    shutil.copyfile(DATA / "claude-code" / "agentlogs-claude-compact.jsonl", path)
    est = api.estimate(path, api.Options(use_state=False))
    assert "postTokens" not in est.calibrated.source


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.parent.name)
def test_the_next_run_with_the_state_counts_the_summary_once(tmp_path: Path, log: Path) -> None:
    path, res = _compact_in_place(tmp_path, log, state=True)
    assert res.summary is not None
    again = api.run(path, api.Options(window=WINDOW), dry_run=True, warn=_quiet)
    assert again.context is not None
    marker = [r for r in again.context.records if r.message is not None
              and SUMMARY_MARKER in r.message.text()]
    assert len(marker) == 1, [(r.origin, r.index) for r in marker]
    # and it costs what the compaction said it would (not a summary more)
    assert again.tokens_before <= res.tokens_after * 1.02 + 50, (again.tokens_before, res.tokens_after)


def _own_boundary_with_post_tokens(tmp_path: Path, name: str, upto: int, post: int) -> Path:
    """A real log of Claude Code's own compaction up to line ``upto``, its boundary given the
    ``compactMetadata.postTokens`` newer builds write (these 2026-02 logs predate it)."""
    import orjson

    out = []
    for line in (DATA / "claude-code" / name).read_bytes().splitlines()[:upto]:
        obj = orjson.loads(line)
        if obj.get("subtype") == "compact_boundary":
            obj["compactMetadata"]["postTokens"] = post
            line = orjson.dumps(obj)
        out.append(line)
    path = tmp_path / name
    path.write_bytes(b"\n".join(out) + b"\n")
    return path


@pytest.mark.parametrize(("name", "summary_line", "before_bill"), [
    ("spotter-auto-compact-excerpt-a.jsonl", 22, 26),  # the summary stamped as its boundary
    ("spotter-auto-compact-excerpt-b.jsonl", 32, 35),  # the summary stamped 1 ms after its boundary
])
def test_estimate_after_claude_codes_own_boundary_counts_post_tokens_once(
        tmp_path: Path, name: str, summary_line: int, before_bill: int) -> None:
    # postTokens is the compacted context, the summary line included: the estimate is that figure, not the
    # summary on top of it, and not lost (with the summary stamped after the boundary the figure went on
    # the boundary line, which is not context: 3,953 tokens at the default factor, the hidden prompt
    # forgotten); the progress lines before the next bill hold no message
    for upto in (summary_line, before_bill):
        path = _own_boundary_with_post_tokens(tmp_path, name, upto, 30_000)
        est = api.estimate(path, api.Options(use_state=False))
        assert est.calibrated.measured[-1][1] == 30_000  # the recorded size is the measurement
        assert 30_000 <= est.calibrated.tokens <= 30_010, (upto, est.calibrated.tokens)


def test_a_line_typed_after_claude_codes_own_boundary_is_counted_on_top(tmp_path: Path) -> None:
    # spotter-compact-excerpt: /compact's stdout (line 16) and "continue implementation" (line 22) were
    # written after the compaction measured itself
    path = _own_boundary_with_post_tokens(tmp_path, "spotter-compact-excerpt.jsonl", 22, 30_000)
    est = api.estimate(path, api.Options(use_state=False))
    (tmp_path / "only").mkdir()
    only = _own_boundary_with_post_tokens(tmp_path / "only", "spotter-compact-excerpt.jsonl", 13, 30_000)
    summary_only = api.estimate(only, api.Options(use_state=False))
    assert summary_only.calibrated.tokens <= 30_010
    assert est.calibrated.tokens > summary_only.calibrated.tokens + 1_000

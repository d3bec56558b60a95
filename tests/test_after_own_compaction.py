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

DATA = Path(__file__).resolve().parent / "data"
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

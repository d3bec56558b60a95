"""A Codex older than 0.87 resumes ctxcompact's compaction of a session it wrote itself.

Codex 0.59 … 0.80 read ``replacement_history`` but, unlike 0.87 and later, do not send their context
(AGENTS.md instructions, environment) afresh after resuming a ``compacted`` line they did not write: the
compaction keeps it in the history for their rollouts (formats/codex_seen.py ``Seen.resends``,
docs/guides/claude-code-codex.md). One version, the newest of them (``OLDER_CODEX``); the others were checked
by running the whole suite with ``CTXCOMPACT_CODEX_VERSION`` (harness.py).

Run with ``pytest -m clients tests/clients`` (fixtures: tests/clients/conftest.py).
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.clients.harness import Home, lines_of
from tests.clients.test_real_clients import (
    NOTES,
    STRATEGIES,
    codex_items,
    compact_in_place,
    read_back,
    texts,
)

pytestmark = pytest.mark.clients

CONTEXT = ("# AGENTS.md instructions", "<environment_context>")


def test_an_older_codex_gets_its_context_once_after_resuming(older_home: Home) -> None:
    h = older_home
    sid, path = h.start_codex(NOTES)  # a paste, for the compaction to have something to summarize
    started = [o for o in lines_of(path.read_bytes()) if o.get("type") == "session_meta"]
    assert started[0]["payload"]["cli_version"] < "0.87"
    turn = h.run_codex(sid, "Next.")
    assert turn.code == 0, turn.stderr[-2000:]
    compact_in_place(path, *STRATEGIES["threshold"], "--window", "4000", "--threshold", "3000")
    again = h.run_codex(sid, "Continue.")
    assert again.code == 0, again.stderr[-2000:]
    sent = codex_items(again.model_requests("/responses")[-1].body)
    said = [t for i in sent if i.get("type") == "message" for t in texts(i["content"])]
    assert any("ctxcompact summary" in t for t in said) and NOTES not in said, [t[:60] for t in said]
    # the instructions and the environment the session started with, once each: the compaction kept them
    context = Counter(p for t in said for p in CONTEXT if t.lstrip().startswith(p))
    assert context == Counter(CONTEXT), context
    read_back(h)

"""A summary budget of a few dozen tokens (a 420-token window gives 42; issue 23, left open after the handoff
work; docs/concepts/summary.md#the-drop-rule): the note under the marker takes its short form, and an
earlier summary too long to keep keeps its end (where the work stands, the next step), not a stub of
preamble."""

from __future__ import annotations

import json
from pathlib import Path

from ctxcompact import api
from ctxcompact.facts.store import Facts
from ctxcompact.summarizers.base import chars_cost
from ctxcompact.summarizers.extractive import ExtractiveSummarizer
from ctxcompact.summarizers.layout import EXTRACTED_NOTE, EXTRACTED_NOTE_SHORT, render_facts

DATA = Path(__file__).resolve().parent.parent / "data"
EARLIER = ("Analysis:\nLet me analyze the conversation chronologically.\n\n" + "1. Something was said.\n" * 60
           + "9. Optional Next Step:\n   Run the migration on staging.")


def test_a_tiny_budget_keeps_the_end_of_an_earlier_summary() -> None:
    text, truncated = render_facts(Facts(earlier=EARLIER), 40, EARLIER)
    assert not truncated and chars_cost(text) <= 40
    assert EXTRACTED_NOTE_SHORT in text and EXTRACTED_NOTE not in text
    assert "Run the migration on staging." in text and "Analysis" not in text
    # a budget that holds it all keeps the long note and the whole earlier summary
    text, _ = render_facts(Facts(earlier=EARLIER), 2_000, EARLIER)
    assert EXTRACTED_NOTE in text and "Analysis:" in text and "Run the migration on staging." in text
    # mid-sized: its head and its end around the marker, as before
    text, _ = render_facts(Facts(earlier=EARLIER), 300, EARLIER)
    assert "Analysis:" in text and "part of the earlier summary left out" in text and "staging." in text


def test_the_short_note_still_marks_an_extractive_summary_for_the_next_compaction() -> None:
    from ctxcompact.summarizers.base import SummaryRequest

    tiny, _ = render_facts(Facts(earlier=EARLIER), 40, EARLIER)
    facts = Facts(earlier=EARLIER).to_json()
    result = ExtractiveSummarizer().summarize(SummaryRequest(records=[], budget_tokens=4_000,
                                                             prior_summary=tiny, prior_facts=facts))
    # the facts carry the earlier summary; the tiny text is not carried a second time as an LLM's summary
    assert result.text.count("Run the migration on staging.") == 1
    assert EXTRACTED_NOTE_SHORT not in result.text.split("\n", 2)[2]


def test_real_claude_code_compact_summary_at_a_420_token_window(tmp_path: Path) -> None:
    """agentlogs-claude-compact: after Claude Code's /compact the live log is its 2,178-character summary and
    the /compact command (no request). At 420 tokens the summary budget is 42: the summary used to be the
    marker and the long note alone (nothing of the earlier summary); it now ends with what Claude's summary
    says comes next."""
    out = tmp_path / "o.jsonl"
    res = api.run(DATA / "claude-code" / "agentlogs-claude-compact.jsonl",
                  api.Options(window=420, use_state=False), output=out, warn=lambda _m: None)
    assert res.compacted and res.exit_code == 0
    summary = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()][-1]["message"]["content"]
    assert EXTRACTED_NOTE_SHORT in summary and "what they would like to work on" in summary

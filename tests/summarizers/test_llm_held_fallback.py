"""A streamed compaction with an LLM summarizer that the held route must make after all (found by
bench/fuzz_routes.py's ``llm`` check, seed 1405): the summary would not make the context smaller, so pass 2
gives up (``route_held.apply_strategy``: Unstreamable) and the held route summarizes again. The output,
warnings and exit code agree, and the provider is asked once for the summary and once for the window, as by
the held route (``summarizers.base.replies_kept``: it was asked twice), and the summary taken over reports
the time its reply took."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from providers import ProviderServer
from test_llm_streamed import _echo

from ctxcompact import api
from ctxcompact.formats import read_transcript
from ctxcompact.summarizers.base import SummaryRequest, replies_kept
from ctxcompact.summarizers.openai import OpenAISummarizer

LOG = Path(__file__).parent.parent / "data" / "claude-code" / "agtrace-claude-session.jsonl"


def _run(work: Path, hold: bool) -> tuple[object, ...]:
    work.mkdir()
    path = work / "t.jsonl"
    path.write_bytes(b"".join(LOG.read_bytes().splitlines(keepends=True)[:9]))  # (a short conversation)
    with ProviderServer() as server:
        server.push(*[_echo("openai")] * 10)
        said: list[str] = []
        r = api.run(path, api.Options(window=20_000, use_state=False, summarizer="openai", summary_model="m",
                                      base_url=server.openai_url, api_key="k-test", max_retries=0),
                    output=work / "out.jsonl", warn=said.append, hold=hold)
        return (r.exit_code, r.compacted, said, (work / "out.jsonl").read_bytes(),
                [(x.path, x.raw) for x in server.received], list(server.gets))


def test_the_fallback_writes_what_the_held_route_writes(tmp_path: Path) -> None:
    held, streamed = _run(tmp_path / "h", True), _run(tmp_path / "s", False)
    assert held[:4] == streamed[:4]
    assert not held[1] and "compaction would not make the context smaller" in held[2][0]


def test_the_fallback_sends_the_held_routes_requests_once(tmp_path: Path) -> None:
    held, streamed = _run(tmp_path / "h", True), _run(tmp_path / "s", False)
    assert len(held[4]) == 1
    assert streamed[4] == held[4]


def test_the_fallback_asks_for_the_window_once(tmp_path: Path) -> None:
    held, streamed = _run(tmp_path / "h", True), _run(tmp_path / "s", False)
    assert held[5] == ["/v1/models", "/props"]  # (the loopback server reports none: the default stands)
    assert streamed[5] == held[5]


def test_a_reply_answered_again_reports_the_time_it_took() -> None:
    """Two summarizers in one run (the streamed route's, then the held route's that takes over): the second
    is answered as the first was, without asking the server, and its duration is the reply's, not ~0."""
    records = read_transcript(LOG).transcript.records[:9]
    request = SummaryRequest(records=records, budget_tokens=500)
    with ProviderServer() as server, replies_kept():
        server.push(dataclasses.replace(_echo("openai"), delay=0.3))
        made = [OpenAISummarizer(model="m", base_url=server.openai_url, api_key="k-test", max_retries=0)
                for _ in range(2)]
        first, again = (s.summarize(request) for s in made)
        assert len(server.received) == 1 and server.gets == ["/v1/models", "/props"]
    assert again.text == first.text
    assert first.duration_s >= 0.3 and again.duration_s >= 0.3

"""A compaction with an LLM summarizer (anthropic, openai) on the streamed route (compaction_stream: the
conversation read record by record, the records a summary covers read again from the file as the prompt is
built, ``strategies.conversation.Summarized``): the requests the provider receives are the held route's
byte for byte, and the output, the state, the exit code and the warnings are too; the file is never held
(``InputData.load``). The real SDKs against a loopback server (tests/providers.py)."""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import re
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import SAMPLES, flip_a_content_byte, runs_on_one_file, tool_loop_log
from hypothesis import given, settings
from hypothesis import strategies as st
from providers import (
    CHAT,
    MESSAGES,
    ProviderServer,
    Reply,
    anthropic_error,
    anthropic_message,
    openai_completion,
    openai_context_error,
    openai_error,
)

from ctxcompact.model import Message, Origin, Record, Role, TextBlock
from ctxcompact.summarizers.base import SummaryRequest
from ctxcompact.summarizers.check import SECTIONS
from ctxcompact.summarizers.prompt import chunk_records, chunks

DATA = Path(__file__).parent.parent / "data"
PATHS = {"openai": CHAT, "anthropic": MESSAGES}


def _notes(prompt: str) -> str:
    """Notes a model could write of ``prompt``: every section, words of the transcript (so the check finds
    them on topic) and the prompt's hash (so an output made of another prompt differs)."""
    found = re.findall(r"[A-Za-z_][\w./-]{5,}", prompt)
    words = found[:42] + found[-42:]
    body = "\n".join(f"## {s}\n- {' '.join(words[i * 12:(i + 1) * 12]) or '(none)'}"
                     for i, s in enumerate(SECTIONS))
    return f"{body}\n- prompt {hashlib.sha256(prompt.encode()).hexdigest()[:16]}"


def _echo(provider: str) -> Reply:
    """A reply made of the request's prompt (:func:`_notes`)."""
    if provider == "openai":
        return Reply(200, lambda r: openai_completion(_notes(r.body["messages"][-1]["content"])).body)
    return Reply(200, lambda r: anthropic_message(_notes(r.body["messages"][-1]["content"])).body)


def _runs(work: Path, hold: bool, provider: str, datas: list[bytes], replies: list[Reply],
          loads: list[Any], **kw: Any) -> list[tuple[Any, ...]]:
    """``helpers.runs_on_one_file`` with ``provider`` as the summarizer, against a server answering
    ``replies`` (then echoes); each run's answer ends with the bodies of the requests it sent, then whether
    it held the file."""
    with ProviderServer() as server:
        server.push(*replies, *[_echo(provider)] * 40)
        url = server.openai_url if provider == "openai" else server.url
        opts = {"summarizer": provider, "summary_model": "m", "base_url": url, "api_key": "k-test",
                "max_retries": 0, **kw}
        taken = 0

        def sent(r: Any) -> tuple[Any, ...]:
            nonlocal taken
            got = [(x.path, x.raw) for x in server.received[taken:]]
            taken = len(server.received)
            return (got, r.exit_code)

        return runs_on_one_file(work, hold, datas, [opts] * len(datas), loads, sent)


def _same_as_held(work: Path, provider: str, datas: list[bytes], loads: list[Any],
                  replies: list[Reply] | None = None, **kw: Any) -> list[tuple[Any, ...]]:
    """The streamed runs, checked against the held route's: the same requests, output, state, warnings;
    each compaction made without holding the file."""
    streamed = _runs(work / "s", False, provider, datas, list(replies or []), loads, **kw)
    held = _runs(work / "h", True, provider, datas, list(replies or []), loads, **kw)
    assert [s[:-1] for s in streamed] == [h[:-1] for h in held]
    assert [s[-1] for s in streamed] == [False] * len(datas)  # (the streamed route: the file never held)
    assert any(s[3] for s in streamed)  # something was compacted
    assert any(s[-3] for s in streamed)  # and a request was sent
    return streamed


def _halves(path: Path) -> list[bytes]:
    """The first half of a log's lines, then all of them: a compaction, then one after it (a prior
    summary)."""
    lines = path.read_bytes().splitlines(keepends=True)
    return [b"".join(lines[: len(lines) // 2]), b"".join(lines)]


def _requests(got: list[tuple[Any, ...]]) -> list[list[tuple[str, bytes]]]:
    return [g[-3] for g in got if not isinstance(g[0], str)]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_the_streamed_requests_and_outputs_are_the_held_routes(provider: str, tmp_path: Path,
                                                               loads: list[Any]) -> None:
    """A compaction, then a second one carrying the first's summary as the prior summary."""
    got = _same_as_held(tmp_path, provider, _halves(SAMPLES / "openai-long.jsonl"), loads, window=3_000)
    sent = _requests(got)
    assert all(path == PATHS[provider] for run in sent for path, _ in run)
    assert sum(b"<prior_summary>" in raw for run in sent for _, raw in run) >= 1  # (the second compaction)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_summary_in_chunks_sends_the_held_routes_requests(provider: str, tmp_path: Path,
                                                            loads: list[Any]) -> None:
    """A summarizer window far smaller than the conversation: map-reduce over pieces read again one at a
    time, the same pieces and requests as the held route's."""
    got = _same_as_held(tmp_path, provider, _halves(SAMPLES / "openai-long.jsonl"), loads, window=3_000,
                        summary_window=2_000)
    assert max(len(run) for run in _requests(got)) >= 3


def test_a_context_length_error_is_retried_as_on_the_held_route(tmp_path: Path, loads: list[Any]) -> None:
    """The server says the request does not fit: the records are read again for the smaller window."""
    got = _same_as_held(tmp_path, "openai", _halves(SAMPLES / "openai-long.jsonl")[1:], loads,
                        [openai_context_error(3_000)], window=3_000)
    assert len(_requests(got)[0]) >= 2


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_failed_provider_falls_back_to_the_same_extractive_summary(provider: str, tmp_path: Path,
                                                                     loads: list[Any]) -> None:
    fail = openai_error(500, "down") if provider == "openai" else anthropic_error(529, "Overloaded")
    got = _same_as_held(tmp_path, provider, _halves(SAMPLES / "openai-long.jsonl")[1:], loads, [fail],
                        window=3_000)
    assert any("using the extractive summary instead" in w for w in got[0][7])


def test_a_rejected_summary_falls_back_to_the_same_extractive_summary(tmp_path: Path,
                                                                      loads: list[Any]) -> None:
    """The check rejects a reply with no section: the fact feed is read by the check, then by the
    extractive summary standing in."""
    bad = openai_completion("I would rather not.")
    got = _same_as_held(tmp_path, "openai", _halves(SAMPLES / "openai-long.jsonl")[1:], loads, [bad],
                        window=3_000)
    assert any("failed the check" in w for w in got[0][7])


@pytest.mark.parametrize(("log", "window"), [
    ("claude-code/agentlogs-claude-crud.jsonl", 20_000),
    ("claude-code/agtrace-claude-session.jsonl", 20_000),
    ("claude-code/spotter-compact-excerpt.jsonl", 50_000),  # (an earlier compaction in the log)
    ("codex/agentlogs-codex-crud.jsonl", 8_000),
    ("codex/localpush-rollout-compacted-excerpt.jsonl", 50_000),
])
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_agent_logs_stream_with_the_held_routes_requests(log: str, window: int, provider: str,
                                                         tmp_path: Path, loads: list[Any]) -> None:
    """Claude Code and Codex logs: the input's lines copied, then the compaction, its summary made of the
    records read again."""
    _same_as_held(tmp_path, provider, [(DATA / log).read_bytes()], loads, window=window)


def test_the_sliding_windows_events_stream_with_an_llm(tmp_path: Path, loads: list[Any]) -> None:
    """The sliding window hands each window's records to the summarizer (held within twice the window):
    with an LLM summarizer too, the held route's requests and events."""
    sw = {"strategy": "sliding-window", "invocation_threshold": 3, "overlap": 1, "window": 1_000_000}
    _same_as_held(tmp_path, "openai", [(SAMPLES / "openai-long.jsonl").read_bytes()], loads, **sw)


# --- what is held ---------------------------------------------------------------------------------------

class _Reread:
    """Records made again at each iteration (as a streamed run reads them again), noting how far the
    current iteration has gone and how many iterations were started."""

    def __init__(self, sizes: list[int]) -> None:
        self.sizes, self.at, self.iterations = sizes, 0, 0

    def __iter__(self) -> Iterator[Record]:
        self.iterations += 1
        for i, n in enumerate(self.sizes):
            self.at = i + 1
            yield Record(index=i, line=i + 1, raw=None, data=None, origin=Origin.INPUT,
                         message=Message(role=Role.USER, blocks=[TextBlock(f"m{i} " + "q" * n)]))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=20_000), min_size=0, max_size=30),
       st.integers(min_value=1_000, max_value=6_000), st.integers(min_value=0, max_value=8_000))
def test_the_pieces_are_made_one_at_a_time(sizes: list[int], budget: int, prior: int) -> None:
    """``prompt.chunks`` over records read again at each iteration: the pieces the list gives, in three
    readings."""
    again = _Reread(sizes)
    req = SummaryRequest(records=again, budget_tokens=300, prior_summary="p" * prior or None,
                         latest_request="do the thing")
    whole = chunk_records(dataclasses.replace(req, records=list(again)), budget)
    again.iterations = 0
    made: list[list[int]] = []
    for piece in chunks(req, budget):
        made.append([r.index for r in piece])
    assert made == [[r.index for r in c] for c in whole]
    assert again.iterations <= 3


def test_a_piece_is_given_before_the_next_is_read() -> None:
    """Records each too large to share a piece: each piece is given as soon as its record was read, so what
    is held is a piece, not the conversation."""
    again = _Reread([9_000] * 6)
    req = SummaryRequest(records=again, budget_tokens=300, latest_request="do the thing")
    read = [again.at for _piece in chunks(req, 3_000)]
    assert read == [1, 2, 3, 4, 5, 6]


def _peak(path: Path, hold: bool, url: str) -> int:
    from ctxcompact import engine
    from ctxcompact.options import Options

    gc.collect()
    tracemalloc.start()
    try:
        r = engine.run(path, Options(window=20_000, use_state=False, exact="none", summarizer="openai",
                                     summary_model="m", base_url=url, summary_window=64_000, max_retries=0),
                       output=path.with_suffix(".out"), hold=hold, warn=lambda m: None)
        assert r.compacted and r.summary is not None and r.summary.summarizer == "openai"
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_of_an_llm_compaction_does_not_grow_with_the_file(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Peak traced memory of a compaction with the openai summarizer (its pieces fitted to a 64k window) on
    N and 4N lines: the streamed run's grows by little per added record (pass 1's counts, the tool names
    by call id the prompt names results by), the held run's by the records (so the test can fail). Pass 1
    counts in batches of 256 records (not 4,096), so both files fill a batch (test_run_streamed's
    ``small_batches``)."""
    from ctxcompact import stream_totals

    monkeypatch.setattr(stream_totals.Totals, "BATCH_RECORDS", 256)
    n = 2_001
    small, big = tool_loop_log(tmp_path / "small.jsonl", n), tool_loop_log(tmp_path / "big.jsonl", 4 * n)
    fewer = tool_loop_log(tmp_path / "fewer.jsonl", n // 3)
    with ProviderServer() as server:
        def forgetful(r: Any) -> Any:  # (the server keeps no request: its memory is not the run's)
            server.received.clear()
            return openai_completion(_notes(r.body["messages"][-1]["content"])).body

        server.push(*[Reply(200, forgetful)] * 1000)
        _peak(fewer, False, server.openai_url)  # warm: imports, the SDK, caches
        streamed = (_peak(big, False, server.openai_url) - _peak(small, False, server.openai_url)) / (3 * n)
        held = (_peak(small, True, server.openai_url) - _peak(fewer, True, server.openai_url)) / (n - n // 3)
    assert streamed < 128, f"{streamed:.0f} B per record (held: {held:.0f})"
    assert held > 8 * 128, held


def test_a_file_changed_before_the_summary_is_an_error_and_nothing_is_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A byte changed after pass 2 read the conversation: the records read again for the prompt do not
    hash as pass 1's, so the run fails (exit 1) before any request, and writes nothing."""
    from ctxcompact import engine, route_file
    from ctxcompact.errors import CtxCompactError
    from ctxcompact.options import Options

    path, out = tmp_path / "t.jsonl", tmp_path / "out.jsonl"
    path.write_bytes((SAMPLES / "openai-long.jsonl").read_bytes())
    real = route_file.read_conversation

    def then_rewrite(*a: Any, **k: Any) -> Any:
        got = real(*a, **k)
        flip_a_content_byte(path)
        return got

    monkeypatch.setattr(route_file, "read_conversation", then_rewrite)
    out.write_bytes(b"before\n")
    with ProviderServer() as server:
        opts = Options(window=3_000, use_state=False, summarizer="openai", summary_model="m",
                       base_url=server.openai_url, max_retries=0)
        with pytest.raises(CtxCompactError, match="changed while it was read") as err:
            engine.run(path, opts, output=out, hold=False, warn=lambda m: None)
        assert err.value.exit_code == 1
        assert server.received == []
    assert out.read_bytes() == b"before\n"

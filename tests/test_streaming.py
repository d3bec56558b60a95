"""``estimate`` of a large file streams through the same stages as the held route (streaming.py): the same
report, whatever the transcript (except what masking would free, which needs the whole context and is null
when streamed), the same errors, and memory that follows one settled part, not the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers import SAMPLES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxcompact import engine, route_estimate, stream_totals, streaming
from ctxcompact.clean import Cleaner
from ctxcompact.errors import CtxCompactError
from ctxcompact.options import Options

DATA = Path(__file__).parent / "data"
FILES = sorted([*DATA.rglob("*.jsonl"), *SAMPLES.glob("*.jsonl")])
MASKING = ("maskable_tokens", "maskable_results")


def _report(path: Path, stream: bool, monkeypatch: pytest.MonkeyPatch, **kw: Any) -> tuple[str, Any]:
    taken: list[bool] = []
    real = streaming.stream_report

    def spy(*a: Any, **k: Any) -> Any:
        out = real(*a, **k)
        taken.append(out is not None)
        return out

    with monkeypatch.context() as m:
        m.setattr(streaming, "STREAMING_FROM_BYTES", 0 if stream else 1 << 62)
        m.setattr(route_estimate, "stream_report", spy)
        try:
            got = engine.estimate(path, Options(use_state=False, **kw)).to_json()
        except CtxCompactError as exc:
            return "error", (type(exc).__name__, str(exc))
    if stream and taken and taken[0]:
        assert got["maskable_tokens"] is None
        return "streamed", {k: v for k, v in got.items() if k not in MASKING}
    return "held", {k: v for k, v in got.items() if k not in MASKING}


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(p.parents[1])) for p in FILES])
def test_every_test_file_gives_the_held_report(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    how, held = _report(path, False, monkeypatch, exact="none")
    how2, streamed = _report(path, True, monkeypatch, exact="none")
    assert streamed == held
    assert how2 in ("streamed", "held") or how == "error"


def test_the_openai_and_anthropic_samples_stream_and_count_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("openai-session", "openai-long", "anthropic-session"):
        path = SAMPLES / f"{name}.jsonl"
        how, streamed = _report(path, True, monkeypatch)
        assert how == "streamed", name
        assert streamed == _report(path, False, monkeypatch)[1]


IDS = ["a", "b", "c"]


@st.composite
def openai_lines(draw: st.DrawFn) -> bytes:
    """Long OpenAI transcripts of well-formed turns with faults anywhere (repeated ids, orphan and moved
    results, pending calls, system lines, usage), ending anywhere (on a tool result too)."""
    n = iter(range(100_000))
    fresh = iter(f"k{i}" for i in range(100_000))
    lines: list[dict[str, Any]] = [{"role": "system", "content": "sys"}]
    for _ in range(draw(st.integers(1, 60))):
        kind = draw(st.sampled_from(["qa", "tools", "tools", "tools", "fault", "usage"]))
        if kind == "qa":
            lines += [{"role": "user", "content": f"q{next(n)}"},
                      {"role": "assistant", "content": f"a{next(n)}"}]
        elif kind in ("tools", "usage"):
            ids = [next(fresh) for _ in range(draw(st.integers(1, 3)))]
            call = {"role": "assistant", "content": None, "tool_calls": [
                {"id": i, "type": "function", "function": {"name": "ls", "arguments": "{}"}} for i in ids]}
            if kind == "usage":
                call["usage"] = {"prompt_tokens": draw(st.integers(1, 50_000))}
            lines += [{"role": "user", "content": f"q{next(n)}"}, call,
                      *({"role": "tool", "tool_call_id": i, "content": f"r{next(n)}"} for i in ids)]
        else:
            cid = draw(st.sampled_from(IDS))
            lines.append(draw(st.sampled_from([
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": cid, "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": cid, "content": f"r{next(n)}"},
                {"role": "system", "content": "later"},
                {"role": "user", "content": "again"}])))
    return b"".join(orjson.dumps(x) + b"\n" for x in lines)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=openai_lines(), exact=st.sampled_from(["none", "tiktoken"]), first=st.integers(1, 8))
def test_any_transcript_streams_to_the_held_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   data: bytes, exact: str, first: int) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(data)
    monkeypatch.setattr(Cleaner, "FIRST_TRY", first)  # parts settle early and often
    how, streamed = _report(path, True, monkeypatch, exact=exact, window=20_000, format="openai")
    assert how == "streamed"
    assert streamed == _report(path, False, monkeypatch, exact=exact, window=20_000, format="openai")[1]


def test_a_large_clean_file_streams_in_bounded_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = []
    for i in range(3_000):
        lines += [{"role": "user", "content": f"q{i}"},
                  {"role": "assistant", "content": None, "tool_calls": [
                      {"id": f"c{i}", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
                  {"role": "tool", "tool_call_id": f"c{i}", "content": "x" * 50},
                  {"role": "assistant", "content": f"a{i}"}]
    path = tmp_path / "big.jsonl"
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    most = [0]
    real = Cleaner.feed

    def watching(self: Cleaner, rec: Any) -> Any:
        most[0] = max(most[0], len(self.held))
        return real(self, rec)

    monkeypatch.setattr(Cleaner, "feed", watching)
    monkeypatch.setattr(stream_totals.Totals, "BATCH_BYTES", 10_000)
    how, streamed = _report(path, True, monkeypatch, exact="none")
    assert how == "streamed" and streamed["records"] == 12_000
    assert most[0] <= Cleaner.FIRST_TRY + 4  # never more than one part held


def test_a_bad_line_is_reported_as_when_held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"role": "user", "content": "hi"}\n{not json\n'
                     b'{"role": "assistant", "content": "ok"}\n')
    assert _report(path, True, monkeypatch)[0] == "error"
    assert _report(path, True, monkeypatch) == _report(path, False, monkeypatch)
    lenient = _report(path, True, monkeypatch, lenient=True)
    assert lenient == _report(path, False, monkeypatch, lenient=True) and lenient[0] == "held"

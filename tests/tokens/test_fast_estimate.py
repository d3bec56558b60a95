"""The streaming fast path of `estimate` gives the full path's report, figure for figure, or steps aside.

Every comparison runs the same call twice: once as users get it (fast path where eligible) and once with the
fast path switched off (the full path: whole model, cleaning, counting). Reports must be equal as JSON."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers import REPO, SAMPLES, assistant, coding_session, jsonl, sys_msg, tool, user
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxcompact import engine
from ctxcompact.errors import InputError
from ctxcompact.options import Options
from ctxcompact.state import Calibration, new_state, save_state
from ctxcompact.tokens import fast

sys.path.insert(0, str(REPO / "bench"))
import gen_openai  # the bench's transcript generator

DATA = REPO / "tests" / "data"
ALL_FILES = sorted(SAMPLES.glob("*.jsonl")) + sorted(DATA.glob("*/*.jsonl"))


@pytest.fixture(autouse=True)
def stream_every_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small test files take the streaming path too, so it is compared with the full one on every shape."""
    monkeypatch.setattr(engine, "STREAMING_FROM_BYTES", 0)


MASKING_KEYS = ("maskable_tokens", "maskable_results")  # only the full path parses enough to say


def comparable(report: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in report.items() if k not in MASKING_KEYS}


def full_report(source: Any, opts: Options, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    with monkeypatch.context() as m:
        m.setattr(engine, "_fast_estimate", lambda *a, **k: None)
        return comparable(engine.estimate(source, opts).to_json())


def took_fast(path: Path, opts: Options) -> bool:
    return engine._fast_estimate(path, opts, None, engine._budget(opts), None) is not None


def both(path: Path, monkeypatch: pytest.MonkeyPatch, **kw: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    opts = Options(use_state=False, **kw)
    return comparable(engine.estimate(path, opts).to_json()), full_report(path, opts, monkeypatch)


def write(tmp_path: Path, objs: list[Any], name: str = "t.jsonl") -> Path:
    path = tmp_path / name
    path.write_bytes(jsonl(objs))
    return path


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
@pytest.mark.parametrize("exact", ["none", "tiktoken"])
def test_every_sample_and_test_file_gives_the_full_report(
    path: Path, exact: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    opts = Options(use_state=False, exact=exact, window=8000)
    try:
        expected = full_report(path, opts, monkeypatch)
    except InputError:  # a broken file: the fast path must step aside and let the full path say why
        assert not took_fast(path, opts)
        with pytest.raises(InputError):
            engine.estimate(path, opts)
        return
    assert comparable(engine.estimate(path, opts).to_json()) == expected


def test_the_openai_samples_take_the_fast_path() -> None:
    # otherwise the parity test above would only ever compare the full path with itself
    for name in ("openai-session.jsonl", "openai-long.jsonl"):
        assert took_fast(SAMPLES / name, Options(use_state=False, exact="none"))
    assert not took_fast(SAMPLES / "anthropic-session.jsonl", Options(use_state=False, exact="none"))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_generated_transcripts(tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "gen.jsonl"
    gen_openai.write(path, 0.4, seed)
    for exact in ("none", "tiktoken"):
        assert took_fast(path, Options(use_state=False, exact=exact))
        fast, full = both(path, monkeypatch, exact=exact)
        assert fast == full
        assert fast["tokens"]["heuristic"] > 0


def test_exact_counts_are_tiktokens(tmp_path: Path) -> None:
    from ctxcompact.tokens.exact import get_encoding

    enc = get_encoding("o200k_base")
    text = "naïve café → 東京 <|endoftext|> def f(x):\n    return x"
    path = write(tmp_path, [user(text), assistant(None, [("c1", "grep", {"q": "x"})]), tool("c1", "ok"),
                            assistant("done")])
    fc = fast.count_file(path, encoding="o200k_base")
    args = orjson.dumps({"q": "x"}).decode()
    want = [len(enc.encode_ordinary(text)), len(enc.encode_ordinary("grep\n" + args)),
            len(enc.encode_ordinary("ok")), len(enc.encode_ordinary("done"))]
    assert fc.exact is not None and list(fc.exact) == want


def test_missing_results_are_counted_like_the_cleaner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    objs = [sys_msg("sys"), user("go"),
            assistant(None, [("a", "read", {"p": 1}), ("b", "read", {"p": 2})]), tool("a", "x" * 50),
            user("and?"),  # b never answered: a synthetic result goes before this line
            assistant(None, [("c", "ls", {})])]  # ends on an unanswered call: result + Understood.
    path = write(tmp_path, objs)
    for exact in ("none", "tiktoken"):
        assert took_fast(path, Options(use_state=False, exact=exact))
        fast, full = both(path, monkeypatch, exact=exact)
        assert fast == full
        assert fast["repairs"] == 3  # two missing results, one appended reply
        assert fast["messages"] == {"system": 1, "user": 2, "assistant": 3, "tool": 3}
        assert fast["records"] == 6  # input lines, not the synthetic ones


def test_trailing_tool_result_appends_a_reply(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, coding_session(3)[:-1])  # ends on the tool result
    fast, full = both(path, monkeypatch, exact="none")
    assert fast == full and fast["repairs"] == 1
    # "Understood." is 11 characters
    assert fast["chars"] == engine.estimate(
        write(tmp_path, [*coding_session(3)[:-1], assistant("Understood.")], "u.jsonl"),
        Options(use_state=False, exact="none")).chars


def test_usage_in_the_transcript_calibrates_identically(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = coding_session(6)
    session[5] = {**session[5], "usage": {"prompt_tokens": 9000, "completion_tokens": 12}}
    session[9] = {**session[9], "usage": {"prompt_tokens": 0}}  # ignored: not a report of the prompt
    # no prompt count at all (a bool there is a schema error: estimate rejects it as run does)
    session[10] = {**session[10], "usage": {"completion_tokens": 7}}
    path = write(tmp_path, [sys_msg("s"), *session])
    for exact in ("none", "tiktoken"):
        fast, full = both(path, monkeypatch, exact=exact)
        assert fast == full
        assert "transcript usage up to line 7" in fast["correction"]["source"]
        # 9,000 tokens for a prefix of about a thousand: no tokenizer ratio, a hidden part; the visible
        # part of the request still counts, so the hidden part is less than the whole
        assert 6000 < fast["correction"]["hidden"] < 9000


def test_state_calibration_and_real_tokens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, [sys_msg("s"), *coding_session(4)])
    state_path = tmp_path / "s.json"
    st_obj = new_state("openai")
    st_obj.calibration = Calibration(real=5000, last_estimate=2000, factor=2.5, estimator="heuristic")
    save_state(state_path, st_obj)
    for kw in ({}, {"real_tokens": 7000}, {"default_factor": 3.0}):
        opts = Options(state_path=state_path, exact="none", **kw)
        fast = comparable(engine.estimate(path, opts).to_json())
        assert fast == full_report(path, opts, monkeypatch)
    assert engine.estimate(path, Options(state_path=state_path, exact="none")).calibrated.source == "state"


def test_a_state_with_a_watermark_takes_the_full_path(tmp_path: Path) -> None:
    st_obj = new_state("openai")
    st_obj.watermark = 3
    (tmp_path / "x.jsonl").write_bytes(b"")
    assert not engine.fast_path_allowed(tmp_path / "x.jsonl", Options(), st_obj)
    assert not engine.fast_path_allowed("-", Options(), None)
    assert not engine.fast_path_allowed(tmp_path / "x.jsonl", Options(strategy="mask"), None)
    assert not engine.fast_path_allowed(tmp_path / "x.jsonl", Options(exact="anthropic"), None)
    assert not engine.fast_path_allowed(tmp_path / "x.jsonl", Options(format="anthropic"), None)
    assert engine.fast_path_allowed(tmp_path / "x.jsonl", Options(format="openai"), None)


@pytest.mark.parametrize(
    "objs",
    [
        [user("u"), tool("nobody", "orphan")],  # a result with no call
        [assistant(None, [("a", "f", {})]), user("between"), tool("a", "late")],  # moved result
        [assistant(None, [("a", "f", {}), ("b", "f", {})]), tool("b", "1"), tool("a", "2")],  # reordered
        [assistant(None, [("a", "f", {})]), tool("a", "1"),
         assistant(None, [("a", "f", {})]), tool("a", "2")],
        [{"role": "function", "content": "legacy"}],  # refused by the parser
        [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x"}]}],  # anthropic block
    ],
    ids=["orphan", "moved", "reordered", "duplicate-id", "legacy-role", "wrong-part"],
)
def test_what_the_cleaner_must_rewrite_takes_the_full_path(
    tmp_path: Path, objs: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path, [sys_msg("s"), *objs])
    opts = Options(use_state=False, exact="none", format="openai")
    assert not took_fast(path, opts)
    try:
        expected = full_report(path, opts, monkeypatch)
    except InputError:
        with pytest.raises(InputError):
            engine.estimate(path, opts)
        return
    assert comparable(engine.estimate(path, opts).to_json()) == expected


def test_bad_json_line_is_reported_by_the_full_path(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(jsonl([user("a")]) + b'{"role": "user", "content": \n' + jsonl([user("b")]))
    with pytest.raises(InputError) as info:
        engine.estimate(path, Options(use_state=False, exact="none"))
    assert info.value.problems[0].line == 2


def test_empty_one_record_blank_lines_bom_crlf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cases = {
        "empty": b"",
        "blank": b"\n  \n\n",
        "one": jsonl([user("hello")]),
        "bom-crlf": b"\xef\xbb\xbf" + jsonl([sys_msg("s"), user("h\u00e9")]).replace(b"\n", b"\r\n"),
        "no-final-newline": jsonl([sys_msg("s"), user("x")]).rstrip(b"\n"),
    }
    for name, data in cases.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes(data)
        opts = Options(use_state=False, exact="none")
        assert took_fast(path, opts), name
        assert comparable(engine.estimate(path, opts).to_json()) == full_report(path, opts, monkeypatch), name
    assert engine.estimate(tmp_path / "empty.jsonl", Options(use_state=False, exact="none")).records == 0


def test_huge_record_and_unicode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    big = "日本語 text ✓ " * 200_000  # ~2.4M characters, non-ASCII: chars are code points, not bytes
    path = write(tmp_path, [sys_msg("s"), user("read"), assistant(None, [("c", "read", {"p": "x"})]),
                            tool("c", big), assistant("ok")])
    fast, full = both(path, monkeypatch, exact="tiktoken")
    assert fast == full
    assert fast["chars"] >= len(big)


def test_content_parts_images_and_refusals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    parts = [{"type": "text", "text": "look"}, image, {"type": "text", "text": ""}]
    path = write(tmp_path, [user("hi"), {"role": "user", "content": parts},
                            {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]},
                            {"role": "assistant", "content": [{"type": "refusal", "refusal": ""}]},
                            {"role": "developer", "content": "rules"}])
    for exact in ("none", "tiktoken"):
        fast, full = both(path, monkeypatch, exact=exact)
        assert fast == full
        assert fast["tokens"]["heuristic"] >= 1600  # the image's fixed cost, not its base64


def test_undecided_detection_steps_aside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # plain text messages read as openai and anthropic alike: detection reads the whole file
    objs = [user(f"u{i}") if i % 2 else {"role": "assistant", "content": f"a{i}"} for i in range(80)]
    path = write(tmp_path, objs)
    opts = Options(use_state=False, exact="none")
    assert not took_fast(path, opts)
    assert comparable(engine.estimate(path, opts).to_json()) == full_report(path, opts, monkeypatch)
    assert took_fast(path, Options(use_state=False, exact="none", format="openai"))


# A small grammar of OpenAI transcripts: turns with parallel calls whose results may be missing, late or
# out of order, plain text, parts and usage. Whatever comes out, both paths must agree.
_call_ids = st.sampled_from(["a", "b", "c", "d"])


@st.composite
def transcripts(draw: st.DrawFn) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [sys_msg(draw(st.text(max_size=20)))]
    for t in range(draw(st.integers(0, 6))):
        out.append(user(draw(st.text(max_size=30))))
        ids = draw(st.lists(_call_ids, max_size=3, unique=True))
        extra = {"usage": {"prompt_tokens": draw(st.integers(0, 5000))}} if draw(st.booleans()) else {}
        out.append(assistant(draw(st.one_of(st.none(), st.text(max_size=10))),
                             [(f"{i}{t}", "tool", {"n": t}) for i in ids], **extra))
        answered = draw(st.permutations(ids)) if draw(st.booleans()) else ids
        for i in answered:
            if draw(st.integers(0, 9)) > 0:
                out.append(tool(f"{i}{t}", draw(st.text(max_size=40))))
        if draw(st.booleans()):
            out.append(assistant(draw(st.text(max_size=15))))
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(objs=transcripts(), exact=st.sampled_from(["none", "tiktoken"]))
def test_any_transcript_gives_the_full_report(
    tmp_path: Path, objs: list[dict[str, Any]], exact: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path, objs, "h.jsonl")
    opts = Options(use_state=False, exact=exact, window=4000, format="openai")
    assert comparable(engine.estimate(path, opts).to_json()) == full_report(path, opts, monkeypatch)


def test_worker_processes_count_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # large files are counted on forked workers over byte ranges: same lines, numbers, usage and counts
    session = coding_session(30)
    session[7] = {**session[7], "usage": {"prompt_tokens": 4321}}
    path = tmp_path / "w.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + jsonl([sys_msg("s"), *session[:20]]) + b"\n\n"
                     + jsonl(session[20:]).replace(b"\n", b"\r\n"))
    serial = fast.count_file(path, encoding="o200k_base", jobs=1)
    monkeypatch.setattr(fast, "PARALLEL_BYTES", 0)
    assert len(fast._ranges(path, path.stat().st_size, 8)) == 8
    parallel = fast.count_file(path, encoding="o200k_base", jobs=2)
    assert parallel == serial
    assert fast.count_file(path, jobs=2).exact is None  # heuristic counts stay in-process
    # BOM line 1 is the system prompt; the usage is on the 8th message
    assert [line for _, line, _ in serial.usage] == [9]
    for exact in ("tiktoken", "none"):
        opts = Options(use_state=False, exact=exact, format="openai")
        assert comparable(engine.estimate(path, opts).to_json()) == full_report(path, opts, monkeypatch)


def test_ranges_start_at_line_starts(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    data = jsonl([user("x" * n) for n in (5, 500, 1, 50_000, 3, 7)])
    path.write_bytes(data)
    ranges = fast._ranges(path, len(data), 5)
    assert ranges[0][0] == 0 and ranges[-1][1] == len(data)
    for (_a, b), (c, _d) in itertools.pairwise(ranges):
        assert b == c and (b == len(data) or data[b - 1 : b] == b"\n")


@pytest.mark.parametrize("strategy", ["threshold", "sliding-window", "mask"])
def test_estimate_says_what_masking_would_free_whatever_the_strategy(
    strategy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Below the streaming size every strategy's estimate reports maskable_tokens, and it is what
    --strategy mask would free (the same figure mask's own estimate gives)."""
    monkeypatch.setattr(engine, "STREAMING_FROM_BYTES", 1 << 40)
    path = SAMPLES / "openai-long.jsonl"
    opts = Options(use_state=False, window=32000, strategy=strategy)
    got = engine.estimate(path, opts).to_json()
    mask = engine.estimate(path, Options(use_state=False, window=32000, strategy="mask")).to_json()
    assert got["maskable_tokens"] == mask["maskable_tokens"] > 1000
    assert got["maskable_results"] == mask["maskable_results"] > 0
    small = engine.estimate(SAMPLES / "openai-session.jsonl", opts).to_json()
    assert small["maskable_tokens"] == 0 or small["maskable_tokens"] < got["maskable_tokens"]


def test_a_streamed_estimate_says_it_did_not_compute_masking(monkeypatch: pytest.MonkeyPatch) -> None:
    path = SAMPLES / "openai-long.jsonl"
    opts = Options(use_state=False, window=32000)
    assert took_fast(path, opts)
    streamed = engine.estimate(path, opts).to_json()
    assert streamed["maskable_tokens"] is None and streamed["maskable_results"] is None
    monkeypatch.setattr(engine, "STREAMING_FROM_BYTES", path.stat().st_size + 1)
    assert not took_fast(path, opts)
    assert engine.estimate(path, opts).to_json()["maskable_tokens"] > 0

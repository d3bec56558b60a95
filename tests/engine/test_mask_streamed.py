"""``run --strategy mask`` and ``--prune`` from the command line do not hold the file (mask_stream.py,
route_file.mask_streamed): below the threshold the context passes through in pass 2; over it the masking is
made of the file read again by the held route's own MaskScan and MaskPlan. Whatever it takes, the output,
the state, the exit code and the warnings are the held route's, byte for byte; its memory does not follow
the records (what it keeps of each is a few figures)."""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from helpers import SAMPLES, tool_loop_log
from test_run_streamed import FILES, _run

from ctxcompact import engine, mask_stream, route_file
from ctxcompact.options import Options

#: mask's options and --prune's, as a hook passes them
CASES: list[dict[str, Any]] = [
    {"strategy": "mask"},
    {"strategy": "mask", "keep_results": 1, "protect_tokens": 0},
    {"strategy": "mask", "keep_results": 0, "protect_tokens": 0, "clear_thinking": True, "min_savings": 0},
    {"strategy": "mask", "exclude_tools": ("bash",), "protect_tokens": 50},
    {"prune": True},
    {"prune": True, "keep_results": 0, "protect_tokens": 0},
]


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(p.parents[1])) for p in FILES])
def test_every_test_file_masks_as_the_held_run(path: Path, tmp_path: Path) -> None:
    """Over the threshold at two windows with each case; below it (the pass-through) with mask and --prune."""
    runs = [(w, kw) for w in (3_000, 8_000) for kw in CASES] + [(1_000_000, CASES[0]), (1_000_000, CASES[4])]
    for i, (window, kw) in enumerate(runs):
        held = _run(path, tmp_path / f"held{i}", True, window, **kw)
        streamed = _run(path, tmp_path / f"streamed{i}", False, window, **kw)
        assert streamed == held, (window, kw)


def _last(made: list[bool], result: Any) -> Any:
    made.append(result is not None)
    return result


@pytest.mark.parametrize(("window", "kw"), [(3_000, {"strategy": "mask"}),
                                           (3_000, {"strategy": "mask", "keep_results": 1}),
                                           (12_000, {"prune": True})])
def test_a_masking_is_made_in_pass_2_without_holding_the_file(window: int, kw: dict[str, Any], tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Over the threshold, the masking (--prune's mask tier too) is made by the streamed route (the held
    route is not read: no InputData.load), its output read again by ``lines()``; the held route's
    transcript when asked for."""
    from ctxcompact import source

    made: list[bool] = []
    real = route_file.mask_streamed
    monkeypatch.setattr(route_file, "mask_streamed", lambda *a: _last(made, real(*a)))
    loads: list[Any] = []
    load = source.InputData.load
    monkeypatch.setattr(source.InputData, "load",
                        staticmethod(lambda *a, **k: loads.append(a) or load(*a, **k)))
    src = SAMPLES / "openai-long.jsonl"
    path = tmp_path / "t.jsonl"
    path.write_bytes(src.read_bytes())
    out = tmp_path / "o.jsonl"
    r = engine.run(path, Options(window=window, use_state=False, **kw), output=out, hold=False,
                   warn=lambda m: None)
    assert made == [True] and r.compacted and r.outcome is not None and r.outcome.masked > 0
    assert out.read_bytes() == b"".join(r.lines())
    assert not any(a and a[0] == path for a in loads)  # the file was never read whole by the run
    held = engine.run(path, Options(window=window, use_state=False, **kw), output=None, hold=True,
                      warn=lambda m: None)
    assert r.transcript.records == held.transcript.records  # made when read, as the held route makes it
    assert r.records_written() == held.records_written()
    assert r.estimate.extras == held.estimate.extras
    assert r.estimate.would_compact == held.estimate.would_compact


def test_what_the_masking_reads_is_gathered_in_pass_1_of_a_large_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file far over the threshold: pass 1 scans what the choice reads as it counts (mask_stream.gathering),
    so the masking reads the file twice more (mask, write), not three times; a file near it scans apart."""
    reads: list[int] = []
    real = mask_stream.context_parts
    monkeypatch.setattr(mask_stream, "context_parts", lambda *a, **k: reads.append(1) or real(*a, **k))
    path = tool_loop_log(tmp_path / "t.jsonl", 900)
    for window, scans in ((4_000, 2), (20_000, 3)):
        reads.clear()
        r = engine.run(path, Options(window=window, use_state=False, strategy="mask", exact="none"),
                       output=tmp_path / "o.jsonl", hold=False, warn=lambda m: None)
        assert r.compacted and r.streamed is not None and len(reads) == scans, window
        assert _run(path, tmp_path / f"h{window}", True, window, strategy="mask", exact="none") == \
            _run(path, tmp_path / f"s{window}", False, window, strategy="mask", exact="none")


def test_a_second_call_with_a_mask_state_streams_and_applies_it_again(tmp_path: Path) -> None:
    """The hook's calls as the log grows, each with the state the last left (its masking applied again a
    record at a time): the held route's outputs and states, call after call."""
    lines = tool_loop_log(tmp_path / "src.jsonl", 600).read_bytes().splitlines(keepends=True)
    got: dict[bool, list[Any]] = {}
    for hold in (True, False):
        work = tmp_path / f"h{hold}"
        work.mkdir()
        path = work / "t.jsonl"
        got[hold] = []
        for end in (200, 260, 400, 405, 600):
            path.write_bytes(b"".join(lines[:end]))
            r = engine.run(path, Options(window=12_000, strategy="mask", keep_results=2, protect_tokens=500),
                           output=work / "o.jsonl", hold=hold, warn=lambda m: None)
            state = Path(f"{path}.ctxstate.json").read_bytes()
            got[hold].append(((work / "o.jsonl").read_bytes(), r.exit_code, r.compacted, r.warnings,
                              b'"masking"' in state))
            assert hold or r.streamed is not None, end  # passed through or masked, by the streamed route
    assert got[False] == got[True]
    assert any(c[2] for c in got[True]) and got[True][-1][4]  # masked, and the state holds the masking


def _peak(path: Path, hold: bool, strategy: dict[str, Any], check: bool = True) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        r = engine.run(path, Options(window=20_000, use_state=False, exact="none", **strategy),
                       output=path.with_suffix(".out"), hold=hold, warn=lambda m: None)
        assert not check or (r.compacted and (hold or r.streamed is not None))
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_streamed_masking_grows_by_less_than_half_the_held_per_record(tmp_path: Path) -> None:
    """What a masking keeps per record: a few figures of each result and the brief of each call (the
    scan), and what the state keeps of each result cleared (its placeholder: written to the state file
    anyway); ~940 B a record of this tool loop, where every third record's result is cleared, against
    ~2,200 held (every record parsed and kept)."""
    kw: dict[str, Any] = {"strategy": "mask"}  # (--prune's mask tier: the same code)
    n = 1_500
    small, big = tool_loop_log(tmp_path / "small.jsonl", n), tool_loop_log(tmp_path / "big.jsonl", 4 * n)
    _peak(tool_loop_log(tmp_path / "warm.jsonl", n // 3), False, kw, check=False)  # imports, patterns, caches
    streamed = (_peak(big, False, kw) - _peak(small, False, kw)) / (3 * n)
    held = (_peak(big, True, kw) - _peak(small, True, kw)) / (3 * n)
    assert streamed * 2 < held, (streamed, held)

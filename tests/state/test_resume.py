"""The count cache beside the state (docs/measurements/performance.md#a-hooks-call): a run that walks only the
appended bytes gives what a run from scratch gives, whatever the appends; a rewritten prefix or a corrupt
cache is rebuilt."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxcompact import api, engine
from ctxcompact.state.cache import cache_path

_GEN = Path(__file__).parent.parent.parent / "bench" / "gen_openai.py"
_spec = importlib.util.spec_from_file_location("gen_openai", _GEN)
assert _spec is not None and _spec.loader is not None
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)

LINES = [orjson.dumps(m) + b"\n" for m in gen.messages(7, 120_000)]


def _run(path: Path, out: Path, *, fast: bool, window: int = 400_000, **kw) -> tuple:
    saved = engine._fast_run
    if not fast:
        engine._fast_run = lambda *a, **k: None
    try:
        r = api.run(path, api.Options(window=window, **kw), output=out)
    finally:
        engine._fast_run = saved
    state = orjson.loads(Path(f"{path}.ctxstate.json").read_bytes())
    state["calibration"].pop("updated_at", None)
    rep = r.estimate
    return (out.read_bytes(), state, r.exit_code, r.compacted, rep.heuristic, rep.exact,
            rep.calibrated.tokens, rep.would_compact, rep.records, r.warnings)


def _sequence(tmp: Path, cuts: list[int], *, fast: bool, cold: bool, **kw) -> list[tuple]:
    path = tmp / "t.jsonl"
    path.write_bytes(b"")
    for f in (Path(f"{path}.ctxstate.json"), cache_path(f"{path}.ctxstate.json")):
        f.unlink(missing_ok=True)
    results = []
    for end in cuts:
        path.write_bytes(b"".join(LINES[:end]))
        if cold:
            cache_path(f"{path}.ctxstate.json").unlink(missing_ok=True)
        results.append(_run(path, tmp / "out.jsonl", fast=fast, **kw))
    return results


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.integers(min_value=1, max_value=len(LINES)), min_size=1, max_size=4),
       exact=st.sampled_from(["tiktoken", "none"]))
def test_any_split_of_appends_gives_the_cold_answer(tmp_path, cuts, exact):
    cuts = sorted(set(cuts))
    cached = _sequence(tmp_path, cuts, fast=True, cold=False, exact=exact)
    full = _sequence(tmp_path, cuts, fast=False, cold=True, exact=exact)
    assert cached == full


def test_the_cache_is_used_and_a_rewritten_prefix_rebuilds_it(tmp_path):
    path = tmp_path / "t.jsonl"
    out = tmp_path / "out.jsonl"
    path.write_bytes(b"".join(LINES[:60]))
    first = _run(path, out, fast=True)
    cache = cache_path(f"{path}.ctxstate.json")
    assert cache.exists()
    taken = []
    saved = engine._fast_run
    engine._fast_run = lambda *a, **k: taken.append(saved(*a, **k)) or taken[-1]
    try:
        path.write_bytes(b"".join(LINES[:65]))
        api.run(path, api.Options(window=400_000), output=out)
    finally:
        engine._fast_run = saved
    assert taken and taken[0] is not None  # the fast path, from the cache
    assert cache.stat().st_size > 0
    # rewrite a record of the counted prefix, keeping its length
    data = bytearray(b"".join(LINES[:65]))
    i = data.index(b'"content":"') + 11
    data[i:i + 3] = b"XYZ" if data[i:i + 3] != b"XYZ" else b"ABC"
    path.write_bytes(bytes(data))
    got = _run(path, out, fast=True)
    cache.unlink()
    want = _run(path, out, fast=False)
    assert got[4:] == want[4:] and got[0] == want[0]
    assert first[2] == 0


@pytest.mark.parametrize("damage", [b"", b"garbage", None])
def test_a_corrupt_cache_is_ignored(tmp_path, damage):
    path = tmp_path / "t.jsonl"
    out = tmp_path / "out.jsonl"
    path.write_bytes(b"".join(LINES[:50]))
    _run(path, out, fast=True)
    cache = cache_path(f"{path}.ctxstate.json")
    raw = cache.read_bytes()
    cache.write_bytes(raw[:-7] + b"\x00" * 7 if damage is None else damage)
    path.write_bytes(b"".join(LINES[:58]))
    got = _run(path, out, fast=True)
    want = _run(path, out, fast=False)
    assert got == want


def test_in_process_calls_reuse_the_snapshot_and_parse_on_demand(tmp_path):
    path = tmp_path / "t.jsonl"
    out = tmp_path / "out.jsonl"
    path.write_bytes(b"".join(LINES[:40]))
    api.run(path, api.Options(window=400_000))
    path.write_bytes(b"".join(LINES[:46]))
    got = api.run(path, api.Options(window=400_000))  # from the in-process memo, no output written
    dry = api.run(path, api.Options(window=400_000), dry_run=True)
    want = _run(path, out, fast=False)
    rep = got.estimate
    assert (rep.heuristic, rep.exact, rep.calibrated.tokens) == want[4:7]
    assert b"".join(got.lines()) == want[0]
    assert [r.raw for r in got.transcript.records] == [r.raw for r in dry.transcript.records]

"""The routes that used to hold the file: ``run --json`` and the library's ``run`` on a path take the
streamed route (engine.run(hold=False), streaming.py) and give what the held route gives, byte for byte:
the output, the state, the ``--json`` report (but ``maskable_tokens``, null when streamed, as ``estimate``'s
from 8 MiB: it needs the whole context) and the ``Transcript`` a library caller reads."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers import SAMPLES, assistant, comparable_state, grown_session, jsonl, sys_msg, user
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxcompact import api, engine, route_file, route_held
from ctxcompact.cli.render import run_json
from ctxcompact.errors import CtxCompactError
from ctxcompact.model import Transcript
from ctxcompact.options import Options

DATA = Path(__file__).parent.parent / "data"
FILES = [*sorted(SAMPLES.glob("*.jsonl")), *sorted(DATA.glob("openai/*.jsonl")),
         *sorted(DATA.glob("anthropic/*.jsonl")), *sorted(DATA.glob("codex/*.jsonl")),
         *sorted(DATA.glob("genai/*.jsonl"))]
MASKABLE = ("maskable_tokens", "maskable_results", "tokens_after_mask")  # (the last: mask's, --prune's)


def _report(r: api.RunResult, work: Path, streamed: bool) -> Any:
    """``run --json``'s object, the maskable keys checked and set aside (null when streamed, but for a
    streamed masking's: the held route's, tests/engine/test_mask_streamed.py)."""
    got = run_json(r, dry_run=False, output="o.jsonl")
    est = got["estimate"]
    popped = [est.pop(k, None) for k in MASKABLE]
    if streamed and r.streamed is not None and not (r.outcome is not None and r.outcome.tier == "mask"):
        assert popped == [None, None, None]
    return orjson.loads(orjson.dumps(got).replace(str(work).encode(), b"W"))


def _call(path: Path, work: Path, hold: bool, opts: Options) -> tuple[Any, ...]:
    out = work / "out.jsonl"
    said: list[str] = []
    try:
        r = engine.run(path, opts, output=out, warn=said.append, hold=hold)
    except CtxCompactError as exc:
        return "error", type(exc).__name__, exc.exit_code, str(exc).replace(str(work), "W")
    written = re.sub(rb'"timestamp":"[^"]*"', b'"timestamp":""', out.read_bytes())
    return (written.replace(str(work).encode(), b"W"), comparable_state(Path(f"{path}.ctxstate.json")), said,
            _report(r, work, not hold))


def _calls(datas: list[bytes], work: Path, hold: bool, window: int) -> list[tuple[Any, ...]]:
    """One ``run`` per input (the file rewritten with it, the state kept), as a hook calls it."""
    work.mkdir()
    path = work / "t.jsonl"
    got = []
    for data in datas:
        path.write_bytes(data)
        got.append(_call(path, work, hold, Options(window=window)))
    return got


@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.name}/{p.name}" for p in FILES])
def test_run_json_is_the_held_routes_report(path: Path, tmp_path: Path) -> None:
    """Each real fixture at a window it passes through and one it compacts at, then a second call on it
    grown (the first half, then the whole: the second starts at the first's resume point)."""
    lines = path.read_bytes().splitlines(keepends=True)
    datas = [b"".join(lines[: len(lines) // 2]), b"".join(lines)]
    for i, window in enumerate((1_000_000, 20_000, 3_000)):
        held = _calls(datas, tmp_path / f"held{i}", True, window)
        assert _calls(datas, tmp_path / f"streamed{i}", False, window) == held, window


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(min_value=1, max_value=6), min_size=1, max_size=4),
       st.sampled_from([2_500, 6_000, 1_000_000]))
def test_any_split_of_appends_gives_the_held_routes_report(tmp_path_factory: Any, splits: list[int],
                                                           window: int) -> None:
    """A session grown by appends of any sizes, each call a new ``run`` with the state the last one left:
    compactions, calls after them, pass-throughs; the same output, state and report on both routes."""
    datas = grown_session(splits)
    work = tmp_path_factory.mktemp("split")
    held = _calls(datas, work / "held", True, window)
    assert _calls(datas, work / "streamed", False, window) == held


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One item for each context made: by the held route, or by the held view of a file not held."""
    made: list[int] = []
    real = route_held.build_context
    for route in (route_held, route_file):
        monkeypatch.setattr(route, "build_context", lambda *a, **k: made.append(1) or real(*a, **k))
    return made


@pytest.mark.parametrize("window", [1_000_000, 3_000], ids=["pass", "compact"])
def test_run_json_does_not_hold_the_file(tmp_path: Path, loads: list[Any], built: list[int],
                                         window: int) -> None:
    from click.testing import CliRunner

    from ctxcompact.cli import cli

    path = tmp_path / "t.jsonl"
    path.write_bytes((SAMPLES / "openai-long.jsonl").read_bytes())
    out = tmp_path / "o.jsonl"
    got = CliRunner().invoke(cli, ["run", str(path), "--window", str(window), "-o", str(out), "--json"])
    assert got.exit_code == 0, got.output
    report = orjson.loads(got.stdout)
    assert loads == [] and built == []  # never read into memory, nor its context made
    assert report["decision"] == ("pass" if window > 10_000 else "summarize")
    assert report["records_out"] == len(out.read_bytes().splitlines())


def test_kept_counts_only_the_inputs_records(tmp_path: Path) -> None:
    """A context the cleaner adds to (a call never answered gets its result): ``kept.input_records`` leaves
    the made record out on both routes."""
    msgs = [sys_msg("s"), user("hi"), assistant(None, calls=[("c1", "ls", {})]), user("and?")]
    path = tmp_path / "t.jsonl"
    path.write_bytes(jsonl(msgs))
    got = []
    for hold in (True, False):
        r = engine.run(path, Options(window=1_000_000, use_state=False), output=tmp_path / "o.jsonl",
                       hold=hold)
        got.append(run_json(r, dry_run=False, output="o")["kept"]["input_records"])
        assert r.records_written()[0] == len((tmp_path / "o.jsonl").read_bytes().splitlines())
    assert got == [4, 4]


def test_a_streamed_result_holds_a_real_transcript(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes((SAMPLES / "openai-long.jsonl").read_bytes())
    r = engine.run(path, Options(window=1_000_000, use_state=False), output=None, hold=False)
    assert type(r.transcript) is Transcript


# -------------------------------------------------------------------------- the library's file calls
# ``api.run(path)`` (a framework's before-model hook) streams; the result's ``transcript`` and ``context``
# are the held route's, made from the bytes the run read when first read.

def _lib_calls(datas: list[bytes], work: Path, hold: bool, window: int, read: bool) -> list[tuple[Any, ...]]:
    work.mkdir()
    path, out, got = work / "t.jsonl", work / "out.jsonl", []
    for data in datas:
        path.write_bytes(data)
        r = api.run(path, api.Options(window=window), output=out, warn=lambda _: None, hold=hold)
        seen = (r.transcript, r.context) if read else ()
        state = comparable_state(Path(f"{path}.ctxstate.json"))
        got.append((out.read_bytes().replace(str(work).encode(), b"W"), state,
                    r.compacted, r.tokens_before, r.tokens_after, r.exit_code, r.warnings, *seen))
    return got


LIB_FILES = [SAMPLES / "openai-long.jsonl", SAMPLES / "anthropic-session.jsonl",
             DATA / "codex" / "agentlogs-codex-crud.jsonl", DATA / "genai" / "adk-docs-run.jsonl"]


@pytest.mark.parametrize("path", LIB_FILES, ids=[p.name for p in LIB_FILES])
def test_the_librarys_run_gives_the_held_routes_transcript(path: Path, tmp_path: Path) -> None:
    lines = re.sub(rb'"timestamp":"[^"]*"', b'"timestamp":""', path.read_bytes()).splitlines(keepends=True)
    datas = [b"".join(lines[: len(lines) // 2]), b"".join(lines)]
    for i, window in enumerate((1_000_000, 20_000, 3_000)):
        held = _lib_calls(datas, tmp_path / f"held{i}", True, window, True)
        got = _lib_calls(datas, tmp_path / f"lib{i}", False, window, True)
        for call in got:
            assert type(call[-2]) is Transcript and type(call[-1]) is Transcript
        assert [c[:-2] for c in got] == [c[:-2] for c in held], window
        for g, h in zip(got, held, strict=True):  # the records, as the held route made them
            assert g[-2].records == h[-2].records and g[-1].records == h[-1].records, window
            assert g[-2].format == h[-2].format
            assert Path(str(g[-2].source)).name == Path(str(h[-2].source)).name


@pytest.mark.parametrize("window", [1_000_000, 3_000], ids=["pass", "compact"])
def test_the_librarys_run_holds_the_file_only_when_its_records_are_read(
        tmp_path: Path, loads: list[Any], built: list[int], window: int) -> None:
    import dataclasses

    path = tmp_path / "t.jsonl"
    path.write_bytes((SAMPLES / "openai-long.jsonl").read_bytes())
    r = api.run(path, api.Options(window=window), output=None)
    assert loads == [] and built == [] and r.held is not None
    assert b"".join(r.lines())  # the hook's use: the lines (read again when passed through)
    assert r.compacted == (window < 10_000) and loads == [] and built == []
    records = r.transcript.records
    assert r.context is not None and built == [1]  # made once, both
    again = dataclasses.replace(r.transcript, records=records[:1])  # a real Transcript (issue 25)
    assert type(again) is Transcript


def test_a_file_changed_before_the_records_are_read_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes((SAMPLES / "openai-long.jsonl").read_bytes())
    r = api.run(path, api.Options(window=1_000_000, use_state=False), output=None)
    path.write_bytes(path.read_bytes().replace(b"e", b"E", 1))
    with pytest.raises(api.InputError, match="changed"):
        r.transcript  # noqa: B018
    grown = tmp_path / "g.jsonl"
    grown.write_bytes((SAMPLES / "openai-long.jsonl").read_bytes())
    r = api.run(grown, api.Options(window=1_000_000, use_state=False), output=None)
    with grown.open("ab") as f:  # the agent appended since: the run's bytes are still there
        f.write(jsonl([user("more")]))
    assert len(r.transcript.records) == len(api.run(SAMPLES / "openai-long.jsonl",
                                                    api.Options(window=1_000_000, use_state=False),
                                                    output=None, hold=True).transcript.records)


def test_what_a_caller_sets_is_never_made_over(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes((SAMPLES / "openai-long.jsonl").read_bytes())
    r = api.run(path, api.Options(window=1_000_000, use_state=False), output=None)
    mine = Transcript("openai", [], "-")
    r.context = mine
    assert r.transcript.records and r.context is mine  # the transcript made, the context left as set


# -------------------------------------------------------------------------- mutants of every format
# bench/fuzz_routes.py's campaign in small: a sample of each format with its calls and results moved,
# dropped, repeated or spliced from another log (route_mutants.relinked), under each strategy; the streamed
# route writes, keeps and reports what the held one does. Both in the same folder: a trimmed result's
# marker names the input's path, which counts in the output's tokens.

SEED_SAMPLES = [(p.name, b"".join(p.read_bytes().splitlines(keepends=True)[:30]))
                for p in sorted(SAMPLES.glob("*.jsonl"))]
LIGHT = ("drop-results", "result-first", "result-later", "dup-block", "sidechain", "blank-lines",
         "recombine", "id-collision", "duplicate", "delete")


@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(min_value=0, max_value=2**32), st.sampled_from(["threshold", "sliding-window", "mask"]),
       st.sampled_from([2_000, 6_000]))
def test_relinked_logs_of_every_format_give_the_held_routes_answer(tmp_path_factory: Any, n: int,
                                                                   strategy: str, window: int) -> None:
    import random
    import shutil

    from route_mutants import relinked

    rng = random.Random(n)
    _, seed = rng.choice(SEED_SAMPLES)
    lines, _ = relinked(rng, seed.splitlines(), SEED_SAMPLES, LIGHT)
    opts = Options(window=window, strategy=strategy, invocation_threshold=1, overlap=rng.choice([0, 1]))
    work = tmp_path_factory.mktemp("relinked") / "W"
    got = []
    for hold in (True, False):
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        path = work / "t.jsonl"
        path.write_bytes(b"\n".join(lines) + b"\n")
        got.append(_call(path, work, hold, opts))
    assert got[1] == got[0]

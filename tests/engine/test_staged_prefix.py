"""Below the threshold, a call that resumes after a plain prefix stages the output's first bytes in pass 1:
``CountCache.prove_stream`` hands the bytes before the resume point, as it hashes them, to the output's
temporary file (``atomic.Staging``), and pass 2 (``streaming.written_lines``) reads and hashes only what
follows, on pass 1's hash (docs/measurements/performance-log.md, branch `prefix9`). The output is byte for
byte the held route's and a stateless run's, for any split of the session into appends; pass 2 still writes
only bytes pass 1 counted (what it reads changed since is an error, the output left as it was); nothing but
the output is written (the staging is removed whenever it is not the output)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import coding_session, flip_a_content_byte, jsonl, sys_msg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxcompact import atomic, engine, route_file
from ctxcompact.clean import Cleaner
from ctxcompact.errors import CtxCompactError
from ctxcompact.options import Options

LINES = jsonl([sys_msg("You are a coding agent."), *coding_session(30, tool_chars=300)]).splitlines(
    keepends=True)
BELOW = Options(window=1_000_000)


def _quiet(message: str) -> None:
    pass


@pytest.fixture
def staged(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each pass 2 written to a file began on pass 1's staged prefix; parts settle early (a resume
    point in a short session)."""
    seen: list[bool] = []
    real = route_file.written_lines

    def spy(*a: Any, staged: bool = False, **k: Any) -> Any:
        seen.append(staged)
        return real(*a, staged=staged, **k)

    monkeypatch.setattr(route_file, "written_lines", spy)
    monkeypatch.setattr(Cleaner, "FIRST_TRY", 4)
    return seen


def _temps(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def _held(path: Path, out: Path) -> bytes:
    """The output of the held route with no state (what any call below the threshold must write)."""
    engine.run(path, Options(window=1_000_000, use_state=False), output=out, warn=_quiet, hold=True)
    return out.read_bytes()


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.integers(6, len(LINES)), min_size=1, max_size=4))
def test_any_split_of_appends_gives_the_held_routes_output(tmp_path_factory: pytest.TempPathFactory,
                                                           staged: list[bool], cuts: list[int]) -> None:
    work = tmp_path_factory.mktemp("split")
    path, out, ref = work / "t.jsonl", work / "out.jsonl", work / "ref.jsonl"
    staged.clear()
    for n in [*sorted(cuts), len(LINES)]:
        path.write_bytes(b"".join(LINES[:n]))
        engine.run(path, BELOW, output=out, warn=_quiet)
        assert out.read_bytes() == _held(path, ref)
        assert _temps(work) == []
    assert staged[-1] or (len(set(cuts)) == 1 and cuts[0] == len(LINES))  # (the last call grew the file)


def _two_calls(work: Path, between: Any = None) -> tuple[Path, Path]:
    """A first call on most of the session, then the whole session (``between``: done to the input after
    pass 1 of the second call)."""
    path, out = work / "t.jsonl", work / "out.jsonl"
    path.write_bytes(b"".join(LINES[:-5]))
    engine.run(path, BELOW, output=out, warn=_quiet)
    path.write_bytes(b"".join(LINES))
    return path, out


def _between_the_passes(monkeypatch: pytest.MonkeyPatch, change: Any) -> None:
    real = route_file.count_file

    def then_change(*a: Any, **k: Any) -> Any:
        counted = real(*a, **k)
        assert counted is not None and counted.staged  # (the case under test: pass 1 staged the prefix)
        change(a[0], counted)
        return counted

    monkeypatch.setattr(route_file, "count_file", then_change)


@pytest.mark.parametrize("change", ["after the resume point", "truncated"])
def test_what_pass_2_reads_changed_since_pass_1_is_an_error(tmp_path: Path, staged: list[bool],
                                                            monkeypatch: pytest.MonkeyPatch, change: str
                                                            ) -> None:
    path, out = _two_calls(tmp_path)
    before = out.read_bytes()

    def edit(p: Path, counted: Any) -> None:
        if change == "truncated":
            p.write_bytes(p.read_bytes()[:-40])
        else:
            flip_a_content_byte(p, counted.resumed.at)

    _between_the_passes(monkeypatch, edit)
    with pytest.raises(CtxCompactError, match="changed while it was read"):
        engine.run(path, BELOW, output=out, warn=_quiet)
    assert out.read_bytes() == before  # left as it was
    assert _temps(tmp_path) == [] and staged == [False, True]


@pytest.mark.parametrize("change", ["before the resume point", "grown"])
def test_the_output_is_the_bytes_pass_1_counted(tmp_path: Path, staged: list[bool],
                                                monkeypatch: pytest.MonkeyPatch, change: str) -> None:
    """What pass 2 does not read (the staged prefix; what was appended after pass 1 read to the end) is
    written as pass 1 read it: the output is the file pass 1 counted, never a mix."""
    path, out = _two_calls(tmp_path)
    counted_file = tmp_path / "counted.jsonl"
    counted_file.write_bytes(path.read_bytes())

    def edit(p: Path, counted: Any) -> None:
        if change == "grown":
            with p.open("ab") as f:
                f.write(LINES[1])
        else:
            flip_a_content_byte(p, 0)
            assert p.read_bytes().index(b'"content":"') < counted.resumed.at

    _between_the_passes(monkeypatch, edit)
    engine.run(path, BELOW, output=out, warn=_quiet)
    assert out.read_bytes() == _held(counted_file, tmp_path / "ref.jsonl")
    assert _temps(tmp_path) == [] and staged == [False, True]


def test_a_failed_write_in_pass_1_leaves_pass_2_to_write_it_all(tmp_path: Path, staged: list[bool],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    path, out = _two_calls(tmp_path)
    real = atomic.Staging.write
    fails = [True]

    def write(self: atomic.Staging, data: Any) -> None:
        if fails[0]:
            fails[0] = False
            raise OSError(28, "No space left on device")
        real(self, data)

    monkeypatch.setattr(atomic.Staging, "write", write)
    engine.run(path, BELOW, output=out, warn=_quiet)
    assert not fails[0] and staged == [False, False]  # (it failed in pass 1: pass 2 wrote the whole)
    assert out.read_bytes() == _held(path, tmp_path / "ref.jsonl")
    assert _temps(tmp_path) == []


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The temporary files begun for the output ``out.jsonl`` (``atomic.Staging``; the state's are not)."""
    seen: list[Path] = []
    real = atomic.Staging.__init__

    def init(self: atomic.Staging, *a: Any, **k: Any) -> None:
        real(self, *a, **k)
        assert self.tmp is not None
        if self.tmp.name.startswith(".out.jsonl."):
            seen.append(self.tmp)

    monkeypatch.setattr(atomic.Staging, "__init__", init)
    return seen


def test_a_call_that_compacts_leaves_no_staging_and_the_next_begins_none(tmp_path: Path, staged: list[bool],
                                                                         made: list[Path]) -> None:
    path, out = _two_calls(tmp_path)
    made.clear()
    engine.run(path, Options(window=3_000), output=out, warn=_quiet)  # (over the threshold: compacts)
    assert len(made) == 2 and _temps(tmp_path) == []  # (pass 1's, unused; the compaction's own)
    with path.open("ab") as f:
        f.write(LINES[1])
    engine.run(path, BELOW, output=out, warn=_quiet)  # (after the summary's lead: nothing to stage)
    assert len(made) == 3 and _temps(tmp_path) == [] and staged[-1] is False


def test_a_call_the_held_route_reads_leaves_no_staging(tmp_path: Path, made: list[Path]) -> None:
    path, out = _two_calls(tmp_path)
    made.clear()
    path.write_bytes(b"".join(LINES) + b"not json\n")  # (the held route reports the line)
    with pytest.raises(CtxCompactError):
        engine.run(path, BELOW, output=out, warn=_quiet)
    assert len(made) == 1 and _temps(tmp_path) == []

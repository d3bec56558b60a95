"""What a hook's second call reads of its input, by the bytes it takes from the file (not by time): with the
prefix twice as long, the call parses the same lines, reads each byte at most once a pass, and its second
pass reads nothing of the prefix (below the threshold pass 1 staged it in the output as it proved it; after
a compaction the summary stands for it). What grows with the prefix is only pass 1 proving it, one SHA-256 of
each byte: docs/measurements/performance-log.md, branches `inc8` and `prefix9`."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import sys
from pathlib import Path

import orjson
import pytest

from ctxcompact import api, paths

_GEN = Path(__file__).resolve().parents[2] / "bench" / "gen_openai.py"
_spec = importlib.util.spec_from_file_location("gen_openai", _GEN)
assert _spec is not None and _spec.loader is not None
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)

SESSION = [orjson.dumps(m) + b"\n" for m in gen.messages(13, 900_000)]
# bench/hook.py's five appended records (a request, a call, its result, a reply, a request)
APPENDED = [orjson.dumps(m) + b"\n" for m in [
    {"role": "user", "content": "Now run the whole test suite and tell me what still fails."},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_hook_1", "type": "function",
         "function": {"name": "run_shell", "arguments": '{"command": "pytest -q"}'}}]},
    {"role": "tool", "tool_call_id": "call_hook_1", "content": "412 passed, 3 failed in 38.2s"},
    {"role": "assistant", "content": "Three tests still fail, all in test_parser.py; looking at them next."},
    {"role": "user", "content": "Go ahead."}]]
BELOW, COMPACTING = 1_000_000_000, 40_000
SLACK = 64 * 1024  # a buffered reader's read-ahead past where a pass stops, at most a few buffers


class _Counted(io.RawIOBase):
    """A file's raw reads, counted: what the call takes from the disk, whatever reads it."""

    def __init__(self, raw: io.RawIOBase, tally: list[int]) -> None:
        self.raw, self.tally = raw, tally

    def readinto(self, b) -> int | None:  # type: ignore[no-untyped-def,override]
        n = self.raw.readinto(b)
        self.tally[-1] += n or 0
        return n

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return self.raw.seekable()

    def seek(self, pos: int, whence: int = 0) -> int:
        return self.raw.seek(pos, whence)

    def tell(self) -> int:
        return self.raw.tell()

    def fileno(self) -> int:
        return self.raw.fileno()

    def close(self) -> None:
        self.raw.close()
        super().close()


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The bytes read of the input by each opening of it (one entry a pass; a whole read is one too)."""
    tally: list[int] = []
    real_open, real_read = paths.open_input, paths.read_input

    def open_input(path):  # type: ignore[no-untyped-def]
        stream = real_open(path)
        tally.append(0)
        if isinstance(stream, io.BufferedReader):
            return io.BufferedReader(_Counted(stream.detach(), tally))  # type: ignore[arg-type]
        tally[-1] += len(stream.getbuffer())  # (a FIFO's bytes, read whole)
        return stream

    def read_input(path):  # type: ignore[no-untyped-def]
        data = real_read(path)
        tally.append(len(data))
        return data

    for name, module in list(sys.modules.items()):
        if name.startswith("ctxcompact"):
            if getattr(module, "open_input", None) is real_open:
                monkeypatch.setattr(module, "open_input", open_input)
            if getattr(module, "read_input", None) is real_read:
                monkeypatch.setattr(module, "read_input", read_input)
    return tally


class _Tallied:
    """A SHA-256 whose input is counted (``hashed``): every hash the call makes, whatever it hashes."""

    def __init__(self, h, tally: list[int]) -> None:  # type: ignore[no-untyped-def]
        self.h, self.tally = h, tally

    def update(self, data) -> None:  # type: ignore[no-untyped-def]
        self.tally[0] += memoryview(data).nbytes
        self.h.update(data)

    def copy(self) -> _Tallied:
        return _Tallied(self.h.copy(), self.tally)

    def digest(self) -> bytes:
        return self.h.digest()

    def hexdigest(self) -> str:
        return self.h.hexdigest()


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The bytes put through SHA-256 (``hashlib.sha256``, as ctxcompact's modules call it)."""
    tally, real = [0], hashlib.sha256

    def sha256(data=b"", **kw):  # type: ignore[no-untyped-def]
        h = _Tallied(real(**kw), tally)
        h.update(data)
        return h

    monkeypatch.setattr(hashlib, "sha256", sha256)
    return tally


def _second_call(tmp: Path, lines: int, window: int, reads: list[int], parsed: list[int],
                 hashed: list[int] | None = None) -> tuple[int, list[int], int, int, int]:
    """(file size, bytes read per pass, lines parsed, covered prefix, bytes hashed) of the call after
    ``lines`` of the session and the five appended records, each call as in a new process."""
    tmp.mkdir()
    path, out = tmp / "t.jsonl", tmp / "out.jsonl"
    path.write_bytes(b"".join(SESSION[:lines]))
    first = api.run(path, api.Options(window=window), output=out, hold=False)
    assert first.compacted == (window == COMPACTING)
    path.write_bytes(b"".join(SESSION[:lines] + APPENDED))
    reads.clear()
    parsed.clear()
    if hashed is not None:
        hashed[0] = 0
    second = api.run(path, api.Options(window=window), output=out, hold=False)
    assert not second.compacted
    state = orjson.loads(Path(f"{path}.ctxstate.json").read_bytes())
    covered = state["fingerprint"]["bytes"] if state["watermark"] else 0
    assert (covered > 0) == (window == COMPACTING)
    return path.stat().st_size, list(reads), len(parsed), covered, hashed[0] if hashed is not None else 0


@pytest.mark.parametrize("window", [BELOW, COMPACTING], ids=["below the threshold", "after a compaction"])
def test_a_second_call_reads_the_prefix_once_a_pass_and_parses_only_the_new_lines(
        tmp_path, new_process, parsed, reads, hashed, monkeypatch, window):
    from ctxcompact.clean import Cleaner

    monkeypatch.setattr(Cleaner, "FIRST_TRY", 4)  # (parts settle early: a resume point in a short session)
    short, long = len(SESSION) // 3, 2 * (len(SESSION) // 3)
    got = {n: _second_call(tmp_path / str(n), n, window, reads, parsed, hashed) for n in (short, long)}
    for size, passes, _lines, covered, _hashed in got.values():
        assert len(passes) == 2, passes  # pass 1 and pass 2, each one opening, no whole read (the held route)
        assert size <= passes[0] <= size + SLACK  # pass 1: the prefix proven, then the lines after it
        if window != BELOW:  # pass 2: only what follows the covered prefix (the summary stands for it)
            assert size - covered <= passes[1] <= size - covered + SLACK
    grown = got[long][0] - got[short][0]
    assert grown > 4 * SLACK  # (the prefix did grow, by more than the slack)
    # pass 2 reads what follows the resume point (below the threshold: the prefix is in the output already)
    assert abs(got[long][1][1] - got[short][1][1]) <= SLACK
    # each byte of the prefix is hashed once a call (pass 1's proof); the rest hashed is the count cache's
    # and the state's, a few bytes a record
    assert got[long][4] - got[short][4] < 1.25 * grown, (got[long][4] - got[short][4], grown)
    # the lines parsed (both passes) are those after the resume point: as few, however long the prefix
    assert 0 < got[long][2] <= 2 * (len(APPENDED) + 8) and 0 < got[short][2] <= 2 * (len(APPENDED) + 8)

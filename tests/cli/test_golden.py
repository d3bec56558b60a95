"""The one golden runner (black-style): each case in tests/data/cli/<case>/ holds a ``case.json`` (an input
file and the steps to run on a copy of it; an input or an appended file may sit in the case folder itself)
and, per step, what the user saw: stdout, stderr, the exit code, the output file and the state file. They pin
every CLI output, so a refactoring that changes any of it fails here. Regenerate after a deliberate change
with CTXCOMPACT_UPDATE_GOLDEN=1 and review the diff.

Steps: ``{"args": [...]}`` runs ``ctxcompact ARGS`` in-process (``{in}`` is the copied input, ``{out}`` the
output path, ``{state}`` the default state path; the input is also given on stdin), ``{"append": PATH}``
appends a file to the input (the transcript grew). Times and durations in the state are normalised."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner
from helpers import check_golden

from ctxcompact import cli

REPO = Path(__file__).resolve().parent.parent.parent
DATA = Path(__file__).parent.parent / "data" / "cli"
CASES = sorted(p.name for p in DATA.iterdir() if p.is_dir())
_VOLATILE = {"created_at", "updated_at", "time", "duration_s"}


def _normalise(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: ("<volatile>" if k in _VOLATILE else _normalise(v)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_normalise(v) for v in obj]
    return obj


def _check(produced: bytes, expected: Path, seen: set[str]) -> None:
    seen.add(expected.name)
    check_golden(produced, expected)


def _run(args: list[str], stdin: bytes) -> tuple[bytes, bytes, int]:
    runner = CliRunner()
    with runner.isolation(input=stdin) as (out, err, _):
        try:
            cli.main(args)
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        return out.getvalue(), err.getvalue(), code


def _reads(spec: dict[str, Any]) -> list[str]:
    return [spec["input"], *(step["append"] for step in spec["steps"] if "append" in step)]


@pytest.mark.parametrize("case", CASES)
def test_golden(case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("CTXCOMPACT_"):
            monkeypatch.delenv(key)
    src = DATA / case
    spec = orjson.loads((src / "case.json").read_bytes())
    work = tmp_path / "w"
    work.mkdir()
    log = work / "input.jsonl"
    shutil.copyfile(REPO / spec["input"], log)
    out = work / "out.jsonl"
    state = work / "input.jsonl.ctxstate.json"
    # the files the case reads may live beside it (a case is one folder: input, steps, expectations)
    here = src.resolve()
    seen = {"case.json"} | {Path(p).name for p in _reads(spec) if (REPO / p).parent.resolve() == here}

    def norm(data: bytes) -> bytes:
        return data.replace(str(work).encode(), b"<TMP>")

    for i, step in enumerate(spec["steps"], 1):
        if "append" in step:
            with log.open("ab") as fh:
                fh.write((REPO / step["append"]).read_bytes())
            continue
        args = [a.format(**{"in": log, "out": out, "state": state}) for a in step["args"]]
        stdout, stderr, code = _run(args, log.read_bytes())
        if '"created_at"' in stdout.decode(errors="replace") and stdout.lstrip().startswith(b"{"):
            stdout = orjson.dumps(_normalise(orjson.loads(stdout)), option=orjson.OPT_INDENT_2) + b"\n"
        _check(norm(stdout), src / f"{i}.stdout", seen)
        _check(norm(stderr), src / f"{i}.stderr", seen)
        _check(f"{code}\n".encode(), src / f"{i}.exit", seen)
        if out.exists():
            _check(out.read_bytes(), src / f"{i}.output.jsonl", seen)
            out.unlink()
        if state.exists():
            obj = _normalise(orjson.loads(norm(state.read_bytes())))
            _check(orjson.dumps(obj, option=orjson.OPT_INDENT_2) + b"\n", src / f"{i}.state.json", seen)
    assert log.read_bytes().startswith((REPO / spec["input"]).read_bytes()), "the input was modified"
    stale = sorted({p.name for p in src.iterdir()} - seen)
    assert not stale, f"{src}: expected files no step produced: {stale}"

"""Golden files for `run` (black-style): each case in tests/data/run/<case>/ holds the input, the options
(args.json) and the expected output side by side. A second input (input2.jsonl, appended) checks the next
run on the grown transcript against expected2.jsonl. Regenerate after a deliberate change with
CTXCOMPACT_UPDATE_GOLDEN=1 and review the diff."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import orjson
import pytest

from ctxcompact import api

DATA = Path(__file__).parent / "data" / "run"
CASES = sorted(p.name for p in DATA.iterdir() if p.is_dir())
UPDATE = bool(os.environ.get("CTXCOMPACT_UPDATE_GOLDEN"))


def check(produced: bytes, expected: Path) -> None:
    if UPDATE:
        expected.write_bytes(produced)
    assert produced == expected.read_bytes(), f"{expected} differs (CTXCOMPACT_UPDATE_GOLDEN=1 to regenerate)"


@pytest.mark.parametrize("case", CASES)
def test_run_golden(case: str, tmp_path: Path) -> None:
    src = DATA / case
    args = orjson.loads((src / "args.json").read_bytes())
    log = tmp_path / "input.jsonl"
    shutil.copyfile(src / "input.jsonl", log)
    opts = api.Options(**args)
    first = api.run(log, opts, output=tmp_path / "out.jsonl")
    check((tmp_path / "out.jsonl").read_bytes(), src / "expected.jsonl")
    assert first.compacted == (case.find("passthrough") < 0)
    if (src / "input2.jsonl").exists():
        with log.open("ab") as fh:
            fh.write((src / "input2.jsonl").read_bytes())
        api.run(log, opts, output=tmp_path / "out2.jsonl")
        check((tmp_path / "out2.jsonl").read_bytes(), src / "expected2.jsonl")

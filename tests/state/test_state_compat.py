"""A state written before each strategy owned its part of the state (main at add75fb, tests/data/state) is
read, written back byte for byte, and continues the session exactly as the version that wrote it did."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import orjson
import pytest
from helpers import check_golden
from jsonschema import Draft202012Validator

from ctxcompact import api
from ctxcompact.state import dump_state, load_state
from ctxcompact.strategies.masking_state import Masking
from ctxcompact.strategies.sliding_window_state import WindowEvents

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "state" / "main-add75fb"
SAMPLE = ROOT / "samples" / "openai-long.jsonl"
SCHEMA = json.loads((ROOT / "ctxcompact" / "schemas" / "state.schema.json").read_text())
CASES = sorted(p.name for p in DATA.iterdir() if p.is_dir())


def test_every_strategy_has_a_case() -> None:
    assert CASES == ["mask", "prune", "sliding-window", "threshold"]


@pytest.mark.parametrize("case", CASES)
def test_an_old_state_is_read_and_written_back_unchanged(case: str) -> None:
    old = (DATA / case / "state.json").read_bytes()
    assert not list(Draft202012Validator(SCHEMA).iter_errors(orjson.loads(old)))
    state = load_state(DATA / case / "state.json")
    assert state is not None
    assert dump_state(state) == old
    # the strategies read their own parts of it
    events = state.section(WindowEvents)
    masking = state.section(Masking)
    assert len(events.events if events else []) == (1 if case == "sliding-window" else 0)
    assert (masking is not None and len(masking.results) > 0) == (case == "mask")
    assert dump_state(state) == old  # typed, then written: still the same bytes


@pytest.mark.parametrize("case", CASES)
def test_an_old_state_continues_the_session_as_before(tmp_path: Path, case: str) -> None:
    spec = json.loads((DATA / case / "case.json").read_text())
    spec.pop("first_lines")
    log = tmp_path / "in.jsonl"
    shutil.copy(SAMPLE, log)  # the session grew since the first run
    state_path = Path(str(log) + ".ctxstate.json")
    shutil.copy(DATA / case / "state.json", state_path)
    result = api.run(log, api.Options(**spec), output=tmp_path / "out.jsonl")
    assert result.compacted
    # second.jsonl is what main at add75fb wrote; a deliberate change of the summary's content since then is
    # regenerated with CTXCOMPACT_UPDATE_GOLDEN=1 (as the golden cases) and named in its commit
    check_golden((tmp_path / "out.jsonl").read_bytes(), DATA / case / "second.jsonl")
    written = orjson.loads(state_path.read_bytes())
    assert not list(Draft202012Validator(SCHEMA).iter_errors(written))
    assert len(written["compactions"]) == 2

"""A strategy is one module and one registry entry: a toy strategy with its own option and its own part of
the state, registered here and nowhere else, runs through ``run`` twice (docs/DESIGN.md "Adding a
strategy"): its option's declared default and a value given reach it, its section is written under its own
key, read back by it on the next run, and checked on load."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import orjson
import pytest
from helpers import coding_session, jsonl, sys_msg, user

from ctxcompact import api, plugins
from ctxcompact.errors import ExitCode, StateError, UsageError
from ctxcompact.facts.text import typed_text
from ctxcompact.model import Record, Role, Transcript
from ctxcompact.options import Options, check_options
from ctxcompact.state import State, load_state
from ctxcompact.strategies import register
from ctxcompact.strategies.base import Outcome, StrategyInput, Written


@dataclass(slots=True)
class Cut:
    """The toy's part of the state: input records before ``start`` are gone for good; ``runs`` that cut."""

    KEY: ClassVar[str] = "keep_latest"
    start: int = 0
    runs: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"start": self.start, "runs": self.runs}

    @classmethod
    def from_json(cls, obj: Any) -> Cut:
        return cls(start=int(obj["start"]), runs=int(obj["runs"]))

    @staticmethod
    def problem(obj: Any) -> str | None:
        if not isinstance(obj, dict) or not isinstance(obj.get("start"), int) or obj["start"] < 0:
            return "start must be a whole number, 0 or more"
        return None


def _system(rec: Record) -> bool:
    return rec.message is not None and rec.message.role is Role.SYSTEM


class KeepLatest:
    """Over the threshold, keep the system records and the latest ``keep_requests`` requests with what
    followed them; later runs drop the same records again (``reapply``)."""

    name = "keep-latest"
    state_layer = 3
    traits = frozenset({plugins.ESTIMATE_STREAMS})  # its describe needs no context
    options = (plugins.Option("keep_requests", 1, "keep this many of the latest requests.", low=1, high=50),)
    state_section = Cut

    def reapply(self, records: list[Record], state: State, fmt_name: str) -> list[Record]:
        cut = state.section(Cut)
        if cut is None:
            return records
        return [r for r in records if r.index < 0 or r.index >= cut.start or _system(r)]

    def describe(self, si: StrategyInput) -> dict[str, Any]:
        return {"keep_requests": si.opts.option("keep_requests")}

    def apply(self, si: StrategyInput) -> Outcome | None:
        if not si.report.would_compact:
            return None
        records = si.ctx.transcript.records
        starts = [r.index for r in records if r.index >= 0 and typed_text(r) is not None]
        keep = si.opts.option("keep_requests")
        if len(starts) <= keep:
            return None
        start = starts[-keep]
        kept = [r for r in records if r.index < 0 or r.index >= start or _system(r)]
        before = si.state.section(Cut) if si.state is not None else None

        def commit(state: State, written: Written) -> None:
            state.set_section(Cut(start=start, runs=(before.runs if before else 0) + 1))

        return Outcome(strategy=self.name, transcript=Transcript(si.ctx.transcript.format, kept,
                                                                 si.ctx.transcript.source), commit=commit)


@pytest.fixture
def toy() -> Iterator[KeepLatest]:
    strategy = KeepLatest()
    register(strategy)  # type: ignore[arg-type]
    try:
        yield strategy
    finally:
        plugins.STRATEGIES.unregister(strategy.name)


def _requests(path: Path) -> list[str]:
    lines = [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
    return [o["content"] for o in lines if o.get("role") == "user" and isinstance(o.get("content"), str)]


def _session(tmp_path: Path) -> tuple[Path, Path]:
    log = tmp_path / "s.jsonl"
    log.write_bytes(jsonl([sys_msg("You are a coding agent."), *coding_session(6, tool_chars=3000)]))
    return log, Path(str(log) + ".ctxstate.json")


def test_a_toy_strategy_runs_twice_with_its_option_and_its_state(tmp_path: Path, toy: KeepLatest) -> None:
    log, state_path = _session(tmp_path)
    opts = Options(strategy="keep-latest", window=4000, exact="none")
    assert opts.option("keep_requests") == 1  # the declared default
    first = api.run(log, opts, output=tmp_path / "o1.jsonl")
    assert first.compacted
    asked = _requests(log)
    assert _requests(tmp_path / "o1.jsonl") == asked[-1:]
    written = orjson.loads(state_path.read_bytes())
    assert written["keep_latest"]["runs"] == 1 and written["keep_latest"]["start"] > 0
    assert written["events"] == [] and "masking" not in written  # the others' parts as before

    # the session grows by one short turn: below the threshold the toy does nothing new, but its part of
    # the state, read back by its reapply, still keeps the records it dropped out of the context
    log.write_bytes(log.read_bytes() + jsonl([user("and now the README, briefly")]))
    second = api.run(log, opts, output=tmp_path / "o2.jsonl")
    assert not second.compacted
    assert _requests(tmp_path / "o2.jsonl") == [asked[-1], "and now the README, briefly"]
    state = load_state(state_path)
    assert state is not None and state.section(Cut) == Cut(start=written["keep_latest"]["start"], runs=1)


def test_a_value_given_for_the_toys_option_reaches_it(tmp_path: Path, toy: KeepLatest) -> None:
    log, _ = _session(tmp_path)
    opts = Options(strategy="keep-latest", window=4000, exact="none", strategy_options={"keep_requests": 2})
    assert api.run(log, opts, output=tmp_path / "o.jsonl").compacted
    assert _requests(tmp_path / "o.jsonl") == _requests(log)[-2:]
    with pytest.raises(UsageError, match="--keep-requests must be between 1 and 50, got 0"):
        check_options(Options(strategy_options={"keep_requests": 0}))
    with pytest.raises(KeyError):
        Options().option("nobody_declares_this")
    with pytest.raises(UsageError, match="no strategy declares the option 'keep_request'"):
        check_options(Options(strategy_options={"keep_request": 2}))  # a typo is not silently ignored
    with pytest.raises(UsageError, match=r"Options\(overlap=...\)"):
        check_options(Options(strategy_options={"overlap": 2}))


def test_the_toys_section_is_checked_on_load_and_needs_the_toy(tmp_path: Path, toy: KeepLatest) -> None:
    log, state_path = _session(tmp_path)
    api.run(log, Options(strategy="keep-latest", window=4000, exact="none"), output=tmp_path / "o.jsonl")
    obj = orjson.loads(state_path.read_bytes())
    obj["keep_latest"]["start"] = -1
    state_path.write_bytes(orjson.dumps(obj))
    with pytest.raises(StateError, match=r"\$\.keep_latest: start must be a whole number") as exc:
        load_state(state_path)
    assert exc.value.exit_code == ExitCode.STATE
    obj["keep_latest"]["start"] = 3
    state_path.write_bytes(orjson.dumps(obj))
    assert load_state(state_path) is not None
    plugins.STRATEGIES.unregister(toy.name)  # without the strategy its key is unknown, as any typo is
    with pytest.raises(StateError, match="unknown key 'keep_latest'"):
        load_state(state_path)


def test_a_strategy_cannot_take_an_option_or_a_state_key_in_use(toy: KeepLatest) -> None:
    class Clash:
        name = "clash-test"
        state_layer = 0
        options = (plugins.Option("overlap", 1, "taken by sliding-window."),)

    with pytest.raises(ValueError, match="overlap"):
        register(Clash())  # type: ignore[arg-type]
    Clash.options = (plugins.Option("keep_requests", 1, "taken by the toy.", low=1),)
    with pytest.raises(ValueError, match="keep_requests"):
        register(Clash())  # type: ignore[arg-type]

    class Shadow:
        name = "shadow-test"
        state_layer = 0
        state_section = Cut

    with pytest.raises(ValueError, match="keep_latest"):
        register(Shadow())  # type: ignore[arg-type]
    assert "clash-test" not in plugins.STRATEGIES and "shadow-test" not in plugins.STRATEGIES

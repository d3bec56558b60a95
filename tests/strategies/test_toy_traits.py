"""What ``run``'s routing knows of a strategy or a summarizer is what it declares (``plugins``' traits), never
its name: a toy strategy and a toy summarizer, registered here alone, take the route without holding the file
when they declare the trait, and the held one when they do not (docs/DESIGN.md "Contracts")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from helpers import coding_session, jsonl, sys_msg

from ctxcompact import engine, plugins, state, strategies
from ctxcompact.cli.render import summary_details
from ctxcompact.compaction_stream import may_compact_streamed
from ctxcompact.errors import StateError, SummarizerError, UsageError
from ctxcompact.options import Options
from ctxcompact.strategies import get_strategy, register
from ctxcompact.strategies.base import Outcome, StrategyInput
from ctxcompact.strategies.sliding_window_state import WindowEvents
from ctxcompact.summarizers.base import SummaryRequest, SummaryResult
from ctxcompact.summarizers.extractive import ExtractiveSummarizer
from ctxcompact.summarizers.fallback import summarize


class Summarizes:
    """threshold's compaction under another name: only its traits differ from one toy to the next."""

    state_layer = 0

    def __init__(self, name: str, traits: frozenset[str]) -> None:
        self.name, self.traits = name, traits
        self.inner: Any = get_strategy("threshold")

    def reapply(self, records: Any, state: Any, fmt_name: str) -> Any:
        return records

    def describe(self, si: StrategyInput) -> dict[str, Any]:
        return dict(self.inner.describe(si))

    def apply(self, si: StrategyInput) -> Outcome | None:
        outcome: Outcome | None = self.inner.apply(si)
        return outcome


class Picky(ExtractiveSummarizer):
    """The extractive summary; its configuration check fails, and says when it ran."""

    checked: ClassVar[list[str]] = []

    def check(self) -> None:
        Picky.checked.append("checked")
        raise SummarizerError("toy: no key")


@pytest.fixture
def toys() -> Iterator[None]:
    counts = frozenset({plugins.ESTIMATE_STREAMS})  # (threshold's describe needs only the counts)
    register(Summarizes("toy-streams", counts | {plugins.COMPACTS_STREAMED}))  # type: ignore[arg-type]
    register(Summarizes("toy-held", counts))  # type: ignore[arg-type]
    plugins.SUMMARIZERS.register("toy-offline", Picky, {plugins.OFFLINE, plugins.SUMMARIZES_STREAMED})
    plugins.SUMMARIZERS.register("toy-local", Picky, {plugins.OFFLINE})
    plugins.SUMMARIZERS.register("toy-keyed", Picky)
    try:
        yield
    finally:
        for name in ("toy-streams", "toy-held"):
            plugins.STRATEGIES.unregister(name)
        for name in ("toy-offline", "toy-local", "toy-keyed"):
            plugins.SUMMARIZERS.unregister(name)


def _session(tmp_path: Path) -> Path:
    log = tmp_path / "s.jsonl"
    log.write_bytes(jsonl([sys_msg("You are a coding agent."), *coding_session(12, tool_chars=2000)]))
    return log


def _run(log: Path, out: Path, **given: Any) -> engine.RunResult:
    opts = Options(window=8000, exact="none", use_state=False, **given)
    return engine.run(log, opts, output=out, warn=lambda _: None)


def test_may_compact_streamed_reads_the_traits(toys: None) -> None:
    assert may_compact_streamed("openai", Options(strategy="toy-streams"))
    assert not may_compact_streamed("openai", Options(strategy="toy-held"))
    # an append-only log needs its own trait, which the toy does not declare (threshold does)
    assert not may_compact_streamed("codex", Options(strategy="toy-streams"))
    assert may_compact_streamed("codex", Options(strategy="threshold"))
    assert may_compact_streamed("openai", Options(summarizer="toy-offline"))
    assert not may_compact_streamed("openai", Options(summarizer="toy-local"))
    assert not may_compact_streamed("openai", Options(prune=True))  # a flag of its own turns the trait off


def test_a_strategy_declaring_the_trait_compacts_without_holding_the_file(toys: None, tmp_path: Path) -> None:
    log = _session(tmp_path)
    streamed = _run(log, tmp_path / "a.jsonl", strategy="toy-streams")
    held = _run(log, tmp_path / "b.jsonl", strategy="toy-held")
    assert streamed.compacted and held.compacted
    # the route taken: a streamed compaction keeps the held route's view to make on first read; the held
    # route holds its context already
    assert streamed.held is not None and held.held is None
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()


def test_a_summarizer_declaring_the_traits_streams_and_is_not_checked(toys: None, tmp_path: Path) -> None:
    log = _session(tmp_path)
    Picky.checked.clear()
    streamed = _run(log, tmp_path / "a.jsonl", summarizer="toy-offline")
    held = _run(log, tmp_path / "b.jsonl", summarizer="toy-local")
    assert streamed.compacted and held.compacted and Picky.checked == []
    assert streamed.held is not None and held.held is None
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    # without OFFLINE its configuration is checked before any work, and a failure is a usage error
    with pytest.raises(UsageError, match="toy: no key"):
        _run(log, tmp_path / "c.jsonl", summarizer="toy-keyed")
    assert Picky.checked == ["checked"] and not (tmp_path / "c.jsonl").exists()


class Gathers:
    """The sliding window under another name (its rule, its pass-1 gatherer): only its traits differ."""

    state_layer = 0

    def __init__(self, name: str, traits: frozenset[str]) -> None:
        self.name, self.traits = name, traits
        self.inner: Any = get_strategy("sliding-window")

    def reapply(self, records: Any, state: Any, fmt_name: str) -> Any:
        return records

    def describe(self, si: StrategyInput) -> dict[str, Any]:
        return dict(self.inner.describe(si))

    def gathering(self, state: Any) -> Any:
        return self.inner.gathering(state)

    def quiet(self, counted: Any, opts: Options, state: Any) -> Any:
        return self.inner.quiet(counted, opts, state)

    def apply(self, si: StrategyInput) -> Outcome | None:
        outcome: Outcome | None = self.inner.apply(si)
        return outcome


def test_a_strategy_may_declare_that_estimate_and_run_stream(tmp_path: Path) -> None:
    """ESTIMATE_STREAMS and RUN_GATHERS are a registered strategy's to declare, as a built-in's: run then
    passes a quiet context through without holding the file, and writes what the held route writes."""
    log = tmp_path / "s.jsonl"
    log.write_bytes(jsonl([sys_msg("You are a coding agent."), *coding_session(2, tool_chars=300)]))
    register(Gathers("toy-gathers", frozenset({plugins.RUN_GATHERS})))  # type: ignore[arg-type]
    register(Gathers("toy-reads", frozenset()))  # type: ignore[arg-type]
    try:
        assert strategies.run_gathers("toy-gathers") and not strategies.run_gathers("toy-reads")
        streamed = _run(log, tmp_path / "a.jsonl", strategy="toy-gathers")
        held = _run(log, tmp_path / "b.jsonl", strategy="toy-reads")
    finally:
        for name in ("toy-gathers", "toy-reads"):
            plugins.STRATEGIES.unregister(name)
    assert not streamed.compacted and not held.compacted
    assert streamed.held is not None and held.held is None  # (the route taken, as above)
    assert streamed.estimate.extras.get("sliding_window") == held.estimate.extras.get("sliding_window")
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes() == log.read_bytes()


class Verbatim(ExtractiveSummarizer):
    """A summary written by no model, under its own name: whether it is checked and timed is its trait's."""

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        return SummaryResult(text="as the facts say", summarizer=self.name, duration_s=2.0)


@pytest.mark.parametrize("extracts", [True, False])
def test_a_summary_that_is_the_facts_is_not_checked_nor_timed(extracts: bool) -> None:
    name = "toy-verbatim"
    plugins.SUMMARIZERS.register(name, type("V", (Verbatim,), {"name": name}),
                                 {plugins.OFFLINE, plugins.EXTRACTS} if extracts else {plugins.OFFLINE})
    try:
        request = SummaryRequest(records=[], budget_tokens=500)
        got = summarize(request, Options(summarizer=name), warn=lambda _: None)
        details = summary_details(got)
    finally:
        plugins.SUMMARIZERS.unregister(name)
    # the check of a summary a model wrote says what it found (here: nothing to pin, or it is rejected)
    assert (got.check is None and not got.fallback) is extracts
    assert (" s)" in details or " s;" in details) is not extracts, details


def test_a_strategy_s_section_is_checked_by_its_own_class(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The store knows no section's rules: the sliding window's events are checked by its section's
    ``problem`` (the registry's ``state_section``), a problem in one event named by its path."""
    path = tmp_path / "s.ctxstate.json"
    st = state.new_state("openai")
    st.sections["events"] = [{"start": 0, "end": 2, "invocations": 1, "records": 2, "original_tokens": 9,
                              "compacted_tokens": 3, "ratio": 0.3, "summary": "s", "summarizer": "extractive",
                              "fallback": False, "created_at": "2025-01-02T03:04:05Z"}]
    state.save_state(path, st)
    assert state.load_state(path) is not None
    monkeypatch.setattr(WindowEvents, "problem", staticmethod(lambda obj: f"[{len(obj) - 1}]: toy says no"),
                        raising=False)
    with pytest.raises(StateError, match=r"\$\.events\[0\]: toy says no"):
        state.load_state(path)

"""What ``run``'s routing knows of a strategy or a summarizer is what it declares (``plugins``' traits), never
its name: a toy strategy and a toy summarizer, registered here alone, take the route without holding the file
when they declare the trait, and the held one when they do not (docs/DESIGN.md "Contracts")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from helpers import coding_session, jsonl, sys_msg

from ctxcompact import engine, plugins
from ctxcompact.compaction_stream import may_compact_streamed
from ctxcompact.errors import SummarizerError, UsageError
from ctxcompact.options import Options
from ctxcompact.strategies import get_strategy, register
from ctxcompact.strategies.base import Outcome, StrategyInput
from ctxcompact.summarizers.extractive import ExtractiveSummarizer


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

    def estimate_needs_context(self, opts: Options) -> bool:
        return False

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
    streams = frozenset({plugins.COMPACTS_STREAMED})
    register(Summarizes("toy-streams", streams))  # type: ignore[arg-type]
    register(Summarizes("toy-held", frozenset()))  # type: ignore[arg-type]
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

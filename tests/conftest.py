"""Session-wide settings for the suite."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

# The tests live in folders that mirror the package (tests/formats/ for ctxcompact/formats/, ...); the shared
# helpers (helpers.py, providers.py, scan_cases.py) stay here and are imported by name from every folder.
sys.path.insert(0, str(Path(__file__).resolve().parent))

# The exact counter caches its rank tables in the user's cache folder
# (docs/measurements/performance.md#a-hooks-call); the suite and every CLI it starts keep them in a folder of
# their own. XDG_CACHE_HOME rather than CTXCOMPACT_CACHE_DIR, because the CLI helpers start the CLI without
# the CTXCOMPACT_ variables of the test environment.
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="ctxcompact-test-cache-")

# Property tests are not timed (no timed tests: docs/measurements holds the speed): hypothesis's default
# deadline of 200 ms an example, and its health check on slow data generation, are wall-clock bounds that a
# loaded machine breaks (a worker niced beside 8-14 busy processes waits seconds for a core). A test's own
# ``settings`` still sets what it names; these are the defaults under it.
settings.register_profile("ctxcompact", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ctxcompact")


@pytest.fixture(autouse=True, scope="module")
def _no_disk_flush(request: pytest.FixtureRequest) -> Any:
    """``os.fsync`` does nothing in the test processes but in tests/test_atomic.py (which flushes for real
    and spies that every write does): every atomic write still calls it, but no test can observe the flush
    to the disk itself, and waiting for it was half the simulate matrix's time (12,706 of them: 170 s → 92 s
    of wall at load 6, the same CPU). The CLI in a subprocess still flushes."""
    if request.path.name == "test_atomic.py":
        yield
        return
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(os, "fsync", lambda fd: None)
        yield


#: the files that take a worker longest (seconds, a full run on 2 cores), handed to the workers first: with
#: ``--dist loadfile`` a file runs on one worker, and xdist handed them out by their number of tests, so the
#: one-minute test_local_llm (2 tests) went last while the other worker sat idle. The rest follow in
#: collection order (``--no-loadscope-reorder`` in pyproject.toml keeps this order).
SLOWEST_FIRST = (
    # the local model first, beside run_streamed's memory tests: its server (2 threads then, 1 now) beside the
    # doubling tests (CPU time, best of 3) made them time again at 4n and 8n (a full run at load 4-10: 793 s)
    "tests/summarizers/test_local_llm.py",  # ~65 (with the local-llm extra)
    "tests/engine/test_run_streamed.py",  # ~150 s
    "tests/facts/test_linear_scans.py",  # ~120
    "tests/cli/test_safety_io.py",  # ~47
    "tests/devtools/test_simulate.py",  # ~45
    "tests/state/test_resume_claude_code.py",  # ~45
    "tests/engine/test_memory_streamed.py",  # ~35
    "tests/tokens/test_long_pieces.py",  # ~24
    "tests/tokens/test_fastpaths.py",  # ~20
    "tests/summarizers/test_run_llm.py",  # ~19
    "tests/cli/test_cli_progress.py",  # ~14
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {path: i for i, path in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.partition("::")[0], len(rank)))  # (stable)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many messages each exact counting call was given, in order (the real counter still counts):
    the instrument of the tests that a call counts only what it has not counted before."""
    from ctxcompact.tokens import exact

    sizes: list[int] = []
    real = exact.count_token_texts  # (count_messages and tokens.counts both count through it)

    def spy(messages, encoding=exact.DEFAULT_ENCODING):  # type: ignore[no-untyped-def]
        sizes.append(len(messages))
        return real(messages, encoding)

    monkeypatch.setattr(exact, "count_token_texts", spy)
    return sizes


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every input the held route reads into memory (``InputData.load``): a streamed call reads none."""
    from ctxcompact import source

    seen: list[Any] = []
    real = source.InputData.load.__func__  # type: ignore[attr-defined]
    monkeypatch.setattr(source.InputData, "load", classmethod(lambda cls, s: seen.append(s) or real(cls, s)))
    return seen

"""The fixtures of the real-client suite: the clients, installed once, and a temporary HOME with the recording
fake provider for each test (tests/clients/harness.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.clients.fake_provider import FakeProvider
from tests.clients.harness import Home, Unavailable, install, install_codex


@pytest.fixture(scope="session")
def clients() -> tuple[Path, Path]:
    """Claude Code's executable and Codex's (``$CTXCOMPACT_CODEX_VERSION``'s if it is set)."""
    try:
        return install()[0], install_codex()
    except Unavailable as e:
        pytest.skip(str(e))


@pytest.fixture
def home(tmp_path: Path, clients: tuple[Path, Path]) -> Iterator[Home]:
    with FakeProvider() as provider:
        yield Home(tmp_path / "home", provider, *clients)


#: the newest Codex that does not send its context again after resuming a ``compacted`` line it did not
#: write (formats/codex.py ``RESENDS_FROM``; tests/clients/test_older_codex.py)
OLDER_CODEX = "0.80.0"


@pytest.fixture(scope="session")
def older_codex(clients: tuple[Path, Path]) -> Path:
    try:
        return install_codex(OLDER_CODEX)
    except Unavailable as e:
        pytest.skip(str(e))


@pytest.fixture
def older_home(tmp_path: Path, clients: tuple[Path, Path], older_codex: Path) -> Iterator[Home]:
    with FakeProvider() as provider:
        yield Home(tmp_path / "home", provider, clients[0], older_codex)

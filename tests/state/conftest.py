"""Fixtures of the state tests: every call as in a new process, and the lines the streamed route parses."""

from __future__ import annotations

import pytest

from ctxcompact import api


@pytest.fixture
def new_process(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Every call as in a new process (no memo of conforming lines, no in-process count cache); counts the
    lines each call checks against the schema and hashes for the count cache."""
    from ctxcompact.formats import jsonl
    from ctxcompact.state import cache as state_cache
    from ctxcompact.tokens import counts as counts_mod

    seen = {"schema": 0, "digest": 0}
    real_conforms, real_digest = jsonl._line_conforms, counts_mod.line_digest

    def conforms(*args):  # type: ignore[no-untyped-def]
        seen["schema"] += 1
        return real_conforms(*args)

    def digest(raw):  # type: ignore[no-untyped-def]
        seen["digest"] += 1
        return real_digest(raw)

    def forget():  # type: ignore[no-untyped-def]
        jsonl._CONFORMING.clear()
        state_cache._memo.clear()

    monkeypatch.setattr(jsonl, "_line_conforms", conforms)
    monkeypatch.setattr(counts_mod, "line_digest", digest)
    real_run = api.run

    def run(*args, **kw):  # type: ignore[no-untyped-def]
        forget()
        return real_run(*args, **kw)

    monkeypatch.setattr(api, "run", run)
    return seen


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The offset of every line the streamed route parses (pass 1 and pass 2)."""
    from ctxcompact import streaming

    offsets: list[int] = []
    real = streaming.parse_record

    def spy(fmt, obj, index, lineno, raw, offset, *rest):  # type: ignore[no-untyped-def]
        offsets.append(offset)
        return real(fmt, obj, index, lineno, raw, offset, *rest)

    monkeypatch.setattr(streaming, "parse_record", spy)
    return offsets

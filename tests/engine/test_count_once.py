"""Count once (issue 25, the compacting ``run`` ÷ ``estimate`` row): a call counts each record of the context
once, its output's records kept from the context are not counted again, and what ``--prune`` would free
(``maskable_tokens``, a pass over the whole context) is worked out only when the report is read."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from ctxcompact import api
from ctxcompact.strategies import mask

SAMPLE = Path(__file__).resolve().parent.parent.parent / "samples" / "openai-long.jsonl"


@pytest.fixture
def masked(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = mask.maskable  # (pipeline loads it only when the report's figure is read)

    def spy(si):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(si)

    monkeypatch.setattr(mask, "maskable", spy)
    return calls


def _messages(result: api.RunResult) -> int:
    return sum(r.message is not None for r in result.context.records)


def test_a_run_below_the_threshold_counts_each_record_once(counted: list[int], masked: list[int]) -> None:
    result = api.run(SAMPLE, api.Options(window=1_000_000, use_state=False), dry_run=True)
    assert not result.compacted
    assert counted == [_messages(result)]  # one batch: the context; the output is the context
    assert masked == []  # nobody asked
    assert result.estimate.to_json()["maskable_tokens"] is not None and masked == [1]
    result.estimate.to_json()
    assert masked == [1]  # worked out once


def test_a_compacting_run_counts_only_what_it_made(counted: list[int], masked: list[int]) -> None:
    result = api.run(SAMPLE, api.Options(window=8_000, use_state=False), dry_run=True)
    assert result.compacted and masked == []
    kept = {id(r) for r in result.context.records}
    made = [r for r in result.transcript.records if id(r) not in kept and r.message is not None]
    assert made  # the summary at least
    assert counted[0] == _messages(result)
    # after the context: the summary and whatever else the strategy made, never a record of the context
    assert sum(counted[1:]) <= len(made) + 2 * (len(counted) - 1)
    assert sum(counted) < 2 * _messages(result)


def test_deferred_keys_are_what_estimate_reports_and_keep_their_order(masked: list[int]) -> None:
    opts = api.Options(window=8_000, use_state=False)
    est = api.estimate(SAMPLE, opts).to_json()
    run = api.run(SAMPLE, opts, dry_run=True).estimate.to_json()
    assert list(est) == list(run) and est["maskable_tokens"] == run["maskable_tokens"]
    assert list(est)[-2:] == ["maskable_tokens", "maskable_results"]


def test_a_run_without_messages_still_reports(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(orjson.dumps(m) + b"\n" for m in [
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]))
    result = api.run(path, api.Options(window=8_000, use_state=False), dry_run=True)
    assert result.estimate.extras["maskable_tokens"] == 0

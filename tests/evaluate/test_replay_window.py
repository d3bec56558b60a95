"""A replay never hands the model more than its window, except where `run` said it cannot fit (exit 5)
(docs/concepts/handoff.md#the-work-in-flight, docs/reference/exit-codes.md). Real logs, each strategy."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import pytest

from ctxcompact.engine import run
from ctxcompact.errors import ExitCode
from ctxcompact.evaluate.core import original_records, read_input
from ctxcompact.evaluate.replay import turn_starts
from ctxcompact.options import Options

DATA = Path(__file__).resolve().parents[1] / "data"


def replay_steps(log: Path, window: int, strategy: str,
                 upto: int | None = None) -> list[tuple[int, int, bool, ExitCode]]:
    """(line, tokens the next call would carry, compacted, exit code) for each model call of the replay (up
    to line ``upto``, else the whole log), with the state carried between steps as `eval --replay` does."""
    opts = Options(window=window, strategy=strategy)
    _, data, fmt = read_input(log, opts)
    original = original_records(data, fmt, opts)
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        path, state = Path(tmp) / "s.jsonl", Path(tmp) / "s.ctxstate.json"
        ropts = dataclasses.replace(opts, state_path=state, use_state=True, reset_state=False, format=fmt,
                                    keep_trailing_results=True)
        starts = turn_starts(original)
        calls = [*starts, None] if upto is None else [i for i in starts if original[i].line <= upto]
        for i in calls:
            path.write_bytes(data if i is None else data[: original[i].offset])
            r = run(path, ropts, output=None, warn=lambda _: None)
            out.append((original[i].line if i is not None else -1, r.tokens_after, r.compacted, r.exit_code))
    return out


def over_window(steps: list[tuple[int, int, bool, ExitCode]], window: int) -> list[tuple[int, int]]:
    """The steps whose context is over the window while `run` did not say so (exit 5)."""
    return [(line, tokens) for line, tokens, _, code in steps
            if tokens > window and code != ExitCode.DOES_NOT_FIT]


BMAD = DATA / "claude-code" / "codemie-bmad-techspec-excerpt.jsonl"


@pytest.mark.parametrize("strategy", ["threshold", "sliding-window", "mask"])
def test_in_flight_tail_sized_with_the_hidden_prompt(strategy: str) -> None:
    # line 38 ends a tool loop whose four results hold ~160k characters, with a ~29k-token hidden prompt
    # measured from the log's bills: the work in flight kept verbatim used to be sized without the hidden
    # part, and the compacted context came to 60,7xx tokens in a 55,000 window (exit 5) where a smaller
    # tail fits
    steps = replay_steps(BMAD, 55_000, strategy)
    at38 = next(s for s in steps if s[0] == 38)
    assert at38[2], "the context at line 38 is over the threshold: it must compact"
    assert at38[1] <= 55_000 and at38[3] == ExitCode.OK, at38
    assert not over_window(steps, 55_000)


CODEMIE = DATA / "codex" / "codemie-rollout-compaction-threshold.jsonl"


def test_a_bill_recorded_before_a_compaction_is_not_learned_after_it() -> None:
    # At a 30,000 window the compaction before line 102 keeps the work in flight (from line 92) after the
    # summary. Line 92's bill (43,951) was for the uncompacted session; paired with the compacted prefix it
    # was learned as a 31,213-token hidden prompt (the measured one is about 7,000), and every call from
    # line 110 to the end exited 5 (52 of 67, up to 131,895 tokens)
    steps = replay_steps(CODEMIE, 30_000, "threshold", upto=128)
    assert [s[0] for s in steps][-3:] == [120, 125, 128]
    assert sum(s[2] for s in steps) >= 4
    after = [(line, tokens, code) for line, tokens, _, code in steps if line >= 102]
    assert len(after) == 5, after
    assert all(code == ExitCode.OK and tokens <= 30_000 for _, tokens, code in after), after

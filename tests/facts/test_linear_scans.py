"""Every text scan and counter is linear (issue 19, "quadratic paths"; issue 25 item 3: the counting paths on
one long pre-token), and side files are read with a bound. The cases are tests/scan_cases.py's, from every
package (facts, tokens, formats, the cleaner, the sliding window, whole runs), not only the facts'.

The scaling tests double the input and check that the time at most about doubles (the best of 3 at n;
2n timed once, and again only when over the bound: 2.5×; a quadratic scan gives 4×, and at these sizes the
old patterns took minutes); a case over it is measured at 4n and then 8n, and passes when two doublings
together are within the bound's square (n → 4n or 2n → 8n: 6.25×; quadratic gives 16×): a step of the
caches at one size is passed, a quadratic never is. The property tests check that the linear rewrites find
exactly what the old patterns found.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import scan_cases
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxcompact.errors import UsageError
from ctxcompact.facts import outcomes, text
from ctxcompact.facts.todos import load_todos_file
from ctxcompact.paths import SIDE_FILE_LIMIT, read_side_file

FAST_ENOUGH_S = 0.01  # both sizes this fast: nothing to compare (a quadratic scan takes seconds here)


def super_linear(name: str, bound: float, time_at: Callable[[int, int], float]) -> str | None:
    """Why a scan reads as worse than linear, or None; ``time_at(k, r)`` is the best of ``r`` timings at ``k``
    × its size."""
    # n is timed best of 3 (a burst of other work on a shared core that slows n's one timing would make a
    # quadratic read as linear); 2n first once, as a burst there only makes a linear scan read slower:
    # measured again when over the bound, up to 3 rounds keeping each size's best (the best of nine), so
    # whatever passes here passed the best-of-3-both-sizes check it replaces, for 2 timings at 2n fewer
    t1, t2 = time_at(1, 3), time_at(2, 1)
    for more_at_n, more_at_2n in ((0, 2), (3, 3), (3, 3)):
        if t2 / max(t1, 1e-9) <= bound or t2 < FAST_ENOUGH_S:
            return None
        if more_at_n:
            t1 = min(t1, time_at(1, more_at_n))
        t2 = min(t2, time_at(2, more_at_2n))
    if t2 / max(t1, 1e-9) <= bound or t2 < FAST_ENOUGH_S:
        return None
    # one doubling can straddle a step of the allocator or the caches (a clean clone in /tmp read ×2.5-2.9
    # on scans that double evenly above and below it; CI read ×2.5 twice at 100 → 200 → 400 k characters of
    # a regex search that reads ×1.7-1.9 above): two doublings together within the bound's square (linear
    # 4×, quadratic 16×) average a step out, n → 4n, else 2n → 8n. (One doubling alone is no proof: a
    # quadratic read ×2.3 once at one of them.)
    times = [t1, t2]
    for k in (4, 8):
        times.append(time_at(k, 3))
        if times[-1] / max(times[-3], 1e-9) <= bound**2:
            return None
    return (f"{name}: the best of 3 at n, 2n, 4n, 8n: " + ", ".join(f"{t:.3f}s" for t in times)
            + " (super-linear at every doubling)")


@pytest.mark.parametrize("case", scan_cases.CASES, ids=[c.name for c in scan_cases.CASES])
def test_doubling_the_input_at_most_about_doubles_the_time(case: scan_cases.Case) -> None:
    why = super_linear(f"{case.name} (n={case.n})", case.max_ratio,
                       lambda k, r: scan_cases.best_time(case, k * case.n, r))
    if why is not None:
        pytest.fail(why)


@pytest.mark.parametrize("times", [
    [0.02 * k * k for k in (1, 2, 4, 8)],  # quadratic
    [0.02, 0.08, 0.184, 1.28],  # quadratic, one doubling read ×2.3
    [0.02, 0.08, 0.32, 0.7],  # quadratic, then ×2.2 at the last doubling
])
def test_the_doubling_check_fails_a_quadratic(times: list[float]) -> None:
    # the allowance for a cache step must not let a quadratic through, whatever one doubling reads
    at = dict(zip((1, 2, 4, 8), times, strict=True))
    assert super_linear("q", 2.5, lambda k, _r: at[k]) is not None


@pytest.mark.parametrize("times", [
    [0.030, 0.075, 0.188, 0.36],  # CI: the error-line search, ×2.5 twice from 100,000 characters
    [0.056, 0.148, 0.352, 0.70],  # CI: the byte-pair count of a random word from 20,000 characters
    [0.02, 0.041, 0.08, 0.16],  # linear
])
def test_the_doubling_check_passes_a_linear_scan_over_a_step(times: list[float]) -> None:
    at = dict(zip((1, 2, 4, 8), times, strict=True))
    assert super_linear("l", 2.5, lambda k, _r: at[k]) is None


# the patterns as they were, to check the rewrites against
_OLD_INJECTED = re.compile(rf"<({text._TAG_ALT})(?:\s[^>]*)?>.*?(?:</\1\s*>|\Z)", re.S)
_OLD_ERROR_LINE = re.compile(outcomes._ERROR_LINE.pattern.replace(r"^[^\S\n]*", r"^\s*"), re.M)

_TAG_BITS = ["<system-reminder", "<system-reminder>", "</system-reminder>", "</system-reminder \n>", ">",
             "<bash-input>", "</bash-input>", "<bash-inputx>", "<command-name a=1>", "</command-name>",
             " ", "\n", "x", "typed text", "<", "</", "<system-reminderx"]
_ERROR_BITS = ["\n", " ", "\t", "\r", "Error:", "error:", "ValueError:", "x", "FAILED", "ok", "3 failed",
               "exit code 1", "ERROR[E1]:", "fatal:", "  fatal:"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_TAG_BITS), max_size=14))
def test_injected_spans_are_removed_exactly_as_before(bits: list[str]) -> None:
    s = "".join(bits)
    assert text._remove_injected(s) == _OLD_INJECTED.sub("", s)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_ERROR_BITS), max_size=14))
def test_error_detection_answers_as_before(bits: list[str]) -> None:
    s = "".join(bits)
    assert bool(outcomes._ERROR_LINE.search(s)) == bool(_OLD_ERROR_LINE.search(s))


# --------------------------------------------------------------------------------------------------------
# side files: regular files only, at most SIDE_FILE_LIMIT


def test_todos_from_dev_zero_is_refused_at_once() -> None:
    with pytest.raises(UsageError, match="--todos /dev/zero: not a regular file"):
        load_todos_file("/dev/zero")


def test_todos_from_a_fifo_does_not_block(tmp_path: Path) -> None:
    fifo = tmp_path / "todos.fifo"
    os.mkfifo(fifo)
    # in a child with a timeout: a regression would block forever in open()
    code = ("from ctxcompact.facts.todos import load_todos_file\n"
            "from ctxcompact.errors import UsageError\n"
            f"try:\n    load_todos_file({str(fifo)!r})\nexcept UsageError as e:\n    print(e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "not a regular file" in done.stdout, done.stderr


def test_a_side_file_over_the_limit_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "todos.md"
    big.write_bytes(b"- [ ] x\n" * (SIDE_FILE_LIMIT // 8 + 1))
    with pytest.raises(UsageError, match="over the 4,194,304-byte limit"):
        load_todos_file(big)
    assert len(read_side_file(big, "x", limit=SIDE_FILE_LIMIT * 2)) > SIDE_FILE_LIMIT


def test_a_small_todo_file_still_reads(tmp_path: Path) -> None:
    f = tmp_path / "todos.md"
    f.write_text("- [ ] write the tests\n- [x] done\n", encoding="utf-8")
    assert [t.content for t in load_todos_file(f)] == ["write the tests"]


@pytest.mark.parametrize("flag", [["run", "--window", "4000", "--no-state", "--todos", "/dev/zero"],
                                  ["eval", "--probes", "/dev/zero"]])
def test_cli_side_file_from_a_device_is_exit_2(flag: list[str]) -> None:
    sample = Path(__file__).parents[2] / "samples" / "openai-long.jsonl"  # run compacts: reads --todos
    done = subprocess.run([sys.executable, "-m", "ctxcompact", flag[0], str(sample), *flag[1:]],
                          capture_output=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert b"/dev/zero: not a regular file" in done.stderr


# --------------------------------------------------------------------------------------------------------
# issue 26 item 10: the linear rewrites answer what the quadratic originals answered

# the here-document pattern as it was, its word taken whole (the old one also tried the word's prefixes)
_OLD_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)(?!\w)\1[^\n]*\n.*?^[^\S\n]*\2[^\S\n]*$", re.S | re.M)
_HEREDOC_BITS = ["cat << EOF", "<<-'EOF'", "<<E", "EOF", "E", "  EOF  ", "\n", " ", "x.py", "<<", "body",
                 "<< \"EOF\" > out.txt", "EOFX", "a/b.py"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_HEREDOC_BITS), max_size=12))
def test_heredocs_are_stripped_as_before(bits: list[str]) -> None:
    from ctxcompact.facts.files import path_tokens, strip_heredocs

    s = "".join(bits)
    assert path_tokens(strip_heredocs(s)) == path_tokens(_OLD_HEREDOC.sub(" ", s))


def test_a_heredoc_body_is_not_the_command() -> None:
    from ctxcompact.facts.files import command_paths

    cmd = "cat > notes.md << 'EOF'\nsee src/inner.py\nEOF\npython run.py << X\nunclosed.py"
    assert command_paths(cmd) == ["notes.md", "run.py", "unclosed.py"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 12), st.integers(0, 6)), max_size=10))
def test_visible_events_are_those_no_later_event_contains(spans: list[tuple[int, int]]) -> None:
    from ctxcompact.strategies.ranges import visible_events as _visible
    from ctxcompact.strategies.sliding_window_state import Event

    events = [Event(start=a, end=a + k, invocations=1, records=k, original_tokens=0, compacted_tokens=0,
                    ratio=0.0, summary="s", summarizer="extractive") for a, k in spans]
    keep = [i for i, e in enumerate(events)
            if not any(f.start <= e.start and e.end <= f.end for f in events[i + 1:])]
    assert _visible(events) == sorted(keep, key=lambda i: (events[i].start, events[i].end, i))


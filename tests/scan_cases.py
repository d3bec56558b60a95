"""Adversarial inputs for every text scan of the summarizer's facts (issue 19, "quadratic paths"): each case
builds a text of size ``n`` on which a super-linear pattern would take time growing with ``n²``, and names
the function that scans it. ``tests/facts/test_linear_scans.py`` doubles ``n`` and checks that the time about
doubles; ``bench/scans.py`` runs the same cases at large sizes (the long campaign).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ctxcompact.evaluate import identifiers
from ctxcompact.facts import files, outcomes, rules, text
from ctxcompact.facts.calls import Hashes
from ctxcompact.facts.identifiers import names_in
from ctxcompact.secrets import scrub_credentials
from ctxcompact.summarizers import layout


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[int], Any]
    scan: Callable[[Any], object]
    n: int  # a size at which the linear scan takes tens of milliseconds (the quadratic one took minutes)
    # the bound per doubling: about 2 for a linear scan; a heap merge is n log n (2.1-2.5 a doubling on its
    # own, so the 2.5 bound left one noisy run of the suite's other worker at 4n reading 6.7 against 6.25)
    max_ratio: float = 2.5


def _run_records(n: int) -> Any:
    """A transcript whose one shell result is ``n`` blank lines and then a FAILED line (whole pipeline)."""
    from ctxcompact import api

    output = "collecting\n" + "\n" * n + "FAILED tests/test_x.py::test_y - AssertionError\n"
    lines = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Run the tests."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "bash", "arguments": '{"command": "pytest"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": output},
        {"role": "assistant", "content": "The test fails."},
        {"role": "user", "content": "<system-reminder x" * (n // 20) + " fix it"},
    ]
    import orjson

    data = b"".join(orjson.dumps(x) + b"\n" for x in lines)
    return api, data


def _bpe_count(text: str) -> object:
    """The pure-Python byte-pair counter (tokens/bpe.py) on one text, whatever tiktoken's state."""
    from ctxcompact.tokens import bpe, exact

    name = "o200k_base"
    counter = bpe.counter(name, exact._SPEC[name][0], exact.EXPECTED_SHA256[name],
                          lambda: exact.parse_ranks(exact._read_ranks_file(name)))
    counter._memo.clear()  # each timing counts from scratch
    n = counter.count(text)
    assert n is not None
    return n


def _in_a_result(make: Callable[[int], str]) -> Callable[[int], bytes]:
    """A transcript whose one tool result is ``make(n)`` (issue 25 item 3: a tool's output, through run)."""

    def build(n: int) -> bytes:
        return _jsonl([{"role": "user", "content": "Run it."},
                       {"role": "assistant", "content": None, "tool_calls": [
                           {"id": "c1", "type": "function",
                            "function": {"name": "bash", "arguments": "{}"}}]},
                       {"role": "tool", "tool_call_id": "c1", "content": make(n)},
                       {"role": "assistant", "content": "Done."}])

    return build


def _run_counting(data: bytes) -> object:
    """``run`` below the threshold, counting exactly: the whole pipeline, the counter included."""
    from ctxcompact import api
    from ctxcompact.options import Options
    from ctxcompact.tokens import bpe

    for counter in bpe._counters.values():
        counter._memo.clear()  # each timing counts from scratch (the counter remembers pre-tokens)
    result = api.run(data, Options(window=1_000_000, use_state=False), dry_run=True)
    assert result.estimate.exact is not None and not result.compacted
    return result


def _tiktoken_count(text: str) -> object:
    """The exact counter once tiktoken's Encoding is loaded in the process (``tokens.exact.count_texts``):
    what a large transcript's counts take (issue 25 item 3)."""
    from ctxcompact.tokens import bpe, exact

    exact.get_encoding("o200k_base")  # loaded: the small-input pure path steps aside
    for counter in bpe._counters.values():
        counter._memo.clear()
    n = exact.count_texts([text], "o200k_base")[0]
    assert n > 0
    return n


def _estimate_counting(exact: str) -> Callable[[bytes], object]:
    """``estimate`` (held: a small input) with the exact counter ``exact``: read, clean, count, decide."""

    def scan(data: bytes) -> object:
        from ctxcompact import api
        from ctxcompact.options import Options
        from ctxcompact.tokens import bpe

        for counter in bpe._counters.values():
            counter._memo.clear()
        report = api.estimate(data, Options(window=100_000_000, use_state=False, exact=exact))
        assert report.exact is not None
        return report

    return scan


def _cjk(n: int) -> str:
    import random

    rnd = random.Random(5)
    return "".join(map(chr, rnd.choices(range(0x4E00, 0x4E00 + 3000), k=n)))


def _word(n: int) -> str:
    import random

    rnd = random.Random(6)
    return "".join(rnd.choices("abcdefghijklmnopqrstuvwxyz", k=n))


def _jsonl(lines: list[dict[str, Any]]) -> bytes:
    import orjson

    return b"".join(orjson.dumps(x) + b"\n" for x in lines)


def _invocations(n: int) -> bytes:
    """A long session of ``n`` requests and answers: the sliding window's first run makes every event.

    Every request states the same rule: with a new rule in each, the summaries' quoted rules grow to their
    cap (200) over the first 200 requests, a constant whose step read as super-linear (×2.6 a doubling in
    CI) at the sizes a test can afford; the store's own work per rule is ~3 µs an event."""
    lines: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    for i in range(n):
        lines.append({"role": "user", "content": f"Please fix bug {i} in src/mod{i}.py. Never touch tests."})
        lines.append({"role": "assistant", "content": f"Fixed bug {i}: the loop bound in src/mod{i}.py."})
    return _jsonl(lines)


def _sliding_window(data: bytes) -> object:
    from ctxcompact import api
    from ctxcompact.options import Options

    # a small window: its summary budget is spent after 4 events, not 16, and the cheap events before the
    # first roll-up are an offset that reads as super-linear (linear from -16 events reads ×2.4 at 50 → 100)
    return api.run(data, Options(strategy="sliding-window", window=20_000, use_state=False), dry_run=True)


def _tool_loop(n: int) -> Any:
    """A tool loop of ``n`` turns, each call with its own id and its result, then a person's line: the
    cleaner settles it part after part, carrying the calls of the parts before."""
    from ctxcompact.formats.jsonl import read_transcript

    lines: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i in range(n):
        lines.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]})
        lines.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"r{i}"})
        lines.append({"role": "user", "content": f"next {i}"})
    return read_transcript(_jsonl(lines), "openai", schema=False).transcript


def _clean(transcript: Any) -> object:
    from ctxcompact.clean import clean

    return clean(transcript)


def _one_reused_id(n: int) -> Any:
    """``n`` calls all with the placeholder id ``call_id`` (a fine-tuning habit), each answered, then ``n``
    person's lines: the cleaner renames every call after the first and, for Anthropic, merges the user run."""
    from ctxcompact.formats.jsonl import read_transcript

    lines: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i in range(n):
        lines.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_id", "type": "function", "function": {"name": "f", "arguments": f'{{"i": {i}}}'}}]})
        lines.append({"role": "tool", "tool_call_id": "call_id", "content": f"r{i}"})
    lines += [{"role": "user", "content": f"u{i}"} for i in range(n)]
    return read_transcript(_jsonl(lines), "openai", schema=False).transcript


def _clean_both(transcript: Any) -> object:
    from ctxcompact.clean import clean
    from ctxcompact.formats import get_format

    return clean(transcript), clean(transcript, get_format("anthropic").layout)


def _system_mid_conversation(n: int) -> bytes:
    """An Anthropic-shaped transcript with a system message inside every turn (each one moved and merged)."""
    lines: list[dict[str, Any]] = []
    for i in range(n):
        lines += [{"role": "user", "content": f"question {i} about src/q{i}.py"},
                  {"role": "system", "content": f"reminder {i}"},
                  {"role": "assistant", "content": f"answer {i}"}]
    return _jsonl(lines)


def _anthropic_run(data: bytes) -> object:
    from ctxcompact import api
    from ctxcompact.options import Options

    return api.run(data, Options(format="anthropic", window=4000, use_state=False), dry_run=True)


def _failed_commands(n: int) -> bytes:
    """A session of ``n`` failing test commands (eval's identifiers, errors, the truncation baseline)."""
    import orjson

    lines: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."},
                                   {"role": "user", "content": "Run the tests until they pass."}]
    for i in range(n):
        args = orjson.dumps({"command": f"pytest tests/test_{i}.py"}).decode()
        lines += [{"role": "assistant", "content": None, "tool_calls": [
                      {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": args}}]},
                  {"role": "tool", "tool_call_id": f"c{i}",
                   "content": f"FAILED tests/test_{i}.py::test_x - AssertionError: {i}\nexit code 1"}]
    lines.append({"role": "assistant", "content": "Still failing."})
    return _jsonl(lines)


def _failures_then_successes(n: int) -> Any:
    """``n`` failing commands, then ``n`` other commands that succeed (each success looked for the errors it
    resolves: it walked every error seen)."""
    from ctxcompact.model import Message, Record, Role, TextBlock, ToolCall, ToolResult

    def turn(i: int, command: str, output: str, failed: bool) -> list[Record]:
        args = f'{{"command": "{command}"}}'
        asked = Message(Role.ASSISTANT, [ToolCall(f"c{i}", "bash", args, {"command": command})])
        said = Message(Role.TOOL, [ToolResult(f"c{i}", [TextBlock(output)], is_error=failed)])
        return [Record(index=2 * i, line=2 * i, raw=None, data=None, message=asked),
                Record(index=2 * i + 1, line=2 * i + 1, raw=None, data=None, message=said)]

    records = [r for i in range(n) for r in turn(i, f"pytest tests/test_{i}.py", "Error: boom", True)]
    return records + [r for i in range(n) for r in turn(n + i, f"make target{i}", "ok", False)]


def _eval(data: bytes) -> object:
    from ctxcompact import api
    from ctxcompact.options import Options

    return api.evaluate(data, Options(window=20_000, use_state=False))


def _summarize(arg: Any) -> object:
    api, data = arg
    from ctxcompact.options import Options

    return api.run(data, Options(window=2000, use_state=False), dry_run=True)


def _document(n: int) -> bytes:
    """A pretty-printed JSON array of ``n`` messages (a whole-file JSON transcript, split_document)."""
    import json

    return json.dumps([{"role": "user" if i % 2 else "assistant", "content": f"message {i}"}
                       for i in range(n)], indent=2).encode()


def _split(data: bytes) -> object:
    from ctxcompact.document import split_document

    return split_document(data)


def _long_line_then_boundary(n: int) -> bytes:
    """A Claude Code log: a line ``n`` bytes long (a long tool result), then a compact_boundary."""
    import orjson

    long = orjson.dumps({"type": "user", "uuid": "u1", "message": {"role": "user", "content": "a" * n}})
    boundary = orjson.dumps({"type": "system", "subtype": "compact_boundary", "uuid": "b1"})
    return long + b"\n" + boundary + b"\n"


def _random_hashes(n: int) -> list[int]:
    import random

    rnd = random.Random(7)
    return [rnd.getrandbits(64) - (1 << 63) for _ in range(n)]


def _add_hashes(hashes: list[int]) -> object:
    """Every hash added to one :class:`Hashes` (the ids a tool loop looks up): each merge of the recent set
    into the sorted array is linear in the array, and the merges come geometrically further apart."""
    seen = Hashes()
    for h in hashes:
        seen.add_hash(h)
    assert len(seen.old) + len(seen.new) == len(hashes)
    return seen


def _boundary_scan(data: bytes) -> object:
    """The byte scan for the last compact_boundary (formats/claude_code_stream), over the whole file."""
    import io

    from ctxcompact.formats.claude_code_stream import StreamFinish

    finish = StreamFinish()
    finish._scan(io.BytesIO(data), 0, None)
    assert finish.boundary == data.index(b"\n") + 1
    return finish.boundary


#: the bound a doubling of one long pre-token may read: every counting path merges it with a heap (~n
#: entries), ×2.1 a doubling by the log alone, and the heap outgrows the caches at these sizes (a random
#: word, which merges the most pairs, read ×2.6-2.7 from 20,000 characters in CI and here under load); a
#: quadratic merge reads ×4
HEAP_MERGE = 2.8

#: one long pre-token of each kind: white space, newlines, one character, a word, CJK without spaces
LONG_SHAPES: tuple[tuple[str, Callable[[int], str]], ...] = (
    ("a run of spaces", lambda n: "x" + " " * n + "y"),
    ("a run of newlines then FAILED", lambda n: "ok\n" + "\n" * n + "FAILED"),
    ("one repeated character", lambda n: "a" * n),
    ("a long unbroken word", _word),
    ("CJK without spaces", _cjk),
)


CASES: tuple[Case, ...] = (
    Case("whole-file JSON array split into lines", _document, _split, 50_000),
    Case("error line: blank lines then FAILED", lambda n: "ok\n" + "\n" * n + "FAILED x\n",
         lambda s: outcomes._ERROR_LINE.search(s), 100_000),
    Case("error line: whitespace lines, no error", lambda n: "ok\n" + " \t\n" * n,
         lambda s: outcomes._ERROR_LINE.search(s), 100_000),
    Case("result_is_error / error_line on blank lines", lambda n: "x\n" + "\n" * n + "Error: boom\n",
         outcomes.error_line, 200_000),
    Case("injected span: unclosed <system-reminder x", lambda n: "<system-reminder x" * n,
         text.strip_injected, 200_000),
    Case("injected span: many closed elements", lambda n: "<bash-input>ls</bash-input> typed " * n,
         text.strip_injected, 50_000),
    Case("URL in path extraction: a.a.a…", lambda n: "a." * n, files.path_tokens, 100_000),
    Case("URL in eval identifiers: a.a.a…", lambda n: "a." * n, identifiers._urls, 100_000),
    # the name scan's look-ahead reads a run of lowercase letters and dashes once, from the run's start
    Case("names: one long run of a-a-a… then a capital", lambda n: "a-" * n + "B", names_in, 100_000),
    Case("names: many runs of lowercase and dashes", lambda n: " ab-cd-e" * n + " X1", names_in, 20_000),
    Case("path tokens: many distinct files", lambda n: " ".join(f"f{i}.py" for i in range(n)),
         files.path_tokens, 20_000),
    Case("command paths: unclosed escaped quotes", lambda n: 'cat "' + '\\"x' * n, files.command_paths,
         100_000),
    Case("command shape: unclosed escaped quotes", lambda n: 'curl "' + '\\"x' * n, layout.command_shape,
         100_000),
    Case("whole run (dry): blank-line shell output + unclosed tags", _run_records, _summarize, 100_000),
    # issue 26 items 9-10: the byte-pair counter on one long pre-token, and the other quadratic scans
    Case("byte-pair count: a run of spaces", lambda n: "x" + " " * n + "y", _bpe_count, 20_000, HEAP_MERGE),
    Case("byte-pair count: a run of newlines", lambda n: "ok\n" + "\n" * n + "FAILED", _bpe_count, 20_000,
         HEAP_MERGE),
    Case("byte-pair count: one repeated character", lambda n: "a" * n, _bpe_count, 20_000, HEAP_MERGE),
    Case("byte-pair count: a long unbroken word", _word, _bpe_count, 40_000, HEAP_MERGE),
    Case("byte-pair count: CJK without spaces", _cjk, _bpe_count, 20_000, HEAP_MERGE),
    # issue 25 item 3: the same shapes through every counting path: tiktoken's own merge grows faster than
    # the piece (and its regex engine panics on ~900k characters of white space), so a text that may hold a
    # long pre-token is counted by the heap merge (tokens.exact.may_hold_long_piece)
    *(Case(f"{path}: {shape}", build, scan, n, HEAP_MERGE)
      for shape, make in LONG_SHAPES
      for path, build, scan, n in (
          ("tiktoken path", make, _tiktoken_count, 50_000),
          ("run", _in_a_result(make), _run_counting, 25_000),
          ("estimate", _in_a_result(make), _estimate_counting("tiktoken"), 25_000),
          # (not the heuristic path, run --exact none: on one record it is an orjson decode and a hash, a
          # few milliseconds at any size a test can hold, where allocator steps and noise read as 2.7-3x; the
          # reading and hashing it shares with these paths are doubled through them)
)),
    # the scan re-joined and re-searched its carry for each 1 MiB chunk of a line with no newline yet
    Case("Claude Code boundary scan: one long line", _long_line_then_boundary, _boundary_scan, 16 << 20),
    # (at 5,000 sentences it ran in ~6 ms, where one burst on a shared core read as ×4 in CI: ~50 ms now)
    Case("rules: many rule-like sentences", lambda n: " ".join(f"Never touch file{i}." for i in range(n)),
         rules.rules_in_text, 20_000),
    Case("heredoc: many unclosed << word openers", lambda n: "".join(f"cat << EOF{i}\n" for i in range(n)),
         files.command_paths, 4_000),
    Case("heredoc: many closed here-documents",
         lambda n: "".join(f"cat << E{i}\nbody\nE{i}\n" for i in range(n)), files.command_paths, 4_000),
    # (~4 ms of summarizing per invocation: 400 show the trend past the first roll-up; ×1.8-2.3 a doubling
    # from 250 to 2,000 on a quiet machine)
    Case("sliding window: first run over many invocations", _invocations, _sliding_window, 400),
    # the cleaner fed part after part looked every carried call up again for each part (issue 25)
    Case("clean: a long tool loop, settled part after part", _tool_loop, _clean, 8_000),
    Case("clean: every call reusing one id, then a long user run", _one_reused_id, _clean_both, 1_000),
    # (sizes under 200,000 characters: above it the exact counter changes gear, a step and no trend)
    Case("anthropic: a system message inside every turn (run)", _system_mid_conversation, _anthropic_run,
         500),
    Case("eval: many failed commands", _failed_commands, _eval, 400),
    Case("errors seen: many failures, then many other successes", _failures_then_successes,
         outcomes.errors_seen, 2_000),
    # the call ids looked up, merged in place into a sorted array (facts/calls.Hashes._merge)
    Case("call-id hashes: many added, merged in place", _random_hashes, _add_hashes, 50_000),
    # the credential scrubber on what looks almost like a credential, over and over
    Case("credentials: a-a-a… names before '='", lambda n: "a-" * n + "=", scrub_credentials, 50_000),
    Case("credentials: many near-miss keys", lambda n: "sk-abc ghp_x Bearer x key= " * n, scrub_credentials,
         20_000),
    Case("credentials: one long URL user part", lambda n: "https://" + "u" * n + ":p", scrub_credentials,
         100_000),
)


#: the inputs built last, by (case name, size), with their case: a doubling check times n and 2n again
#: (tests/facts/test_linear_scans.py ``super_linear``), and building "clean: a long tool loop" cost more
#: than scanning it. Two kept, so the larger sizes (bench/scans.py) hold at most the one before
_BUILT: dict[tuple[str, int], tuple[Case, Any]] = {}
_KEEP_BUILT = 2


def built(case: Case, n: int) -> Any:
    """``case.build(n)``, built once while the size is still timed again (every timing of a size reads the
    same input, as the repeats of one ``best_time`` always did)."""
    key = (case.name, n)
    hit = _BUILT.pop(key, None)
    if hit is None or hit[0] is not case:
        hit = (case, case.build(n))
    while len(_BUILT) >= _KEEP_BUILT:
        del _BUILT[next(iter(_BUILT))]  # (the least recently used)
    _BUILT[key] = hit
    return hit[1]


def best_time(case: Case, n: int, repeat: int = 3) -> float:
    """The best of ``repeat`` timings of ``case.scan`` on an input of size ``n`` (built once, not timed:
    :func:`built`), in CPU time of this process: eight processes share two cores while the suite runs, and
    wall time then measures them. What the process held before is frozen out of the collector's sight
    meanwhile: late in a suite a worker holds millions of objects, and every full collection the scan's
    allocations trigger would traverse them all, a cost growing with the scan's size that is not the
    scan's."""
    arg = built(case, n)
    best = float("inf")
    gc.collect()
    gc.freeze()
    try:
        for _ in range(repeat):
            start = time.process_time()
            case.scan(arg)
            best = min(best, time.process_time() - start)
    finally:
        gc.unfreeze()
    return best


def doubling_ratio(case: Case, n: int | None = None, repeat: int = 3) -> tuple[float, float, float]:
    """(time at n, time at 2n, their ratio): about 2 for a linear scan, about 4 for a quadratic one."""
    n = n or case.n
    t1 = best_time(case, n, repeat)
    t2 = best_time(case, 2 * n, repeat)
    return t1, t2, t2 / max(t1, 1e-9)

"""Adversarial inputs for every text scan of the summarizer's facts (issue 19, "quadratic paths"): each case
builds a text of size ``n`` on which a super-linear pattern would take time growing with ``n²``, and names
the function that scans it. ``tests/test_linear_scans.py`` doubles ``n`` and checks that the time about
doubles; ``bench/scans.py`` runs the same cases at large sizes (the long campaign).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ctxcompact.evaluate import identifiers
from ctxcompact.facts import files, outcomes, text


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[int], Any]
    scan: Callable[[Any], object]
    n: int  # a size at which the linear scan takes tens of milliseconds (the quadratic one took minutes)


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


def _summarize(arg: Any) -> object:
    api, data = arg
    from ctxcompact.options import Options

    return api.run(data, Options(window=2000, use_state=False), dry_run=True)


def _document(n: int) -> bytes:
    """A pretty-printed JSON array of ``n`` messages (a whole-file JSON transcript, reader.split_document)."""
    import json

    return json.dumps([{"role": "user" if i % 2 else "assistant", "content": f"message {i}"}
                       for i in range(n)], indent=2).encode()


def _split(data: bytes) -> object:
    from ctxcompact.reader import split_document

    return split_document(data)


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
    Case("path tokens: many distinct files", lambda n: " ".join(f"f{i}.py" for i in range(n)),
         files.path_tokens, 20_000),
    Case("whole run (dry): blank-line shell output + unclosed tags", _run_records, _summarize, 100_000),
)


def best_time(case: Case, n: int, repeat: int = 3) -> float:
    """The best of ``repeat`` timings of ``case.scan`` on an input of size ``n`` (built once, not timed)."""
    arg = case.build(n)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        case.scan(arg)
        best = min(best, time.perf_counter() - start)
    return best


def doubling_ratio(case: Case, n: int | None = None, repeat: int = 3) -> tuple[float, float, float]:
    """(time at n, time at 2n, their ratio): about 2 for a linear scan, about 4 for a quadratic one."""
    n = n or case.n
    t1 = best_time(case, n, repeat)
    t2 = best_time(case, 2 * n, repeat)
    return t1, t2, t2 / max(t1, 1e-9)

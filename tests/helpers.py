"""Small builders for tests: realistic openai/anthropic lines without hand-writing JSON."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "samples"
UPDATE_GOLDEN = bool(os.environ.get("CTXCOMPACT_UPDATE_GOLDEN"))


def check_golden(produced: bytes, expected: Path) -> None:
    """The one comparison of an output with its golden file, for every golden test (the CLI cases of
    tests/cli/test_golden.py, the cleaner's of tests/test_clean.py, mask's fixture, the old states' next
    outputs): one message, and one way to regenerate them all after a deliberate change,
    CTXCOMPACT_UPDATE_GOLDEN=1 (then review the diff)."""
    if UPDATE_GOLDEN:
        expected.write_bytes(produced)
    assert expected.exists(), f"{expected} is missing (CTXCOMPACT_UPDATE_GOLDEN=1 to create it)"
    assert produced == expected.read_bytes(), f"{expected} differs (CTXCOMPACT_UPDATE_GOLDEN=1 to regenerate)"


def jsonl(objs: Iterable[Any]) -> bytes:
    return b"".join(orjson.dumps(o) + b"\n" for o in objs)


def sys_msg(text: str) -> dict[str, Any]:
    return {"role": "system", "content": text}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(
    text: str | None = None, calls: list[tuple[str, str, dict[str, Any]]] | None = None, **extra: Any
) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        msg["tool_calls"] = [
            {
                "id": cid,
                "type": "function",
                "function": {"name": name, "arguments": orjson.dumps(args).decode()},
            }
            for cid, name, args in calls
        ]
    msg.update(extra)
    return msg


def tool(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def coding_session(turns: int, tool_chars: int = 2000, start: int = 0) -> list[dict[str, Any]]:
    """A coding-agent conversation: each turn a request, a read_file call with a result, and an answer."""
    out: list[dict[str, Any]] = []
    for t in range(start, start + turns):
        path = f"src/module_{t}.py"
        out.append(user(f"Turn {t}: please look at {path} and explain the function handle_{t}."))
        out.append(assistant(None, [(f"call_{t}", "read_file", {"path": path})]))
        body = (f"def handle_{t}(request):\n    return process(request, retries={t})\n" * 100)[:tool_chars]
        out.append(tool(f"call_{t}", body))
        out.append(assistant(f"handle_{t} forwards the request to process() with {t} retries."))
    return out


def grown_session(splits: list[int]) -> list[bytes]:
    """A coding session as a hook sees it grow: after the system prompt and first turn, ``n`` more turns per
    call for each ``n`` of ``splits`` (a hypothesis draw), each call's whole file."""
    msgs = [sys_msg("You are a coding agent."), *coding_session(8, tool_chars=900)]
    ends, at = [], 2
    for n in splits:
        at = min(len(msgs), at + n * 2)
        ends.append(at)
    return [jsonl(msgs[:end]) for end in ends]


def tool_loop_log(path: Path, n: int) -> Path:
    """``n`` OpenAI lines of a tool loop over a few files and commands (as a real session repeats them),
    written to ``path``."""
    lines = [orjson.dumps({"role": "system", "content": "be brief"}),
             orjson.dumps({"role": "user", "content": "fix the build; never touch setup.py"})]
    for i in range(n // 3):
        args = orjson.dumps({"command": f"pytest tests/test_m{i % 40}.py -q"}).decode()
        lines += [orjson.dumps({"role": "assistant", "content": f"Running the tests of m{i % 40}.",
                                "tool_calls": [{"id": f"call_{i}", "type": "function",
                                                "function": {"name": "bash", "arguments": args}}]}),
                  orjson.dumps({"role": "tool", "tool_call_id": f"call_{i}",
                                "content": f"{i % 7} passed in 0.{i % 10}s\n" * 8}),
                  orjson.dumps({"role": "assistant", "content": f"Module m{i % 40} is fine."})]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def flip_a_content_byte(path: Path, at: int = 0) -> None:
    """Change one byte of the first message's text from offset ``at`` of ``path``, the file's length kept:
    only a digest tells (a file changed between two reads of a run)."""
    data = bytearray(path.read_bytes())
    i = data.index(b'"content":"', at) + 11
    data[i] = ord("Q") if data[i] != ord("Q") else ord("R")
    path.write_bytes(bytes(data))


def ctxcompact(
    *args: str, input: bytes | None = None, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[bytes]:
    """Run the real CLI in a subprocess (what a user or a shell pipeline sees)."""
    import os

    full_env = {k: v for k, v in os.environ.items() if not k.startswith("CTXCOMPACT_")}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "ctxcompact", *args],
        input=input,
        capture_output=True,
        env=full_env,
        cwd=cwd,
        timeout=120,
        check=False,
    )


def summary_and_continuation(res: Any) -> tuple[str, str]:
    """The summary's text and the continuation's (from its heading on) in a compacting run's output."""
    from ctxcompact.facts.text import CONTINUATION_HEAD
    from ctxcompact.model import Origin

    assert res.outcome is not None
    joined = "\n".join(r.message.text() for r in res.outcome.transcript.records
                       if r.origin in (Origin.SUMMARY, Origin.CONTINUATION) and r.message is not None)
    head, sep, tail = joined.partition(CONTINUATION_HEAD)
    assert sep, joined
    return head, sep + tail


def comparable_state(path: Path, work: Path | None = None) -> Any:
    """A state file's object without what says when or how long (not what): two routes' states compare equal.
    ``work`` (the state's folder by default) is written ``W``, so states made in two folders compare too."""
    if not path.exists():
        return None
    where = str(work if work is not None else path.parent).encode()
    state = orjson.loads(path.read_bytes().replace(where, b"W"))
    state["calibration"].pop("updated_at", None)
    if isinstance(state.get("masking"), dict):
        state["masking"].pop("updated_at", None)
    for part in [*state.get("compactions", []), state.get("summary") or {}, *(state.get("events") or [])]:
        for stamp in ("time", "duration_s", "created_at"):
            part.pop(stamp, None)
    return state


def state_without_times(path: Path) -> Any:
    """A state file's object without when or how long (every section's stamps; the folder written ``W``):
    two routes' states, made in two folders, compare equal."""
    if not path.exists():
        return None
    state = orjson.loads(path.read_bytes().replace(str(path.parent).encode(), b"W"))
    state["calibration"].pop("updated_at", None)
    for part in [*state.get("compactions", []), state.get("summary") or {}, state.get("masking") or {},
                 *state.get("events", [])]:
        for stamp in ("time", "duration_s", "created_at", "updated_at"):
            part.pop(stamp, None)
    return state


def runs_on_one_file(work: Path, hold: bool, datas: list[bytes], options: list[dict[str, Any]],
                     loads: list[Any], fields: Callable[[Any], tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """One ``engine.run`` per input (the file rewritten with it, the state kept), each with its own options,
    on the held route or not (``hold``). A result is the output (timestamps blanked, ``work`` written ``W``),
    the state, the exit code, whether it compacted, tokens before and after, warnings (returned and said),
    repairs, then ``fields(result)``, then whether the call held the file (``loads`` is what the caller's
    patch of ``InputData.load`` appends to); an error is its type, exit code and message."""
    from ctxcompact import engine
    from ctxcompact.errors import CtxCompactError
    from ctxcompact.options import Options

    work.mkdir(parents=True)
    path, out, got = work / "t.jsonl", work / "out.jsonl", []
    for data, kw in zip(datas, options, strict=True):
        path.write_bytes(data)
        loads.clear()
        said: list[str] = []
        try:
            r = engine.run(path, Options(**kw), output=out, warn=said.append, hold=hold)
        except CtxCompactError as exc:
            got.append(("error", type(exc).__name__, exc.exit_code, str(exc).replace(str(work), "W")))
            continue
        written = re.sub(rb'"timestamp":"[^"]*"', b'"timestamp":""', out.read_bytes())
        state = state_without_times(Path(f"{path}.ctxstate.json"))
        got.append((written.replace(str(work).encode(), b"W"), state, r.exit_code, r.compacted,
                    r.tokens_before, r.tokens_after, r.warnings, said, [str(x) for x in r.repairs],
                    *fields(r), bool(loads)))
    return got


def resumed_calls(monkeypatch: Any) -> list[bool]:
    """Whether each streamed call's pass 1 started at a resume point (``route_file.count_file`` spied on)."""
    from ctxcompact import route_file

    resumed: list[bool] = []
    real = route_file.count_file

    def spy(*args: Any, **kw: Any) -> Any:
        counted = real(*args, **kw)
        resumed.append(counted is not None and counted.resumed is not None)
        return counted

    monkeypatch.setattr(route_file, "count_file", spy)
    return resumed

"""Differential fuzzing of ``run``'s routes: the held route against the streamed one, any split of appends
against the calls that made it, stdin against a file, on mutants of every real log (issue 19's mutators plus
the shapes that split or reorder a transcript's calls and results).

    PYTHONPATH=. .venv/bin/python bench/fuzz_routes.py --mutants 400                # every check
    PYTHONPATH=. .venv/bin/python bench/fuzz_routes.py --mutants 100 --seed 3 --only routes --save out/

Each mutant gets a few option sets (window small/large, each strategy, --prune, --to, state or not,
--lenient, --exact none) and each is checked:

- ``routes``: ``engine.run(hold=True)`` and ``hold=False`` on the whole file: the same output, state (without
  its times), exit code, warnings, repairs and problems, or the same error;
- ``splits``: the file grown by appends (cut at random lines), one call per step with the state the last one
  left, on both routes with the count cache (and its resume point) kept: each call gives what the held
  route gives with the cache removed (docs/concepts/state.md: "any split of appends gives what a call from
  scratch gives"; a call on the whole file without the state is not promised: the state's calibration
  remembers requests the file no longer shows, e.g. before a Claude Code compact_boundary);
- ``recipe``: docs/guides/claude-code-codex.md's rounds: the file cut at random lines, the first part
  compacted with a state, the output put in the input's place, the next part appended (chained on the
  compacted log's tip), compacted again, ...; each call as a new process, on both routes with the count
  cache kept: each call gives what the held route gives with the cache removed (a second compaction after
  a covered prefix streams: seen14); ``--logs claude-code --logs codex`` keeps to the append-only logs;
- ``llm`` (only when asked: ``--only llm``): the recipe's rounds, or one call, with ``--summarizer openai``
  or ``anthropic`` against tests/providers.py's loopback server: the same requests (bodies byte for byte)
  and results on both routes (llm14);
- ``cli``: ``ctxcompact run`` on the file and on stdin (``-``, spooled), ``--json`` with ``-o``: the same
  output and exit code; no traceback; an exit code documented (docs/reference/exit-codes.md); an exit 1
  names a line; nothing in the folder written but the output and the state (names, bytes and mtimes before
  and after); ``-o`` on the input or on a link to it refused (exit 2) with nothing changed; ``-o`` a link to
  a file outside replaces the link, never the file it points to.

Mutants are deterministic in (``--seed``, number). Exit 1 when anything was found; ``--save DIR`` keeps
each finding's input and a note of how to replay it.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import multiprocessing
import random
import re
import shutil
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
import fuzz_harness as harness  # noqa: E402
from helpers import comparable_state  # noqa: E402
from route_mutants import LIMITS, Case, make_case, options_for  # noqa: E402

DOCUMENTED = {0, 1, 2, 3, 4, 5, 6}

# ------------------------------------------------------------------------------------------------ running

_STAMP = re.compile(rb'"timestamp":"[^"]*"')


@dataclass
class Finding:
    check: str
    case: int
    seed_file: str
    mutations: list[str]
    options: dict[str, Any]
    what: str
    data: bytes = b""
    extra: dict[str, Any] = field(default_factory=dict)

    def key(self) -> str:
        return f"{self.check}: {re.sub(r'[0-9]+', 'N', self.what)[:120]}"


def _norm(b: bytes, work: Path) -> bytes:
    return _STAMP.sub(b'"timestamp":""', b).replace(str(work).encode(), b"W")


def one_call(path: Path, work: Path, kw: dict[str, Any], hold: bool) -> tuple[Any, ...]:
    import orjson

    from ctxcompact import engine
    from ctxcompact.cli.render import run_json
    from ctxcompact.errors import CtxCompactError
    from ctxcompact.options import Options

    out = work / "out.jsonl"
    said: list[str] = []
    try:
        r = engine.run(path, Options(**kw), output=out, warn=said.append, hold=hold)
    except CtxCompactError as exc:
        return ("error", type(exc).__name__, exc.exit_code, str(exc).replace(str(work), "W"))
    except Exception as exc:
        return ("CRASH", type(exc).__name__, str(exc)[:300], traceback.format_exc()[-2000:])
    state = comparable_state(Path(f"{path}.ctxstate.json"), work)
    report = run_json(r, dry_run=False, output="o.jsonl")  # run --json's object
    for key in ("maskable_tokens", "maskable_results", "tokens_after_mask"):  # null when streamed (docs: it
        # needs the context)
        report["estimate"].pop(key, None)
    return (_norm(out.read_bytes(), work), state, r.exit_code, r.compacted, r.tokens_before, r.tokens_after,
            [w.replace(str(work), "W") for w in r.warnings], [s.replace(str(work), "W") for s in said],
            [str(x) for x in r.repairs], [str(p) for p in r.problems],
            orjson.loads(orjson.dumps(report).replace(str(work).encode(), b"W")))


def calls(datas: list[bytes], work: Path, kw: dict[str, Any], hold: bool,
          cold: bool = False) -> list[tuple[Any, ...]]:
    """One call per input (the file rewritten with it, the state kept); ``cold``: the count cache (with its
    resume point) removed before each call, as tests/state/test_resume.py's calls from scratch."""
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    path = work / "t.jsonl"
    got = []
    for data in datas:
        path.write_bytes(data)
        if cold:
            Path(f"{path}.ctxstate.json.counts").unlink(missing_ok=True)
        got.append(one_call(path, work, kw, hold))
    return got


_FIELDS = ("output", "state", "exit_code", "compacted", "tokens_before", "tokens_after", "warnings", "said",
           "repairs", "problems", "report")


def _diff(a: tuple[Any, ...], b: tuple[Any, ...]) -> str:
    if a[0] in ("error", "CRASH") or b[0] in ("error", "CRASH"):
        return f"{str(a)[:300]} != {str(b)[:300]}"
    for name, x, y in zip(_FIELDS, a, b, strict=False):
        if x != y:
            if name == "output":
                xl, yl = x.splitlines(), y.splitlines()
                at = next((i for i, (p, q) in enumerate(zip(xl, yl, strict=False)) if p != q),
                          min(len(xl), len(yl)))
                return (f"output differs at line {at + 1} ({len(xl)} vs {len(yl)} lines): "
                        f"{(xl[at:at + 1] or [b''])[0][:200]!r} / {(yl[at:at + 1] or [b''])[0][:200]!r}")
            if name in ("state", "report") and isinstance(x, dict) and isinstance(y, dict):
                keys = sorted(k for k in {*x, *y} if x.get(k) != y.get(k))
                return f"{name} differs in {keys}: {str(x.get(keys[0]))[:200]} / {str(y.get(keys[0]))[:200]}"
            return f"{name}: {str(x)[:300]} != {str(y)[:300]}"
    return "?"


def check_routes(case: Case, kw: dict[str, Any], work: Path, rng: random.Random) -> list[Finding]:
    found = []
    # every call in the same folder (W): a trimmed result's marker names the input's path, and its tokens
    # count in the output's size
    held = calls([case.data], work / "W", kw, True)
    streamed = calls([case.data], work / "W", kw, False)
    for name, got in (("held", held), ("streamed", streamed)):
        if got[0][0] == "CRASH":
            found.append(Finding("crash", case.number, case.seed_file, case.mutations, kw,
                                 f"{name}: {got[0][1]}: {got[0][2]}", extra={"traceback": got[0][3]}))
    if held != streamed:
        found.append(Finding("routes", case.number, case.seed_file, case.mutations, kw,
                             _diff(held[0], streamed[0])))
    # splits of appends
    lines = case.data.splitlines(keepends=True)
    if len(lines) >= 3 and kw.get("use_state", True):
        cuts = sorted(rng.sample(range(1, len(lines)), min(len(lines) - 1, rng.randint(1, 3))))
        datas = [b"".join(lines[:c]) for c in cuts] + [case.data]
        if rng.random() < 0.3:  # a call while the writer is mid-line: the last line cut short, then whole
            at = rng.randrange(len(cuts))
            line = lines[cuts[at]]
            datas.insert(at + 1, datas[at] + line[:rng.randint(1, max(1, len(line) - 1))])
            cuts = [*cuts[:at + 1], -cuts[at], *cuts[at + 1:]]  # (negative: the cut inside line N + 1)
        cold = calls(datas, work / "W", kw, True, cold=True)
        for hold in (True, False):
            warm = calls(datas, work / "W", kw, hold)
            for i, (a, b) in enumerate(zip(cold, warm, strict=True)):
                if a != b:
                    found.append(Finding("splits", case.number, case.seed_file, case.mutations,
                                         {**kw, "cuts": cuts, "hold": hold},
                                         f"call {i + 1} (cold held / warm): {_diff(a, b)}"))
                    break
    return found


# ------------------------------------------------------------------------------------------------- recipe

def _forget() -> None:
    """As a new process: no memo of conforming lines, no in-process count cache (tests/state/conftest.py)."""
    from ctxcompact.formats import jsonl
    from ctxcompact.state import cache as state_cache

    jsonl._CONFORMING.clear()
    state_cache._memo.clear()


_TAKEN: list[str] = []  # the route of each compaction pass 2 made since the last clear


def _spy_routes() -> None:
    """Note which route each call's compaction took (as tests/state/test_resume_second_compaction.py's
    ``routes``): "prefix" a compaction after a covered prefix made in pass 2 (seen14's new route)."""
    from ctxcompact import compaction_stream, route_file, source

    if getattr(route_file, "_fuzz_spied", False):
        return
    real = compaction_stream.read_conversation

    def read(p: Any, counted: Any, *a: Any) -> Any:
        _TAKEN.append("prefix" if counted.covered is not None else "streamed")
        return real(p, counted, *a)

    load = source.InputData.load.__func__  # type: ignore[attr-defined]
    route_file.read_conversation = read  # type: ignore[assignment]
    source.InputData.load = classmethod(lambda cls, s: _TAKEN.append("held") or load(cls, s))  # type: ignore
    route_file._fuzz_spied = True  # type: ignore[attr-defined]


def _reparent(log: bytes, chunk: bytes) -> bytes:
    """The client's next lines after a compacted log (tests/state/test_resume_second_compaction.py's
    ``_append``): a Claude Code line chained on the line that was the log's last is chained on its last
    line now (the client continues the compacted log from its tip)."""
    import orjson

    try:
        first = orjson.loads(chunk.split(b"\n", 1)[0])
        tip = orjson.loads(log.splitlines()[-1]).get("uuid") if log.strip() else None
    except orjson.JSONDecodeError:
        return chunk
    if isinstance(first, dict) and isinstance(first.get("parentUuid"), str) and isinstance(tip, str):
        chunk = chunk.replace(b'"parentUuid":"%s"' % first["parentUuid"].encode(),
                              b'"parentUuid":"%s"' % tip.encode())
    return chunk


def _client_lines(case: Case, rng: random.Random) -> list[bytes]:
    """One or two appends of lines the client writes after it resumes a compacted log
    (tests/state/test_resume_second_compaction.py's generators), for a Claude Code or a Codex seed; some
    with the client's own compaction among them (a compact_boundary, a compacted line)."""
    sys.path.insert(0, str(REPO / "tests" / "state"))
    from test_resume_own_compaction import _Log
    from test_resume_second_compaction import _codex_more

    own = rng.randint(-20, 30)  # the client's own compaction after that many rounds (if >= 0)
    if "codex" in case.seed_file:
        more = _codex_more(rng.randint(3, 30), rng.randrange(100))
        if 0 <= own < len(more) // 4:
            history = [{"type": "message", "role": "user", "content": [{"type": "input_text",
                                                                        "text": "Carry on."}]}]
            more.insert(2 + 4 * own, json.dumps({
                "timestamp": "2026-12-01T11:00:00.000Z", "type": "compacted",
                "payload": {"message": "", "replacement_history": history}}, separators=(",", ":")).encode()
                + b"\n")
    elif "claude-code" in case.seed_file:
        log = _Log(rng.randrange(100))
        log.n, log.tip = 10**6, "tip"  # (uuids apart from the session's; chained on the tip by _reparent)
        log.user("Carry on from the summary.")
        for t in range(rng.randint(2, 40)):
            if t == own:
                log.boundary()
            log.turn(log.rnd.choice([1, 2]))
            if t % 3 == 2:
                log.reply()
                log.user(f"Next, step {t}.")
        more = log.lines
    else:
        return []
    at = rng.randrange(1, len(more)) if len(more) > 1 and rng.random() < 0.5 else len(more)
    return [p for p in (b"".join(more[:at]), b"".join(more[at:])) if p]


def recipe(parts: list[bytes], work: Path, kw: dict[str, Any], hold: bool,
           cold: bool = False) -> tuple[list[tuple[Any, ...]], list[list[str]]]:
    """docs/guides/claude-code-codex.md's rounds: compact ``parts[0]`` with a state, put the output in the
    input's place, append the next part (chained on the compacted log's tip), compact again, ...; each call
    as a new process. Gives each call's result and the routes it took."""
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    path = work / "t.jsonl"
    got, taken = [], []
    for i, part in enumerate(parts):
        log = path.read_bytes() if i else b""
        path.write_bytes(log + (_reparent(log, part) if i else part))
        if cold:
            Path(f"{path}.ctxstate.json.counts").unlink(missing_ok=True)
        _forget()
        _TAKEN.clear()
        r = one_call(path, work, kw, hold)
        got.append(r)
        taken.append(list(_TAKEN))
        if r[0] not in ("error", "CRASH") and r[3]:  # compacted: the output replaces the session file
            path.write_bytes((work / "out.jsonl").read_bytes())
    return got, taken


#: how many calls after the first took each route (streamed side), and the LLM requests sent, for the summary
RECIPE_ROUTES: dict[str, int] = {}


def check_recipe(case: Case, kw: dict[str, Any], work: Path, rng: random.Random) -> list[Finding]:
    """The recipe's rounds on both routes: the streamed route and the held one with its count cache give
    what the held route from scratch gives (the count cache removed before each call)."""
    if not kw.get("use_state", True):
        return []
    lines = case.data.splitlines(keepends=True)
    if len(lines) < 4:
        return []
    if kw["strategy"] != "threshold" and rng.random() < 0.5:  # (only the threshold compacts a log streamed)
        kw = {k: v for k, v in kw.items() if k not in ("invocation_threshold", "overlap")} | {
            "strategy": "threshold"}
    cuts = sorted(rng.sample(range(1, len(lines)), min(len(lines) - 1, rng.randint(1, 3))))
    parts = [b"".join(lines[a:b]) for a, b in zip([0, *cuts], [*cuts, len(lines)], strict=True)]
    if rng.random() < 0.4:  # then what the client writes after resuming (the suite's generators)
        parts += _client_lines(case, rng)
    _spy_routes()
    cold, _ = recipe(parts, work / "W", kw, True, cold=True)
    found = []
    for hold in (True, False):
        warm, taken = recipe(parts, work / "W", kw, hold)
        if not hold:
            for t in taken[1:]:
                key = "/".join(sorted(set(t))) or "none"
                RECIPE_ROUTES[key] = RECIPE_ROUTES.get(key, 0) + 1
        for i, (a, b) in enumerate(zip(cold, warm, strict=True)):
            if b[0] == "CRASH":
                found.append(Finding("crash", case.number, case.seed_file, case.mutations,
                                     {**kw, "recipe": cuts, "hold": hold},
                                     f"recipe call {i + 1}: {b[1]}: {b[2]}", extra={"traceback": b[3]}))
                break
            if a != b:
                found.append(Finding("recipe", case.number, case.seed_file, case.mutations,
                                     {**kw, "recipe": cuts, "hold": hold, "routes": taken[i]},
                                     f"call {i + 1} (cold held / {'held' if hold else 'streamed'}): "
                                     f"{_diff(a, b)}"))
                break
    return found


def check_llm(case: Case, kw: dict[str, Any], work: Path, rng: random.Random) -> list[Finding]:
    """The recipe's rounds (or one call on the whole file) with ``--summarizer openai/anthropic`` against
    tests/providers.py's loopback server answering with notes of each prompt (llm14): both routes send the
    same requests, byte for byte, and give the same results."""
    sys.path.insert(0, str(REPO / "tests" / "summarizers"))
    from providers import ProviderServer
    from test_llm_streamed import _echo

    lines = case.data.splitlines(keepends=True)
    cuts = sorted(rng.sample(range(1, len(lines)), min(len(lines) - 1, rng.randint(1, 2)))) \
        if kw.get("use_state", True) and len(lines) >= 4 and rng.random() < 0.6 else []
    parts = [b"".join(lines[a:b]) for a, b in zip([0, *cuts], [*cuts, len(lines)], strict=True)]
    provider = rng.choice(["openai", "anthropic"])
    got = {}
    for hold in (True, False):
        with ProviderServer() as server:
            server.push(*[_echo(provider)] * 400)
            url = server.openai_url if provider == "openai" else server.url
            opts = {**kw, "summarizer": provider, "summary_model": "m", "base_url": url, "api_key": "k-test",
                    "max_retries": 0}
            results, _ = recipe(parts, work / "W", opts, hold)
            got[hold] = (json.loads(json.dumps(results, default=repr).replace(server.url, "URL")),
                         [(x.path, x.raw) for x in server.received])
    RECIPE_ROUTES["llm requests"] = RECIPE_ROUTES.get("llm requests", 0) + len(got[False][1])
    opts = {**kw, "summarizer": provider, "recipe": cuts}
    if got[True][1] != got[False][1]:
        a, b = got[True][1], got[False][1]
        at = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
        return [Finding("llm", case.number, case.seed_file, case.mutations, opts,
                        f"requests differ at {at + 1} ({len(a)} held / {len(b)} streamed)")]
    for i, (a, b) in enumerate(zip(got[True][0], got[False][0], strict=True)):
        if a != b:
            return [Finding("llm", case.number, case.seed_file, case.mutations, opts,
                            f"call {i + 1} (held / streamed): {_diff(tuple(a), tuple(b))}")]
    return []


# ---------------------------------------------------------------------------------------------------- CLI

def _argv(kw: dict[str, Any]) -> list[str]:
    argv = ["--window", str(kw["window"]), "--strategy", kw["strategy"]]
    for key, flag in (("prune", "--prune"), ("lenient", "--lenient"), ("keep_trailing_results",
                                                                        "--keep-trailing-results")):
        if kw.get(key):
            argv.append(flag)
    for key, flag in (("to", "--to"), ("exact", "--exact"), ("threshold", "--threshold"),
                      ("invocation_threshold", "--invocation-threshold"), ("overlap", "--overlap")):
        if key in kw:
            argv += [flag, str(kw[key])]
    return argv


def cli(argv: list[str], stdin: bytes | None = None) -> tuple[int | None, str, str]:
    from click.testing import CliRunner

    from ctxcompact.cli import main

    code: int | None = 0
    with CliRunner().isolation(input=stdin) as streams:
        try:
            with harness._alarm(60):
                main(argv)
        except SystemExit as exc:
            c = exc.code
            code = int(c) if isinstance(c, int) else (0 if c is None else 1)
        except harness.FuzzTimeout:
            code = None
        out = streams[0].getvalue().decode("utf-8", "replace")
        err = streams[1].getvalue().decode("utf-8", "replace") if streams[1] is not None else ""
    return code, out, err


def snapshot(folder: Path) -> dict[str, tuple[int, bytes]]:
    return {str(p.relative_to(folder)): (p.lstat().st_mtime_ns, p.read_bytes() if p.is_file() else b"")
            for p in sorted(folder.rglob("*"))}


def _judge(code: int | None, err: str) -> str | None:
    if code is None:
        return "timeout"
    if "Traceback (most recent call last)" in err or "internal error" in err:
        return f"traceback/internal error: {err.strip().splitlines()[-1][:200]}"
    if code not in DOCUMENTED:
        return f"undocumented exit code {code}: {err.strip()[:200]}"
    # (a whole-file JSON value is named by its span: "one JSON object over N lines",
    # tests/test_reader_whole_json.py)
    if code == 1 and not re.search(r"\blines? \d+|over \d+ lines", err):
        return f"exit 1 without a line: {err.strip()[:300]}"
    return None


def check_cli(case: Case, kw: dict[str, Any], work: Path) -> list[Finding]:
    found: list[Finding] = []

    def add(what: str, **extra: Any) -> None:
        found.append(Finding("cli", case.number, case.seed_file, case.mutations, kw, what, extra=extra))

    opts = _argv(kw)
    got = {}
    for route in ("file", "stdin"):
        folder = work / "W"  # the same path for both (a trimmed result names the input)
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        src = folder / "t.jsonl"
        src.write_bytes(case.data)
        (folder / "bystander.txt").write_bytes(b"x")
        state = ["--no-state"] if not kw.get("use_state", True) else (
            ["--state", str(folder / "s.json")] if route == "stdin" else [])
        before = snapshot(folder)
        argv = ["run", str(src) if route == "file" else "-", *opts, *state, "-o", str(folder / "o.jsonl"),
                "--json"]
        code, out, err = cli(argv, case.data if route == "stdin" else None)
        bad = _judge(code, err)
        if bad:
            add(f"{route}: {bad}", argv=argv)
        after = snapshot(folder)
        allowed = {"o.jsonl", "s.json", "t.jsonl.ctxstate.json", "t.jsonl.ctxstate.json.counts",
                   "s.json.counts"}
        changed = sorted(k for k in {*before, *after} if before.get(k) != after.get(k) and k not in allowed)
        odd = [k for k in changed if not k.endswith(".lock")]  # (a lock beside the state is documented?)
        if odd:
            add(f"{route}: files changed besides the output and state: {odd}", argv=argv)
        if code not in (0, 5) and ("o.jsonl" in after or any(k.endswith("ctxstate.json") or k == "s.json"
                                                             for k in after if k not in before)):
            add(f"{route}: exit {code} but something was written: {sorted(set(after) - set(before))}",
                argv=argv)
        report = None
        if code in (0, 5):
            try:
                report = json.loads(out)
            except ValueError:
                add(f"{route}: --json printed no JSON: {out[:200]!r}", argv=argv)
        written = folder / "o.jsonl"
        out_bytes = _norm(written.read_bytes(), folder) if written.exists() else None
        state_file = folder / ("s.json" if route == "stdin" else "t.jsonl.ctxstate.json")
        st = comparable_state(state_file, folder)
        if isinstance(st, dict):
            st.pop("source", None)
        got[route] = (code, out_bytes, st, _strip_report(report, folder),
                      re.sub(r"(/\S*)?(t\.jsonl|-|<stdin>|stdin)", "IN", err.replace(str(folder), "W")))
    f, s = got["file"], got["stdin"]
    if f[0] == s[0] and f[1] is not None and b"the full text is in W/t.jsonl line" in f[1]:
        # a trimmed result's marker names the file, stdin's "the transcript" (strategies/tail.py)
        return found
    if f[:2] != s[:2]:
        add(f"file vs stdin: exit {f[0]} / {s[0]}; output {'same' if f[1] == s[1] else 'differs'}; "
            f"stderr {f[4][:200]!r} / {s[4][:200]!r}")
    elif f[3] != s[3]:
        add(f"file vs stdin --json report differs: {_first_diff(f[3], s[3])}")
    return found


def _strip_report(report: Any, folder: Path) -> Any:
    if not isinstance(report, dict):
        return report
    text = json.dumps(report).replace(str(folder), "W")
    r = json.loads(text)
    for k in ("state", "state_path", "input", "source", "output", "seconds", "duration_s"):
        r.pop(k, None)
    if isinstance(r.get("estimate"), dict):
        r["estimate"].pop("state", None)  # the state's path: beside the file, or --state for stdin
    return r


def _first_diff(a: Any, b: Any, path: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted({*a, *b}):
            if a.get(k) != b.get(k):
                return _first_diff(a.get(k), b.get(k), f"{path}.{k}")
    return f"{path}: {str(a)[:150]} / {str(b)[:150]}"


def check_files(case: Case, work: Path) -> list[Finding]:
    """-o on the input (by its name, by a link), -o a link to a file outside."""
    found: list[Finding] = []
    folder = work / "files"
    if folder.exists():
        shutil.rmtree(folder)
    outside = work / "outside"
    outside.mkdir(parents=True, exist_ok=True)
    folder.mkdir(parents=True)
    src = folder / "t.jsonl"
    src.write_bytes(case.data)
    (folder / "link.jsonl").symlink_to(src)
    target = outside / "precious.txt"
    target.write_bytes(b"keep me")
    (folder / "out-link.jsonl").symlink_to(target)
    for out, name in ((src, "-o the input"), (folder / "link.jsonl", "-o a link to the input"),
                      (folder / "out-link.jsonl", "-o a link outside")):
        before, tb = snapshot(folder), target.read_bytes()
        argv = ["run", str(src), "--window", "3000", "--no-state", "-o", str(out)]
        code, _, err = cli(argv)
        bad = _judge(code, err)
        after = snapshot(folder)
        if bad:
            found.append(Finding("files", case.number, case.seed_file, case.mutations, {}, f"{name}: {bad}"))
        # -o a link: written through it (atomic.write_atomic: the link stays, its target is replaced)
        through = out == folder / "out-link.jsonl"
        if target.read_bytes() != tb and not (through and code in (0, 5)):
            found.append(Finding("files", case.number, case.seed_file, case.mutations, {},
                                 f"{name}: the file outside the link was written (exit {code})"))
        if through and code in (0, 5) and (not out.is_symlink() or sorted(p.name for p in outside.iterdir())
                                           != ["precious.txt"]):
            found.append(Finding("files", case.number, case.seed_file, case.mutations, {},
                                 f"{name}: the link replaced, or something left beside its target"))
        if out != folder / "out-link.jsonl":
            if code != 2 or after != before:
                found.append(Finding("files", case.number, case.seed_file, case.mutations, {},
                                     f"{name}: exit {code}, changed "
                                     f"{sorted(k for k in after if after[k] != before.get(k))}"
                                     f": {err.strip()[:200]}"))
        else:
            changed = sorted(k for k in {*before, *after} if before.get(k) != after.get(k))
            if code in (0, 5) and changed not in ([], ["out-link.jsonl"]):
                found.append(Finding("files", case.number, case.seed_file, case.mutations, {},
                                     f"{name}: changed {changed}"))
            target.write_bytes(b"keep me")
    return found


def run_case(args: tuple[int, int, list[str]]) -> tuple[list[Finding], dict[str, int]]:
    number, seed, only = args
    seeds = _SEEDS
    RECIPE_ROUTES.clear()
    if _PLAIN:  # the seed as it is: the options and the recipe's cuts alone
        name, data = random.Random(f"routes:{seed}:{number}").choice(seeds)
        case = Case(number, name, [], data)
    else:
        case = make_case(seeds, seed, number)
    rng = random.Random(f"opts:{seed}:{number}")
    work = Path(tempfile.mkdtemp(prefix=f"fr{number}-"))
    found: list[Finding] = []
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            for kw in options_for(rng, case.data):
                try:
                    with harness._alarm(180):
                        if "routes" in only:
                            found += check_routes(case, kw, work, rng)
                        if "recipe" in only:
                            found += check_recipe(case, kw, work, rng)
                        if "llm" in only and rng.random() < 0.5:
                            found += check_llm(case, kw, work, rng)
                        if "cli" in only and rng.random() < 0.5:
                            found += check_cli(case, kw, work)
                except harness.FuzzTimeout:
                    found.append(Finding("timeout", case.number, case.seed_file, case.mutations, kw,
                                         "timeout"))
            if "files" in only and number % 5 == 0:
                found += check_files(case, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for f in found:
        f.data = case.data
    return found, dict(RECIPE_ROUTES)


_SEEDS: list[tuple[str, bytes]] = []
_PLAIN = False


def main() -> int:
    global _SEEDS, _PLAIN
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mutants", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", action="append", choices=["routes", "recipe", "llm", "cli", "files"])
    ap.add_argument("--logs", action="append", metavar="TEXT",
                    help="only the seed logs whose path holds TEXT (e.g. claude-code, codex)")
    ap.add_argument("--save", metavar="DIR", help="keep each finding's input and a note")
    ap.add_argument("--max-lines", type=int, default=LIMITS.max_lines,
                    help="the seed logs cut to this many lines (0: whole; the recipe's later compactions "
                         "need logs longer than the default)")
    ap.add_argument("--plain", action="store_true", help="the seed logs as they are, no mutation")
    a = ap.parse_args()
    _PLAIN = a.plain
    _SEEDS = [s for s in harness.load_seeds(dataclasses.replace(LIMITS, max_lines=a.max_lines or None))
              if not a.logs or any(t in s[0] for t in a.logs)]
    only = a.only or ["routes", "recipe", "cli", "files"]
    t0 = time.monotonic()
    todo = [(n, a.seed, only) for n in range(a.start, a.start + a.mutants)]
    findings: list[Finding] = []
    routes: dict[str, int] = {}  # the recipe's later calls on the streamed route, by the routes they took
    done = 0
    with multiprocessing.get_context("fork").Pool(a.jobs, maxtasksperchild=20) as pool:
        for got, took in pool.imap_unordered(run_case, todo):
            done += 1
            for k, n in took.items():
                routes[k] = routes.get(k, 0) + n
            for f in got:
                print(f"#{f.case} {f.seed_file} {f.mutations} {f.options}\n    {f.check}: {f.what}",
                      flush=True)
                if f.extra.get("traceback"):
                    print("    " + f.extra["traceback"].replace("\n", "\n    "), flush=True)
            findings += got
            print(f"\r{done}/{a.mutants} cases, {len(findings)} findings", end="", file=sys.stderr,
                  flush=True)
    print(file=sys.stderr)
    kinds: dict[str, int] = {}
    for f in findings:
        kinds[f.key()] = kinds.get(f.key(), 0) + 1
    print(f"{a.mutants} cases in {time.monotonic() - t0:.0f} s, {len(findings)} findings")
    if routes:
        print(f"recipe's later calls on the streamed route, by the routes taken: {routes}")
    for k, n in sorted(kinds.items(), key=lambda kv: -kv[1]):
        print(f"{n:5d}  {k}")
    if a.save:
        out = Path(a.save)
        out.mkdir(parents=True, exist_ok=True)
        for f in findings:
            (out / f"case{f.case}.jsonl").write_bytes(f.data)
            with (out / "findings.jsonl").open("a") as fh:
                fh.write(json.dumps({"case": f.case, "seed": a.seed, "check": f.check, "what": f.what,
                                     "options": f.options, "seed_file": f.seed_file,
                                     "mutations": f.mutations, **{k: v for k, v in f.extra.items()
                                                                  if isinstance(v, (str, list))}}) + "\n")
    return 1 if findings else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""What a hook's usual call loads: `run` below the threshold imports none of the heavy modules (a behaviour
test of the lazy imports, not a timing: docs/measurements/performance.md#a-hooks-call)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

# Never on a hook's call below the threshold: the schema checker (only for a line that does not conform),
# tiktoken (small inputs are counted without it), the regex module (tokens/bpe.py splits with re), the SDKs,
# the message-list API's asyncio, the process pool, the evaluation, the summarizers and the facts a summary
# is made of (only a compaction needs them); nor the strategy (its registry entry says whether it streams);
# nor filelock and the logging it imports (the state's lock is a flock where the system has one), nor the
# other commands' definitions (cli/tools.py, cli/serve.py); nor the billed usage's reader (only calibrate
# and the message-list API read a usage object); nor are the injected elements' tags compiled (only what a
# person typed is read for them) nor the long-piece check (no text over 4,096 characters here).
HEAVY = ("jsonschema", "tiktoken", "regex", "anthropic", "openai", "asyncio", "concurrent.futures",
         "ctxcompact.strategies.threshold", "ctxcompact.evaluate", "ctxcompact.messages", "ctxcompact.batch",
         "ctxcompact.recall", "ctxcompact.summarizers.fallback", "ctxcompact.summarizers.extractive",
         "ctxcompact.facts.gather", "ctxcompact.facts.timeline", "ctxcompact.facts.outcomes",
         "ctxcompact.facts.files", "filelock", "logging", "ctxcompact.cli.tools", "ctxcompact.cli.serve",
         "ctxcompact.tokens.usage", "compiled:injected", "compiled:long_piece",
         # nor what only a compaction writes into a state (the summary, the history entry, the counts)
         "ctxcompact.state.compacted",
         # nor `clean`'s whole-file read and its result class (api names them on first use)
         "ctxcompact.clean_file")

# Nor, on a hook's next call (a state, the format known), what only a compaction, a strategy's own figures
# or another format need: the conversation reader and the facts it reads, masking, the summarizers' types,
# the other formats' readers; nor a strategy whose section of the state is empty (sliding-window's events);
# nor statistics (only a log with billed usage fits a calibration line); nor tempfile with shutil, random and
# the compression modules, nor the stdlib's secrets (atomic.py names its own temporary files; a first call
# with no rank table in the cache may load them to build it); nor are the credential patterns compiled (only
# a message to show is scrubbed).
LIGHT_WRITES = ("tempfile", "shutil", "random", "secrets", "bz2", "lzma", "compiled:scrub")
# Nor, on any call whose context passes through on the streamed route, what only a strategy applied or
# described needs (strategies.base's inputs and outcomes: the held route, estimate, a compaction), nor the
# validator's rules (the cleaner asks validate.last_turn only for a tree layout's unanswered calls).
PASS_THROUGH = ("ctxcompact.strategies.base", "ctxcompact.validate")
# Nor, on a run without a state (no covered prefix to read), the covered prefix's reader (errors.Uncovered
# is what the streamed read catches), nor the resume point (no count cache to keep one in, or to take one
# from: the reading marks no part).
NO_STATE = ("ctxcompact.covered", "ctxcompact.resume_point")
# Nor, on a log that records no provider usage (and a state with no fit), what only a measurement makes: the
# bill recorded (UsagePoint) and the line fitted through bills (Affine), tokens/measured.py.
UNMEASURED = ("ctxcompact.tokens.measured",)
# Nor, on any call whose input is streamed (never held in memory), the whole-file JSON reader (document.py).
STREAMED = ("ctxcompact.document",)
NEXT_CALL = ("ctxcompact.strategies.conversation", "ctxcompact.strategies.mask", "ctxcompact.strategies.tail",
             "ctxcompact.strategies.sliding_window", "ctxcompact.summarizers", "ctxcompact.facts.handoff",
             "ctxcompact.facts.todos", "ctxcompact.formats.anthropic", "ctxcompact.formats.genai",
             "ctxcompact.formats.claude_code", "ctxcompact.formats.codex", "statistics", *LIGHT_WRITES,
             *PASS_THROUGH)
# After a compaction (the state holds a summary), the next call below the threshold loads no strategy that
# keeps nothing in this state.
AFTER_COMPACTION = ("ctxcompact.strategies.sliding_window", "ctxcompact.strategies.events",
                    "ctxcompact.strategies.invocations", "ctxcompact.formats.anthropic",
                    "ctxcompact.formats.codex", *LIGHT_WRITES, *PASS_THROUGH)

PROBE = """
import json, runpy, sys
sys.argv = ["ctxcompact", *sys.argv[1:]]
code = 0
try:
    runpy.run_module("ctxcompact", run_name="__main__", alter_sys=True)
except SystemExit as exc:
    code = exc.code
# what is compiled on first use only: the credential patterns (a message to scrub), the injected elements'
# tags (a person's text read), the long-piece check (a text longer than the longest piece counted)
def _compiled(module, name):
    mod = sys.modules.get(module)
    return getattr(mod, name).cache_info().currsize if mod is not None else 0
lazy = {"scrub": _compiled("ctxcompact.secrets", "_patterns"),
        "injected": _compiled("ctxcompact.facts.text", "_injected"),
        "long_piece": _compiled("ctxcompact.tokens.exact", "_runs")}
got = {"code": code, "modules": sorted(sys.modules), "lazy": lazy}
sys.stderr.write("\\nMODULES " + json.dumps(got) + "\\n")
"""


def _session(path: Path, turns: int, end_on_result: bool) -> None:
    lines = [{"role": "system", "content": "You are a coding agent."}]
    for i in range(turns):
        lines += [
            {"role": "user", "content": f"Step {i}: read the file and tell me what it does. Ünïcødé ✓"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": f"call_{i}", "type": "function",
                 "function": {"name": "read_file", "arguments": json.dumps({"path": f"src/m{i}.py"})}}]},
            {"role": "tool", "tool_call_id": f"call_{i}", "content": "def f():\n    return 1\n" * 20},
            {"role": "assistant", "content": f"It defines f, step {i}."},
        ]
    if end_on_result:  # the cleaner must append a reply: not the streaming route
        lines = lines[:-1]
    path.write_bytes(b"".join(orjson.dumps(m) + b"\n" for m in lines))


def _loaded(args: list[str]) -> tuple[int, set[str]]:
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=120,
                          check=False)
    marker = proc.stderr.rsplit("\nMODULES ", 1)
    assert len(marker) == 2, proc.stderr
    got = json.loads(marker[1])
    # what was compiled on first use is named "compiled:<what>" among the modules
    return got["code"], set(got["modules"]) | {f"compiled:{k}" for k, v in got["lazy"].items() if v}


def _among(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules for h in names if m == h or m.startswith(h + "."))


def _append(src: Path, messages: list[dict]) -> None:
    with src.open("ab") as f:
        f.write(b"".join(orjson.dumps(m) + b"\n" for m in messages))


def _two_calls(tmp_path: Path, window: int, appended: list[dict]) -> tuple[set[str], set[str]]:
    """The modules a ``run`` with a state loads on a 40-message session, then on it with ``appended``."""
    src = tmp_path / "session.jsonl"
    _session(src, 40, False)
    args = ["run", str(src), "--window", str(window), "-o", str(tmp_path / "out.jsonl"),
            "--state", str(tmp_path / "s.json")]
    code, first = _loaded(args)
    assert code in (0, None)
    _append(src, appended)
    code, modules = _loaded(args)
    assert code in (0, None)
    return first, modules


@pytest.mark.parametrize("end_on_result", [False, True], ids=["usual", "ends-on-a-result"])
@pytest.mark.parametrize("state", [False, True], ids=["no-state", "state"])
def test_run_below_the_threshold_imports_nothing_heavy(tmp_path: Path, end_on_result: bool,
                                                       state: bool) -> None:
    src = tmp_path / "session.jsonl"
    _session(src, 40, end_on_result)
    out = tmp_path / "out.jsonl"
    args = ["run", str(src), "--window", "1000000", "-o", str(out)]
    args += ["--state", str(tmp_path / "s.json")] if state else ["--no-state"]
    code, modules = _loaded(args)
    assert code in (0, None)
    assert out.stat().st_size > 0
    assert _among(modules, HEAVY + PASS_THROUGH + UNMEASURED + STREAMED + (() if state else NO_STATE)) == []
    # (a call with a state keeps a resume point: the check above can see the module it would load)
    assert ("ctxcompact.resume_point" in modules) is state
    if state:  # the second call, on the grown session, too
        _append(src, [{"role": "user", "content": "And the next one?"}])
        code, modules = _loaded(args)
        assert code in (0, None)
        assert _among(modules, HEAVY + PASS_THROUGH + UNMEASURED + STREAMED) == []


def test_the_probe_sees_a_measurement(tmp_path: Path) -> None:
    """A log that records what the provider billed loads what a measurement makes (the check above can see
    it), below the threshold and without a state too."""
    src = tmp_path / "session.jsonl"
    _session(src, 4, False)
    _append(src, [{"role": "assistant", "content": "Done.", "usage": {"prompt_tokens": 900}}])
    code, modules = _loaded(["run", str(src), "--window", "1000000", "--no-state", "-o",
                             str(tmp_path / "out.jsonl")])
    assert code in (0, None)
    assert "ctxcompact.tokens.measured" in modules


def test_the_probe_sees_a_whole_file_document(tmp_path: Path) -> None:
    """A transcript stored as one JSON document is held and split into its records: the whole-file reader is
    loaded then (the check above can see it)."""
    src = tmp_path / "session.json"
    messages = [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi."}]
    src.write_text(json.dumps(messages, indent=2))
    code, modules = _loaded(["run", str(src), "--window", "1000000", "--no-state", "-o",
                             str(tmp_path / "out.jsonl")])
    assert code in (0, None)
    assert "ctxcompact.document" in modules


def test_the_next_call_loads_only_what_it_uses(tmp_path: Path) -> None:
    first, modules = _two_calls(tmp_path, 1_000_000, [
        {"role": "user" if i % 2 else "assistant", "content": f"Next {i}"} for i in range(5)])
    assert "ctxcompact.formats.codex" in first  # the first call detects the format: every reader asked
    assert _among(modules, HEAVY + NEXT_CALL) == []
    assert "ctxcompact.formats.openai" in modules and "ctxcompact.strategies" in modules


def test_the_call_after_a_compaction_loads_no_strategy_it_does_not_apply(tmp_path: Path) -> None:
    first, modules = _two_calls(tmp_path, 4000, [{"role": "user", "content": "And the next one?"}])
    assert "ctxcompact.summarizers.extractive" in first
    state = orjson.loads((tmp_path / "s.json").read_bytes())
    assert state["watermark"] > 0 and len(state["compactions"]) == 1  # compacted once, then passed through
    assert _among(modules, AFTER_COMPACTION) == []
    assert "ctxcompact.state.compacted" in modules  # (the state holds a summary: the check above can see it)


def test_the_probe_sees_a_heavy_import(tmp_path: Path) -> None:
    """The check above can fail: a compacting run does load the summarizers, and applies its strategy."""
    src = tmp_path / "session.jsonl"
    _session(src, 40, False)
    out = str(tmp_path / "o.jsonl")
    code, modules = _loaded(["run", str(src), "--window", "2000", "--no-state", "-o", out])
    assert code in (0, None)
    assert "ctxcompact.summarizers.extractive" in modules and "ctxcompact.strategies.base" in modules


def test_the_probe_sees_a_compiled_pattern(tmp_path: Path) -> None:
    """An error's message is scrubbed: the credential patterns are compiled then."""
    code, modules = _loaded(["run", str(tmp_path / "missing.jsonl"), "--no-state"])
    assert code not in (0, None)
    assert "compiled:scrub" in modules


def test_the_probe_sees_the_injected_tags_compiled(tmp_path: Path) -> None:
    """A compaction reads what a person typed: the injected elements' tags are compiled when a request
    holds a `<`. (The long-piece check is compiled only on tiktoken's path: tests/tokens/test_long_pieces.py
    covers it.)"""
    src = tmp_path / "session.jsonl"
    _session(src, 40, False)
    _append(src, [{"role": "user", "content": "<system-reminder>x</system-reminder> Go on."}])
    out = str(tmp_path / "o.jsonl")
    code, modules = _loaded(["run", str(src), "--window", "2000", "--no-state", "-o", out])
    assert code in (0, None)
    assert "compiled:injected" in modules and "compiled:long_piece" not in modules


def test_api_names_resolve_lazily() -> None:
    """Every name api and facts export resolves (the lazy ones load their module on first use)."""
    from ctxcompact import api, facts

    for mod in (api, facts):
        for name in mod.__all__:
            assert getattr(mod, name) is not None, name
    with pytest.raises(AttributeError):
        api.no_such_name  # noqa: B018
    import ctxcompact.facts.timeline  # noqa: F401  (a submodule named like an exported function)

    assert callable(facts.timeline) and callable(api.evaluate)


def test_a_one_megabyte_record_below_the_threshold_is_counted_without_tiktoken(tmp_path: Path) -> None:
    """The pure counter's budget is work, not 400k characters: a 1 MB tool result of ordinary words (the
    bench's `huge` shape) costs about a character each, far less than building tiktoken's Encoding."""
    src = tmp_path / "session.jsonl"
    _session(src, 2, False)
    words = "read the file and run the tests then fix the error in the module " * 16_000
    with src.open("ab") as f:
        f.write(orjson.dumps({"role": "user", "content": words}) + b"\n")
    out = tmp_path / "out.jsonl"
    code, modules = _loaded(["run", str(src), "--window", "100000000", "--no-state", "-o", str(out)])
    assert code in (0, None) and len(words) > 1_000_000
    assert "tiktoken" not in modules and "ctxcompact.tokens.bpe" in modules


AGENT_LOGS = [Path(__file__).parents[1] / "data" / "codex" / "agtrace-codex-session.jsonl",
              Path(__file__).parents[1] / "data" / "claude-code" / "agtrace-claude-session.jsonl",
              Path(__file__).parents[2] / "samples" / "genai-session.jsonl"]


@pytest.mark.parametrize("log", AGENT_LOGS, ids=["codex", "claude-code", "genai"])
def test_run_of_an_agent_log_below_the_threshold_imports_nothing_heavy(tmp_path: Path, log: Path) -> None:
    """An agent's own log (Codex: read record by record and resumed; Claude Code: held), first call and the
    call after a few more lines."""
    lines = log.read_bytes().splitlines(keepends=True)
    src, out = tmp_path / "session.jsonl", tmp_path / "out.jsonl"
    args = ["run", str(src), "--window", "1000000", "-o", str(out), "--state", str(tmp_path / "s.json")]
    for end in (len(lines) - 3, len(lines)):
        src.write_bytes(b"".join(lines[:end]))
        code, modules = _loaded(args)
        assert code in (0, None) and out.stat().st_size > 0
        # (a Claude Code log is read held: the held route asks its strategy to apply, which loads it)
        held = log.parent.name == "claude-code"
        heavy = [h for h in HEAVY if not (held and h == "ctxcompact.strategies.threshold")]
        assert sorted(m for m in modules for h in heavy if m == h or m.startswith(h + ".")) == []

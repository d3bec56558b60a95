"""Outcomes of tool calls: which results are errors, the telling line of an error, whether a later call
resolved it, and the shell commands run with their outcome."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..model import Origin, Record, Role, ToolCall, ToolResult
from .calls import call_index, command_of, is_content_tool, is_shell_call
from .text import shorten


@dataclass(slots=True)
class CommandRun:
    command: str
    tool: str
    ok: bool | None  # None: no result seen
    index: int



def commands_run(records: Sequence[Record], failed: FailureCheck | None = None) -> list[CommandRun]:
    """Shell commands the agent ran, in order, each with whether its result looked successful."""
    failed = failed or result_is_error
    outcome: dict[str, bool] = {}
    for rec in records:
        if rec.message is None:
            continue
        for res in rec.message.tool_results():
            if not res.synthetic:
                outcome[res.call_id] = not failed(res, True)
    out: list[CommandRun] = []
    for i, rec in enumerate(records):
        if rec.message is None:
            continue
        for call in rec.message.tool_calls():
            cmd = command_of(call)
            if cmd is not None:
                out.append(CommandRun(cmd, call.name, outcome.get(call.id), i))
    return out


_ERROR_LINE = re.compile(
    r"Traceback \(most recent call last\)"
    r"|^[^\S\n]*(?:[\w.]*(?:Error|Exception)|error|ERROR|fatal|FATAL)(?:\[\w+\])?:"  # not \s: linear
    r"|\bFAILED\b|\b[1-9]\d* (?:failed|errors?)\b|\bexit(?:ed with)? (?:code|status):? ?[1-9]\d*\b"
    r"|\bExit code:? [1-9]\d*\b|command not found|No such file or directory|npm ERR!|\bpanicked at\b",
    re.M,
)
_EXC_LINE = re.compile(r"^\s*([\w.]*(?:Error|Exception|Exit|Interrupt|Failure)\b.*)$")



# Substrings without which _ERROR_LINE cannot match: a fast test that skips the regex for most outputs.
_ERROR_HINTS = ("Traceback", "rror", "ERROR", "xception", "FAILED", "failed", "xit", "not found",
                "No such file", "ERR!", "panicked", "fatal", "FATAL")

FailureCheck = Callable[[ToolResult, bool], bool]


def result_is_error(result: ToolResult, shell_like: bool) -> bool:
    """A failed result: marked ``is_error``, or (for commands and non-reading tools) output with a
    traceback, ``Error:``, ``FAILED``, ``N failed`` or a non-zero exit code."""
    if result.is_error:
        return True
    if result.synthetic or not shell_like:
        return False
    text = result.text()[:200_000]
    return any(h in text for h in _ERROR_HINTS) and bool(_ERROR_LINE.search(text))


def failure_checker() -> FailureCheck:
    """:func:`result_is_error` remembering its answers, for several passes over the same live records
    (keyed by object identity, so use it only while those records are alive)."""
    memo: dict[tuple[int, bool], bool] = {}

    def check(result: ToolResult, shell_like: bool) -> bool:
        key = (id(result), shell_like)
        if key not in memo:
            memo[key] = result_is_error(result, shell_like)
        return memo[key]

    return check


_PYTEST_E = re.compile(r"^(?:E\s+)?([\w.]*(?:Error|Exception|Failed)\b.*|assert\b.*)$")
_EXIT_ONLY = re.compile(r"^\s*(?:exit(?:ed with)? (?:code|status)|exit code)\b", re.I)
_COMPILER = re.compile(r"^\S+:\d+(?::\d+)?:\s*(?:error|fatal error|[A-Z]{1,4}\d{2,5})\b")


def error_line(text: str, limit: int = 240) -> str:
    """The most telling line of an error output, cut to ``limit`` characters. In order of preference: the
    exception line of a traceback, pytest's ``E   SomeError: …`` or ``assert …`` line, a compiler/linter line
    (``path:12:5: error …``, ``path:1:1: E501 …``), a ``FAILED`` summary line, any line that looks like an
    error, the first non-blank line."""
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    chosen = ""
    if "Traceback (most recent call last)" in text:
        for ln in reversed(lines):
            m = _EXC_LINE.match(ln)
            if m:
                chosen = m.group(1)
                break
    for pattern, group in ((_PYTEST_E, 1), (_COMPILER, 0), (re.compile(r"^FAILED\s.*$"), 0)):
        if chosen:
            break
        for ln in lines:
            m = pattern.match(ln.strip() if group == 0 else ln)
            if m:
                chosen = m.group(group) if group else ln.strip()
                break
    if not chosen:
        # "Exit code: 1" says least: any other error-looking line first
        candidates = [ln.strip() for ln in lines if _ERROR_LINE.search(ln) and "Traceback" not in ln]
        telling = [c for c in candidates if not _EXIT_ONLY.match(c)]
        chosen = (telling or candidates or [""])[0]
    if not chosen and lines:
        chosen = lines[0].strip()
    return shorten(chosen, limit)


@dataclass(slots=True)
class ErrorSeen:
    tool: str
    command: str | None
    text: str  # the telling line
    key: str  # what a later success must match to resolve it: the command, else tool + arguments
    index: int
    resolved: bool = False
    resolved_by: str | None = None  # "rerun" or "assistant"


_RESOLVED_WORDS = re.compile(
    r"\b(?:fixed|resolved|now pass(?:es)?|all (?:\d+ )?tests pass(?:ed)?|tests? (?:now )?pass(?:es|ed)?"
    r"|passing|"
    r"works now|now works|is working|succeeded|green)\b",
    re.I,
)
_NEGATION = re.compile(
    r"\b(?:not|no longer|still|yet|unable|cannot|can't|couldn't|won't|isn't|fail\w*)\b|n't\b", re.I
)


def claims_resolution(text: str) -> bool:
    """An assistant sentence says the problem is fixed (and does not negate it)."""
    for sentence in re.split(r"(?<=[.!?\n])\s+", text):
        if _RESOLVED_WORDS.search(sentence) and not _NEGATION.search(sentence):
            return True
    return False


def call_key(call: ToolCall | None, name: str) -> str:
    if call is None:
        return f"tool:{name}"
    cmd = command_of(call)
    if cmd is not None:
        return "cmd:" + " ".join(cmd.split())
    return f"tool:{call.name}:{call.arguments.strip()}"


def errors_seen(records: Sequence[Record], failed: FailureCheck | None = None) -> list[ErrorSeen]:
    """Failed tool results in order, each marked resolved when a later result of the same command (or the
    same tool with the same arguments) succeeded, or a later assistant message says it is fixed."""
    failed = failed or result_is_error
    calls = call_index(records)
    errors: list[ErrorSeen] = []
    for i, rec in enumerate(records):
        msg = rec.message
        if msg is None:
            continue
        if (msg.role is Role.ASSISTANT and rec.origin is Origin.INPUT and errors
                and claims_resolution(msg.text())):
            for e in errors:
                if not e.resolved:
                    e.resolved, e.resolved_by = True, "assistant"
        for res in msg.tool_results():
            if res.synthetic:
                continue
            call = calls.get(res.call_id)
            name = call.name if call else (res.name or "tool")
            shell_like = call is not None and (is_shell_call(call) or not is_content_tool(call.name))
            key = call_key(call, name)
            if failed(res, shell_like):
                errors.append(ErrorSeen(name, command_of(call) if call else None, error_line(res.text()) or
                                        "(error with no output)", key, i))
            else:
                for e in errors:
                    if not e.resolved and e.key == key:
                        e.resolved, e.resolved_by = True, "rerun"
    return errors


def resolution_evidence(records: Sequence[Record],
                        failed: FailureCheck | None = None) -> tuple[set[str], bool]:
    """What in ``records`` resolves errors seen before them: the keys (:func:`call_key`) of successful
    results, and whether an assistant message says a problem is fixed. Used to carry errors across
    compactions."""
    failed = failed or result_is_error
    calls = call_index(records)
    keys: set[str] = set()
    claimed = False
    for rec in records:
        msg = rec.message
        if msg is None:
            continue
        if msg.role is Role.ASSISTANT and rec.origin is Origin.INPUT and claims_resolution(msg.text()):
            claimed = True
        for res in msg.tool_results():
            call = calls.get(res.call_id)
            if call is None or res.synthetic:
                continue
            shell_like = is_shell_call(call) or not is_content_tool(call.name)
            if not failed(res, shell_like):
                keys.add(call_key(call, call.name))
    return keys, claimed


# --------------------------------------------------------------------------------------------------------
# Timeline and last action


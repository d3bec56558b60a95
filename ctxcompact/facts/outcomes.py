"""Outcomes of tool calls: which results are errors, the telling line of an error, whether a later call
resolved it, and the shell commands run with their outcome."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

import orjson

from ..model import Record, Role, ToolCall, ToolResult
from .calls import (
    call_index,
    command_of,
    is_content_tool,
    is_shell_call,
    per_call,
    quoted_spans,
    writes_files,
)
from .files import paths_of_call
from .seen import Kind, Seen, scan
from .text import may_hold, shorten


@dataclass(slots=True)
class CommandRun:
    command: str
    tool: str
    ok: bool | None  # None: no result seen
    index: int  # its record's place in the records read
    at: int = -1  # its record's input position (``Record.index``)



def commands_run(records: Sequence[Record], failed: FailureCheck | None = None) -> list[CommandRun]:
    """Shell commands the agent ran, in order, each with whether its result looked successful."""
    return scan(CommandScan(call_index(records), failed), records)


class CommandScan:
    """:func:`commands_run` read record by record (``calls``: the tool calls by id, :func:`.calls.call_index`
    or one built as the records come); ``result()`` once every record is fed."""

    def __init__(self, calls: Mapping[str, ToolCall], failed: FailureCheck | None = None) -> None:
        self.calls, self.failed = calls, failed
        self.judge = judge(failed)
        self.outcome: dict[str, bool] = {}  # the last result of each call decides (as over the whole list)
        self.runs: list[tuple[CommandRun, str]] = []
        #: the calls of ``runs`` (facts.gather.FactFeed's ``bounded``: only their outcomes are kept)
        self.ids: set[str] | None = None

    @staticmethod
    def reads(kind: Kind) -> bool:
        return kind.results or kind.calls

    def feed(self, rec: Seen) -> None:
        if rec.results:
            ids = self.ids
            for res, _call, failed in rec.answers(self.calls, self.judge):
                if failed is not None and (ids is None or res.call_id in ids):
                    self.outcome[res.call_id] = not failed
        for call in rec.calls:
            cmd = command_of(call)
            if cmd is not None:
                self.runs.append((CommandRun(cmd, call.name, None, rec.n, rec.rec.index), call.id))
                if self.ids is not None:
                    self.ids.add(call.id)

    def keep_last(self, commands: int) -> None:
        """Keep the latest run of each of the last ``commands`` commands, and their outcomes: what
        ``store.merge`` keeps of them with no earlier facts (for runs in input order)."""
        latest: dict[str, tuple[CommandRun, str]] = {}
        for run, call_id in self.runs:
            latest.pop(run.command, None)
            latest[run.command] = (run, call_id)
        self.runs = list(latest.values())[-commands:]
        ids = {call_id for _, call_id in self.runs}
        self.outcome = {k: v for k, v in self.outcome.items() if k in ids}
        if self.ids is not None:
            self.ids = ids

    def result(self) -> list[CommandRun]:
        for run, call_id in self.runs:
            run.ok = self.outcome.get(call_id)
        return [run for run, _ in self.runs]


# Programs that only read or inspect (docs/concepts/summary.md#repeated-commands): a command made only of
# them (with no output redirection, no in-place edit, no deletion) changed nothing.
_READ_ONLY = frozenset({
    "cat", "head", "tail", "less", "more", "nl", "ls", "tree", "find", "grep", "egrep", "fgrep", "rg", "ag",
    "ack", "wc", "sed", "awk", "jq", "yq", "strings", "file", "stat", "pwd", "which", "type", "echo",
    "printf",
    "du", "df", "diff", "sort", "uniq", "cut", "tr", "basename", "dirname", "realpath", "readlink", "date",
    "whoami", "uname", "ps", "cd", "true", "column", "xxd", "od", "hexdump", "sha256sum", "md5sum", "env",
})
_READ_ONLY_GIT = frozenset({"status", "diff", "log", "show", "branch", "rev-parse", "ls-files", "grep",
                            "blame", "remote", "describe", "shortlog"})
_SEGMENTS = re.compile(r"\|\||&&|[|;\n]")
_WRITES = re.compile(r"(?:^|[^<>&\d])>{1,2}(?!&)|\s-i\b|\s--in-place\b|\s-delete\b|\s-exec\b|\s-execdir\b")


def is_inspection(command: str) -> bool:
    """A shell command that only reads or inspects: every part of it (split at ``|``, ``&&``, ``||``,
    ``;``) runs a program that reads (``cat``, ``sed -n``, ``rg``, ``git diff``…), with no output redirection
    (``>``), in-place edit (``sed -i``) or deletion (``find -delete``/``-exec``). Quoted text is not read as
    operators."""
    if not command.strip():
        return False
    spans = quoted_spans(command)
    bare = command
    for start, end in reversed(spans):
        bare = bare[:start] + "''" + bare[end:]
    if _WRITES.search(bare.replace("2>&1", " ").replace("2>/dev/null", " ").replace(">/dev/null", " ")):
        return False
    for part in _SEGMENTS.split(bare):
        words = [w for w in part.split() if "=" not in w or w.startswith("-")]
        if not words:
            continue
        prog = words[0].rsplit("/", 1)[-1]
        if prog == "git":
            sub = next((w for w in words[1:] if not w.startswith("-")), "")
            if sub not in _READ_ONLY_GIT:
                return False
        elif prog not in _READ_ONLY:
            return False
    return True


# The alternatives of _ERROR_LINE, each with substrings one of which any match of it holds: a text is searched
# only for the alternatives whose substrings it has (:func:`error_in`; on a coding agent's outputs 4x faster
# than the whole pattern, which tries its every branch at every line and word).
_ERROR_PARTS = (
    (("Traceback (most recent call last)",), r"Traceback \(most recent call last\)"),
    (("Error", "Exception", "error", "ERROR", "fatal", "FATAL"),
     r"^[^\S\n]*(?:[\w.]*(?:Error|Exception)|error|ERROR|fatal|FATAL)(?:\[\w+\])?:"),  # not \s: linear
    (("FAILED",), r"\bFAILED\b"),
    # (``\b[1-9]`` with the digit read first: a pattern that opens with a character class is searched for
    # that class in C, not tried at every position; the same matches, half the time on an agent's outputs)
    ((" failed", " error"), r"[1-9](?<!\w[1-9])\d* (?:failed|errors?)\b"),
    (("exit",), r"\bexit(?:ed with)? (?:code|status):? ?[1-9]\d*\b"),
    (("Exit code",), r"\bExit code:? [1-9]\d*\b"),
    (("command not found",), r"command not found"),
    (("No such file or directory",), r"No such file or directory"),
    (("npm ERR!",), r"npm ERR!"),
    (("panicked at",), r"\bpanicked at\b"),
    ((" failed:",), r"^[^\S\n]*[\w.-]+ failed:"),
)
_ERROR_LINE = re.compile("|".join(pattern for _, pattern in _ERROR_PARTS), re.M)
_ERROR_SCANS = tuple((hints, re.compile(pattern, re.M)) for hints, pattern in _ERROR_PARTS)
_EXC_LINE = re.compile(r"^\s*([\w.]*(?:Error|Exception|Exit|Interrupt|Failure)\b.*)$")


def error_in(text: str) -> bool:
    """``_ERROR_LINE.search(text)`` found a match: some alternative of it matches, searched only where its
    substrings are."""
    return any(any(h in text for h in hints) and rx.search(text) is not None for hints, rx in _ERROR_SCANS)


FailureCheck = Callable[[ToolResult, bool], bool]


def result_is_error(result: ToolResult, shell_like: bool) -> bool:
    """A failed result. The outcome the log records decides first (``ToolResult.succeeded``: an exit code,
    ``is_error``, an error field); only where it records none do the words decide, and only for commands and
    non-reading tools: a traceback, ``Error:``, ``FAILED``, ``N failed`` or a non-zero exit code in the
    output (docs/concepts/summary.md#errors-files-and-subagents-in-the-summary)."""
    if result.is_error or result.succeeded is False:
        return True
    if result.succeeded is not None or result.synthetic or not shell_like:
        return False
    text = result.text()[:200_000]
    return error_in(text)


# Search commands exit 1 when nothing matched (grep, rg, ag, ack: their documented exit status).
_SEARCH = re.compile(r"^\s*(?:rg|grep|egrep|fgrep|ag|ack|git\s+grep)\s")


def call_failed(call: ToolCall | None, result: ToolResult, failed: FailureCheck | None = None) -> bool:
    """Whether ``result``, the answer to ``call``, failed: :func:`result_is_error` (or ``failed``, its
    memo), the words read only for commands and tools that do not read content. A search command (grep,
    rg…) that failed with no output found nothing: an empty answer, not an error."""
    failed = failed or result_is_error
    shell_like = call is not None and (is_shell_call(call) or not is_content_tool(call.name))
    if not failed(result, shell_like):
        return False
    cmd = command_of(call) if call is not None else None
    return not (cmd and _SEARCH.match(cmd) and "|" not in cmd and not output_text(result).strip())


def judge(failed: FailureCheck | None = None) -> Callable[[ToolCall | None, ToolResult], bool]:
    """:func:`call_failed` with ``failed`` (what a scan gives ``Seen.answers``)."""
    return lambda call, result: call_failed(call, result, failed)


def failure_checker() -> FailureMemo:
    """:func:`result_is_error` remembering its answers, for several passes over the same live records
    (keyed by object identity, so use it only while those records are alive, or ``clear`` it)."""
    return FailureMemo()


class FailureMemo:
    """:func:`result_is_error` with its answers kept by the result's identity (:func:`failure_checker`)."""

    def __init__(self) -> None:
        self.memo: dict[tuple[int, bool], bool] = {}

    def __call__(self, result: ToolResult, shell_like: bool) -> bool:
        key = (id(result), shell_like)
        if key not in self.memo:
            self.memo[key] = result_is_error(result, shell_like)
        return self.memo[key]

    def clear(self) -> None:
        """Forget every answer: the results they were about may be gone, their identities reused."""
        self.memo.clear()


_PYTEST_E = re.compile(r"^(?:E\s+)?([\w.]*(?:Error|Exception|Failed)\b.*|assert\b.*)$")
_EXIT_ONLY = re.compile(r"^\s*(?:exit(?:ed with)? (?:code|status)|exit code)\b", re.I)
_COMPILER = re.compile(r"^\S+:\d+(?::\d+)?:\s*(?:error|fatal error|[A-Z]{1,4}\d{2,5})\b")


def _telling_index(lines: list[str], text: str) -> int:
    """The index of the most telling line of an error output (see :func:`error_line`), -1 for none."""
    if "Traceback (most recent call last)" in text:
        for i in range(len(lines) - 1, -1, -1):
            if _EXC_LINE.match(lines[i]):
                return i
    for pattern, stripped in ((_PYTEST_E, False), (_COMPILER, True), (re.compile(r"^FAILED\s.*$"), True)):
        for i, ln in enumerate(lines):
            if pattern.match(ln.strip() if stripped else ln):
                return i
    # "Exit code: 1" says least: any other error-looking line first
    candidates = [i for i, ln in enumerate(lines) if _ERROR_LINE.search(ln) and "Traceback" not in ln]
    telling = [i for i in candidates if not _EXIT_ONLY.match(lines[i].strip())]
    return (telling or candidates or [-1])[0]


# Lines that carry no meaning of their own: a wrapper tag, a tree or box drawing, a rule, a bare prompt.
_NOISE = re.compile(r"^\s*(?:</?[\w-]+>|[\W_]*|[│├└┌┐┘┬┴┼─═║].*)$")
_TAGS = re.compile(r"</?(?:tool_use_error|error|stderr|stdout)>")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# A line that goes on with the error before it: its cause, a note or hint, another exception.
_GOES_ON = re.compile(r"^\s*(?:caused by|note|help|hint|reason|details?|did you mean)\b"
                      r"|^[\w.]*(?:Error|Exception)\b:", re.I)
#: how the lines of a multi-line error are joined on the one line the summary gives it
ERROR_JOIN = " — "
MAX_ERROR_LINES = 3


def error_line(text: str, limit: int = 240, max_lines: int = MAX_ERROR_LINES) -> str:
    """The telling lines of an error output, cut to ``limit`` characters. The anchor, in order of
    preference: the exception line of a traceback, pytest's ``E   SomeError: …`` or ``assert …`` line, a
    compiler/linter line (``path:12:5: error …``, ``path:1:1: E501 …``), a ``FAILED`` summary line, any line
    that looks like an error. A multi-line error keeps its meaningful lines, not only one: the anchor and
    up to two lines that go on from it (after a line ending in ``:``, a ``Caused by``/``note``/``hint``
    line, a further exception), or, where no line looks like an error, the
    first three meaningful lines; joined by :data:`ERROR_JOIN`. Wrapper tags (``<tool_use_error>``), blank
    lines and tree drawings are never kept."""
    text = _ANSI.sub("", _TAGS.sub("", text))
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip() and not _NOISE.match(ln)]
    if not lines:
        return ""
    i = _telling_index(lines, text)
    if i < 0:
        kept = [ln.strip() for ln in lines[:max_lines]]
    else:
        first = lines[i]
        m = _EXC_LINE.match(first) if "Traceback (most recent call last)" in text else _PYTEST_E.match(first)
        kept = [(m.group(1) if m else first).strip()]
        for ln in lines[i + 1:i + max_lines]:
            body = ln[2:] if ln.startswith("E ") and lines[i].startswith("E ") else ln  # pytest's E lines
            if not (kept[-1].endswith(":") or _GOES_ON.match(body)):
                break
            kept.append(body.strip())
    joined = kept[0]
    for ln in kept[1:]:  # a line ending in ":" reads on into the next
        joined += (" " if joined.endswith(":") else ERROR_JOIN) + ln
    return shorten(joined, limit)


_WRAPPED = re.compile(r'^\{\s*"output"\s*:')
_RUNTIME_HEADER = re.compile(r"\A(?:[^\n]*\n){1,6}?Output:\n")


def output_text(result: ToolResult) -> str:
    """What the tool printed: the result's text without an agent's wrapper around it (Codex writes a
    command's output as ``{"output": …, "metadata": {"exit_code": …}}`` or after an ``Exit code: N`` /
    ``Wall time`` header)."""
    text = result.text()
    if _WRAPPED.match(text):
        try:
            decoded = orjson.loads(text)
        except orjson.JSONDecodeError:
            decoded = None
        if isinstance(decoded, dict) and isinstance(decoded.get("output"), str):
            text = decoded["output"]
    m = _RUNTIME_HEADER.match(text)
    if m and ("Exit code:" in m.group(0) or "Process exited with code" in m.group(0)):
        text = text[m.end():]
    return text


def error_text(result: ToolResult, limit: int = 240) -> str:
    """The telling lines of a failed result (:func:`error_line` of :func:`output_text`)."""
    return error_line(output_text(result), limit) or "(error with no output)"


@dataclass(slots=True)
class ErrorSeen:
    tool: str
    command: str | None
    text: str  # the telling line
    key: str  # what a later success must match to resolve it (call_key): the command, the file, the tool
    index: int  # its record's place in the records read
    resolved: bool = False
    resolved_by: str | None = None  # "rerun" or "assistant"
    at: int = -1  # its record's input position (``Record.index``)


# the look-ahead holds the phrases' first letters (the same matches, faster: see rules._RULE_WORDS)
_RESOLVED_WORDS = re.compile(
    r"\b(?=[frnatpwisg])(?:fixed|resolved|now pass(?:es)?|all (?:\d+ )?tests pass(?:ed)?"
    r"|tests? (?:now )?pass(?:es|ed)?|passing|"
    r"works now|now works|is working|succeeded|green)\b",
    re.I,
)
_NEGATION = re.compile(
    r"\b(?:not|no longer|still|yet|unable|cannot|can't|couldn't|won't|isn't|fail\w*)\b|n't\b", re.I
)


# Every match of _RESOLVED_WORDS holds one of these, lowercased (text.may_hold)
_RESOLVED_HINTS = ("fixed", "resolved", "pass", "works", "working", "succeeded", "green")


def claims_resolution(text: str) -> bool:
    """An assistant sentence says the problem is fixed (and does not negate it)."""
    if not may_hold(text, _RESOLVED_HINTS):  # (most texts have none of the words)
        return False
    if not _RESOLVED_WORDS.search(text):  # a sentence's match is a match in the whole text: one scan
        return False
    for sentence in re.split(r"(?<=[.!?\n])\s+", text):
        if _RESOLVED_WORDS.search(sentence) and not _NEGATION.search(sentence):
            return True
    return False


def call_key(call: ToolCall | None, name: str) -> str:
    """What a later success must match to resolve an error of this call: the command it ran (``cmd:…``),
    else the file it worked on with that tool (``file:Tool:path``), else the tool (``tool:…``)."""
    if call is None:
        return f"tool:{name}"
    cmd = command_of(call)
    if cmd is not None and not writes_files(call):
        return "cmd:" + " ".join(cmd.split())
    paths = paths_of_call(call)
    if paths:
        return f"file:{call.name}:{paths[0]}"
    return f"tool:{call.name}"


def success_keys(call: ToolCall) -> frozenset[str]:
    """The errors a success of ``call`` resolves, as keys: its own (:func:`call_key`), the same tool on each
    file it names, any tool's error on a file it changed (an Edit that failed is resolved by the Write or
    the Edit of that file that worked), and the key of earlier versions (``tool:name:arguments``), for
    errors carried in a state."""
    return per_call("keys", call, _success_keys)  # (the error and evidence scans both ask it)


def _success_keys(call: ToolCall) -> frozenset[str]:
    keys = {call_key(call, call.name), f"tool:{call.name}:{call.arguments.strip()}"}
    writes = writes_files(call)
    if writes or command_of(call) is None:
        for p in paths_of_call(call):
            keys.add(f"file:{call.name}:{p}")
            if writes:
                keys.add(f"{_ANY_TOOL_FILE}{p}")
    return frozenset(keys)


_ANY_TOOL_FILE = "file:*:"  # a success key: a write of this file by any tool


def resolves(keys: AbstractSet[str], error_key: str, tool: str) -> bool:
    """Whether successes with these keys resolve an error with ``error_key`` (made by ``tool``)."""
    if error_key in keys:
        return True
    prefix = f"file:{tool}:"
    return error_key.startswith(prefix) and f"{_ANY_TOOL_FILE}{error_key[len(prefix):]}" in keys


def errors_seen(records: Sequence[Record], failed: FailureCheck | None = None) -> list[ErrorSeen]:
    """Failed tool results in order, each marked resolved when a later call on the same command, tool or
    file succeeded (:func:`call_key`, :func:`success_keys`), or a later assistant message says it is
    fixed."""
    return scan(ErrorScan(call_index(records), failed), records)


class ErrorScan:
    """:func:`errors_seen` read record by record (``calls`` as for :class:`CommandScan`)."""

    def __init__(self, calls: Mapping[str, ToolCall], failed: FailureCheck | None = None) -> None:
        self.calls, self.failed = calls, failed or result_is_error
        self.judge = judge(self.failed)
        self.errors: list[ErrorSeen] = []
        # the errors not yet resolved, by what resolves them (:func:`resolves`: their key, or the file of a
        # file key, which any tool's write of that file resolves), so a success looks up its own keys
        # instead of walking every error seen (quadratic in a session of many failures and successes); an
        # entry resolved through one index is skipped when the other gives it
        self.open: list[ErrorSeen] = []
        self.open_by_key: dict[str, list[ErrorSeen]] = {}
        self.open_by_file: dict[str, list[ErrorSeen]] = {}

    @staticmethod
    def reads(kind: Kind) -> bool:
        return kind.results or (kind.role is Role.ASSISTANT and kind.input)

    def feed(self, rec: Seen) -> None:
        if rec.role is Role.ASSISTANT and rec.input and self.open and claims_resolution(rec.text):
            for e in self.open:
                if not e.resolved:
                    e.resolved, e.resolved_by = True, "assistant"
            self.open, self.open_by_key, self.open_by_file = [], {}, {}
        if not rec.results:
            return
        for res, call, failed in rec.answers(self.calls, self.judge):
            if failed is None:
                continue
            name = call.name if call else (res.name or "tool")
            if failed:
                self._add(ErrorSeen(name, command_of(call) if call else None, error_text(res),
                                    call_key(call, name), rec.n, at=rec.rec.index))
            elif call is not None and (self.open_by_key or self.open_by_file):  # (else nothing to resolve)
                for key in success_keys(call):
                    self._resolve(self.open_by_key.pop(key, ()))
                    if key.startswith(_ANY_TOOL_FILE):
                        self._resolve(self.open_by_file.pop(key[len(_ANY_TOOL_FILE):], ()))

    def _add(self, e: ErrorSeen) -> None:
        self.errors.append(e)
        self.open.append(e)
        self.open_by_key.setdefault(e.key, []).append(e)
        prefix = f"file:{e.tool}:"
        if e.key.startswith(prefix):
            self.open_by_file.setdefault(e.key[len(prefix):], []).append(e)

    @staticmethod
    def _resolve(errors: Iterable[ErrorSeen]) -> None:
        for e in errors:
            if not e.resolved:
                e.resolved, e.resolved_by = True, "rerun"

    def result(self) -> list[ErrorSeen]:
        return self.errors


def resolution_evidence(records: Sequence[Record],
                        failed: FailureCheck | None = None) -> tuple[set[str], bool]:
    """What in ``records`` resolves errors seen before them: the keys (:func:`success_keys`) of successful
    results, for :func:`resolves`, and whether an assistant message says a problem is fixed. Used to carry
    errors across compactions."""
    return scan(EvidenceScan(call_index(records), failed), records)


class EvidenceScan:
    """:func:`resolution_evidence` read record by record (``calls`` as for :class:`CommandScan`)."""

    def __init__(self, calls: Mapping[str, ToolCall], failed: FailureCheck | None = None) -> None:
        self.calls, self.failed = calls, failed or result_is_error
        self.judge = judge(self.failed)
        self.keys: set[str] = set()
        self.claimed = False

    @staticmethod
    def reads(kind: Kind) -> bool:
        return kind.results or (kind.role is Role.ASSISTANT and kind.input)

    def feed(self, rec: Seen) -> None:
        # (once one message claims it, the others need not be read)
        if not self.claimed and rec.role is Role.ASSISTANT and rec.input and claims_resolution(rec.text):
            self.claimed = True
        if not rec.results:
            return
        for _res, call, failed in rec.answers(self.calls, self.judge):
            if call is not None and failed is False:
                self.keys |= success_keys(call)

    def result(self) -> tuple[set[str], bool]:
        return self.keys, self.claimed


# --------------------------------------------------------------------------------------------------------
# Timeline and last action


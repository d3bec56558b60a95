"""Exit codes and the errors that map to them. The CLI turns every one into a message and a code, never a
traceback; the library raises them so callers can do the same."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .secrets import scrub_credentials


class ExitCode(enum.IntEnum):
    OK = 0
    INVALID_INPUT = 1  # the input is invalid (nothing written)
    USAGE = 2  # bad options or arguments
    STATE = 3  # the state file belongs to another transcript, or is locked or corrupt (nothing written)
    SUMMARIZER = 4  # the summarizer failed and --no-fallback was given (nothing written)
    DOES_NOT_FIT = 5  # written, but the result still does not fit the window (a warning says why)
    OUTPUT = 6  # the output or the state could not be written (full disk, read-only folder, closed pipe)
    WOULD_COMPACT = 10  # `estimate --check`: run would compact (not an error; 7-9 stay free for errors)


EXIT_MEANINGS: dict[ExitCode, str] = {
    ExitCode.OK: "success",
    ExitCode.INVALID_INPUT: "the input is invalid (nothing written); with several files: one of them failed",
    ExitCode.USAGE: "usage error (bad option or argument)",
    ExitCode.STATE: "the state file belongs to another transcript, or is locked or corrupt (nothing written)",
    ExitCode.SUMMARIZER: "the summarizer failed and --no-fallback was given (nothing written)",
    ExitCode.DOES_NOT_FIT: "written, but the result still does not fit the window (a warning says why)",
    ExitCode.OUTPUT: "cannot write the output or the state (full disk, read-only folder, closed pipe)",
    ExitCode.WOULD_COMPACT: "`estimate --check`: run would compact (a failed file gives 1 instead)",
}
"""What each exit code means, as ``--help`` shows it (docs/reference/exit-codes.md says it in more words)."""


@dataclass(frozen=True, slots=True)
class Problem:
    """One finding of validation: ``line N: <json path>: <what>``. ``line`` is 1-based; 0 = whole file."""

    line: int
    path: str
    message: str
    severity: str = "error"  # "error" or "warning"

    def __post_init__(self) -> None:
        # a problem quotes the line's values ("unknown role 'sk-ant-…'"): never a credential
        object.__setattr__(self, "path", scrub_credentials(self.path))
        object.__setattr__(self, "message", scrub_credentials(self.message))

    def __str__(self) -> str:
        where = f"line {self.line}" if self.line else "input"
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"

    def to_json(self) -> dict[str, object]:
        return {"line": self.line, "path": self.path, "message": self.message, "severity": self.severity}


class CtxCompactError(Exception):
    exit_code: ExitCode = ExitCode.USAGE

    def __init__(self, *args: object) -> None:
        # the message may quote the input or a server's answer: never a credential
        super().__init__(*(scrub_credentials(a) if isinstance(a, str) else a for a in args))


class UsageError(CtxCompactError):
    exit_code = ExitCode.USAGE


class InputError(CtxCompactError):
    """The input cannot be used. ``problems`` lists every finding (line and path)."""

    exit_code = ExitCode.INVALID_INPUT

    def __init__(self, message: str, problems: list[Problem] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or []


class LineError(Exception):
    """Raised by a format's line parser: the line does not have the format's shape.

    ``path`` is a JSON path into the line (``$.content[2].type``)."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


class Unstreamable(Exception):
    """A streamed compaction cannot give what the held one gives: the run reads the file held instead
    (raised by strategies/conversation.py, which only a compaction loads)."""


class Uncovered(Exception):
    """A state's covered prefix cannot be read from the file (covered.py): the held route reads the file
    (and reports what is wrong). Here so a streamed read catches it without loading covered.py, which
    only a state with a summary needs."""


class StateError(CtxCompactError):
    exit_code = ExitCode.STATE


class SummarizerError(CtxCompactError):
    exit_code = ExitCode.SUMMARIZER


class OutputError(CtxCompactError):
    """The output or the state could not be written: a full disk, a read-only or vanished folder, a closed
    pipe. The message names the path; no file is left half written or out of step with the other
    (docs/reference/exit-codes.md#the-codes). ``errno`` is the failing call's."""

    exit_code = ExitCode.OUTPUT

    def __init__(self, message: str, errno: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno

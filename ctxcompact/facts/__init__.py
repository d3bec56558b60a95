"""What a conversation says, read from the model: the facts every summary is made of.

- :mod:`.text`: markers of what ctxcompact writes, injected text, what a person typed, the latest request
- :mod:`.calls`: tool calls read: decoded arguments, the shell command, calls by id
- :mod:`.todos`: todo lists (from todo-tool calls or a ``--todos`` file)
- :mod:`.rules`: the user's rules, verbatim
- :mod:`.files`: files touched
- :mod:`.outcomes`: errors and whether they were resolved, commands and their outcome
- :mod:`.timeline`: a short timeline and the last assistant action

Pure functions over :class:`~ctxcompact.model.Record` lists (records without a message are skipped).
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .calls import call_index, command_of, decode_args
    from .files import FileTouch, files_touched, path_tokens, paths_of_call
    from .outcomes import (
        CommandRun,
        ErrorSeen,
        FailureCheck,
        call_failed,
        claims_resolution,
        commands_run,
        error_line,
        error_text,
        errors_seen,
        failure_checker,
        output_text,
        resolution_evidence,
        resolves,
        result_is_error,
        success_keys,
    )
    from .rules import rules_in_text, user_rules
    from .text import (
        CONTINUATION_MARKER,
        SUMMARY_MARKER,
        continuation_text,
        is_injected_text,
        latest_request,
        shorten,
        strip_injected,
        typed_text,
        user_requests,
    )
    from .timeline import LastAction, describe_call, last_assistant_action, timeline
    from .todos import Todo, is_open, latest_todo_list, load_todos_file, open_todos, todo_list_from_call

# The facts' modules load on first use of a name here (a run below the threshold needs few of them):
# name -> module of this package
_LAZY = {
    "CONTINUATION_MARKER": "text", "CommandRun": "outcomes", "ErrorSeen": "outcomes",
    "FailureCheck": "outcomes", "FileTouch": "files", "LastAction": "timeline", "SUMMARY_MARKER": "text",
    "Todo": "todos", "call_failed": "outcomes", "call_index": "calls", "claims_resolution": "outcomes",
    "command_of": "calls", "commands_run": "outcomes", "continuation_text": "text", "decode_args": "calls",
    "describe_call": "timeline", "error_line": "outcomes", "error_text": "outcomes",
    "errors_seen": "outcomes", "failure_checker": "outcomes", "files_touched": "files",
    "is_injected_text": "text", "is_open": "todos", "last_assistant_action": "timeline",
    "latest_request": "text", "latest_todo_list": "todos", "load_todos_file": "todos",
    "open_todos": "todos", "output_text": "outcomes", "path_tokens": "files", "paths_of_call": "files",
    "resolution_evidence": "outcomes", "resolves": "outcomes", "result_is_error": "outcomes",
    "rules_in_text": "rules", "shorten": "text", "strip_injected": "text", "success_keys": "outcomes",
    "timeline": "timeline", "todo_list_from_call": "todos", "typed_text": "text", "user_requests": "text",
    "user_rules": "rules",
}


class _Facts(types.ModuleType):
    """This package, whose name ``timeline`` is the function: importing the submodule of that name binds the
    module here (the import system's ``setattr``), which would hide the function; that binding is refused.
    (Bound eagerly instead, it would load the submodule and its five neighbours on every run: ~10 ms.)"""

    def __setattr__(self, name: str, value: object) -> None:
        if name == "timeline" and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Facts


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "CONTINUATION_MARKER",
    "SUMMARY_MARKER",
    "CommandRun",
    "ErrorSeen",
    "FailureCheck",
    "FileTouch",
    "LastAction",
    "Todo",
    "call_failed",
    "call_index",
    "claims_resolution",
    "command_of",
    "commands_run",
    "continuation_text",
    "decode_args",
    "describe_call",
    "error_line",
    "error_text",
    "errors_seen",
    "failure_checker",
    "files_touched",
    "is_injected_text",
    "is_open",
    "last_assistant_action",
    "latest_request",
    "latest_todo_list",
    "load_todos_file",
    "open_todos",
    "output_text",
    "path_tokens",
    "paths_of_call",
    "resolution_evidence",
    "resolves",
    "result_is_error",
    "rules_in_text",
    "shorten",
    "strip_injected",
    "success_keys",
    "timeline",
    "todo_list_from_call",
    "typed_text",
    "user_requests",
    "user_rules",
]

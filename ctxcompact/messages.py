"""The message-list API (docs/guides/frameworks.md#message-list-api): ``compact`` takes the list of messages
an SDK or a framework holds and returns the list to send, through the very pipeline of ``run``.

The list is written once as the format's JSONL (one message a line; an Anthropic ``system=`` as the system
line the format reads first) and handed to :func:`engine.run_held` with the state the :class:`Session`
keeps; the output lines come back as messages, each unchanged one as the very object the caller gave. No
rule of validation, cleaning, counting, calibration or compaction lives here.

A session keeps the whole conversation it was shown (the *history*), so the state's watermark, summary
and facts stay valid whichever way the caller keeps its list:

- it appends to the full list it holds: the new list extends the history;
- it replaces its list with ``result.messages`` (what LangChain's middleware and most frameworks do) and
  appends to that: the list starts with the last output, and the history is the last history plus what
  follows the output;
- anything else (an edited or another conversation) starts the history over, keeping the calibration's
  model of the provider (not the last request's figure, which measured another context).
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hashlib
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from .atomic import stage
from .context import Reread
from .engine import RunResult, run_held
from .errors import ExitCode, InputError, StateError, UsageError
from .formats import get_format
from .formats.base import Format
from .options import LOCK_TIMEOUT, Options
from .plugins import FORMATS as REGISTERED_FORMATS
from .plugins import REBUILDS_SDK_OBJECTS, SYSTEM_APART
from .report import EstimateReport
from .state import State, load_state, new_state, record_real_tokens, reset_calibration, save_state, state_lock
from .tokens.cache import CountCache
from .tokens.usage import PromptUsage, as_plain, prompt_tokens

#: the names ``compact(format=…)`` takes → the engine's format (each format's entry names its own)
FORMATS = {"auto": "auto", **REGISTERED_FORMATS.message_names()}
#: the state's key for what the session needs to recognise its own output next time
_KEY = "x-messages"
HISTORY_SUFFIX = ".history.jsonl"


@dataclass(slots=True)
class CompactResult:
    """What :func:`compact` did: ``messages`` is the list to send (each unchanged message the caller's own
    object), ``system`` the Anthropic system prompt to send with it (None for the other formats)."""

    messages: list[Any]
    system: Any
    compacted: bool
    tokens_before: int
    tokens_after: int
    fits: bool  # False: even the result is over the window (the run's exit 5; ``warnings`` say why)
    summary: str | None  # the summary text, when this call made one
    kept: int  # messages of ``messages`` handed back unchanged
    format: str
    estimate: EstimateReport  # the decision: counts, calibration, budget, threshold (``estimate.to_json()``)
    warnings: list[str] = field(default_factory=list)
    run: RunResult | None = None  # everything else ``run`` reports

    @property
    def would_compact(self) -> bool:
        return self.estimate.would_compact

    @property
    def window(self) -> int:
        return self.estimate.budget.window



def _default(obj: Any) -> Any:
    # orjson's hook for what it cannot write itself: the SDKs' objects (pydantic models), at any depth, and
    # bytes (a python-mode ``model_dump()`` of a Gemini part's ``thought_signature`` or ``inline_data``) as
    # the URL-safe base64 the SDK's own JSON dump writes
    if isinstance(obj, (bytes, bytearray)):
        return base64.urlsafe_b64encode(bytes(obj)).decode("ascii")
    plain = as_plain(obj)
    if plain is obj:
        raise TypeError(f"{type(obj).__name__} is not JSON data")
    return plain


def _digest(obj: Any) -> str:
    """The message's identity: its JSON with sorted keys (the caller's object and our output line agree)."""
    return hashlib.sha256(orjson.dumps(obj, default=_default, option=orjson.OPT_SORT_KEYS)).hexdigest()[:32]


@dataclass(slots=True)
class _Encoded:
    lines: list[bytes]
    objects: list[Any]  # what each line was made from (the system prompt's line: a dict around it)
    system: Any
    has_system: bool
    _digests: list[str] | None = None
    _data: bytes | None = None
    #: whether a run's output is ``data`` as it is (:func:`_unchanged`), once a call has compared them
    same: bool | None = None

    @property
    def data(self) -> bytes:
        if self._data is None:  # (joined once: a session's call and its decoding both read it)
            self._data = b"".join(self.lines)
        return self._data

    @property
    def digests(self) -> list[str]:
        if self._digests is None:  # only when the output is not the input (a compaction, a repair)
            self._digests = [_digest(orjson.loads(line)) for line in self.lines]
        return self._digests

    def originals(self) -> dict[str, list[Any]]:
        """Each digest's objects in list order: equal messages (the same answer given twice) come back as
        the caller's objects in turn, each the very one at its place."""
        out: dict[str, list[Any]] = {}
        for i, (key, obj) in enumerate(zip(self.digests, self.objects, strict=True)):
            out.setdefault(key, []).append(self.system if self.has_system and i == 0 else obj)
        for objs in out.values():
            objs.reverse()  # popped from the end: oldest first
        return out


def _encode(messages: Sequence[Any], system: Any, fmt: str) -> _Encoded:
    if isinstance(messages, (str, bytes, os.PathLike)) or not isinstance(messages, Sequence):
        raise UsageError(f"compact takes a list of messages, got {type(messages).__name__} "
                         "(for a transcript file or bytes use run or estimate)")
    objects: list[Any] = list(messages)
    if system is not None:
        if not REGISTERED_FORMATS.has(fmt, SYSTEM_APART):
            raise UsageError("system= is for Anthropic messages (format='anthropic'); in the other formats "
                             "the system prompt is a message of the list")
        objects.insert(0, {"role": "system", "content": system})
    lines: list[bytes] = []
    shift = 1 if system is not None else 0
    # a format that reads its list's messages in a shape of its own (Codex: Responses items), else as given
    shaped = fmt != "auto" and type(get_format(fmt)).from_list_item is not Format.from_list_item
    for i, obj in enumerate(objects):
        try:
            line = orjson.dumps(obj, default=_default)
            if shaped:
                line = orjson.dumps(get_format(fmt).from_list_item(orjson.loads(line)))
        except TypeError as exc:
            raise UsageError(f"{_where(i, shift)}: not JSON data ({exc})") from None
        if not line.startswith(b"{"):
            raise UsageError(f"{_where(i, shift)}: expected a message (a dict or an SDK message object), "
                             f"got {type(obj).__name__}")
        lines.append(line + b"\n")
    return _Encoded(lines, objects, system, system is not None)


def _where(i: int, shift: int) -> str:
    """The name of the ``i``-th object encoded (named only for an error: a call encodes every message)."""
    return "system" if i < shift else f"messages[{i - shift}]"


def output_messages(result: RunResult) -> list[Any]:
    """The output lines as message objects (``Format.to_list_item``: Responses items out of their
    envelope)."""
    item = get_format(result.output_format).to_list_item
    return [item(orjson.loads(line)) for line in result.lines()]


def _sdk_class(messages: Sequence[Any], fmt: str) -> Callable[[Any], Any] | None:
    """How to build a new message like the ones given: the SDK class's ``model_validate`` when the list holds
    SDK objects of a format that rebuilds them (``plugins.REBUILDS_SDK_OBJECTS``: a Gemini list is handed to
    code that reads ``content.parts``, google-genai ``types.Content``, ADK ``Event``), else None."""
    if not REGISTERED_FORMATS.has(fmt, REBUILDS_SDK_OBJECTS):
        return None
    sdk = next((m for m in messages if not isinstance(m, dict) and callable(getattr(m, "model_dump", None))),
               None)
    validate = getattr(type(sdk), "model_validate", None) if sdk is not None else None
    return validate if callable(validate) else None


def _rebuild(obj: Any, build: Callable[[Any], Any] | None, warn: Callable[[str], None]) -> Any:
    """``obj`` as the SDK class, when the class holds all of it (its dump is ``obj`` again); else the dict (a
    Content-shaped summary in a list of ADK ``Event`` objects, which would take it as an empty event)."""
    if build is None or not isinstance(obj, dict):
        return obj
    try:
        built = build(obj)
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        warn(f"a new message is returned as a dict: the SDK class refused it ({str(exc).splitlines()[0]})")
        return obj
    return built if _digest(built) == _digest(obj) else obj


def _unchanged(result: RunResult, data: bytes) -> bool:
    """The output is the input as it was given (nothing repaired, compacted or summarized before)."""
    return not result.compacted and not result.repairs and b"".join(result.lines()) == data


def _decode(result: RunResult, enc: _Encoded, messages: Sequence[Any],
            warn: Callable[[str], None] = lambda _: None) -> tuple[list[Any], Any, int]:
    if enc.same if enc.same is not None else _unchanged(result, enc.data):
        return list(messages), enc.system, len(messages)  # nothing to repair or compact: the list as given
    build = _sdk_class(messages, result.output_format)
    originals = enc.originals()
    out: list[Any] = []
    kept = 0
    system = enc.system
    for i, obj in enumerate(output_messages(result)):
        key = _digest(obj)
        if enc.has_system and i == 0 and isinstance(obj, dict) and obj.get("role") == "system":
            if originals.get(key):
                originals[key].pop()
                system = enc.system
            else:
                system = obj.get("content")
            continue
        same = originals.get(key)
        if same:
            # the last of several equal objects stays for any further copy the output holds
            out.append(same.pop() if len(same) > 1 else same[0])
            kept += 1
        else:
            out.append(_rebuild(obj, build, warn))
    return out, system, kept


def _options(options: Options | None, fmt: str, **given: Any) -> Options:
    engine_fmt = FORMATS.get(fmt)
    if engine_fmt is None:
        raise UsageError(f"format {fmt!r}: expected one of {', '.join(FORMATS)}")
    base = options if options is not None else Options(keep_trailing_results=True)
    changes = {k: v for k, v in given.items() if v is not None}
    return dataclasses.replace(base, format=engine_fmt, use_state=False, state_path=None, **changes)


def _where_error(exc: InputError, has_system: bool) -> InputError:
    """An input error names a line; in a list that is a message (line 1 is the system prompt given apart)."""
    shift = "line 1 is system=, line N is messages[N-2]" if has_system else "line N is messages[N-1]"
    return InputError(f"{exc} ({shift})", list(getattr(exc, "problems", [])))


class Session:
    """The state of one conversation between :func:`compact` calls: in memory (``Session()``) or in a state
    file (``Session(path)``: the same file, atomic writes and lock as ``run``'s state, with the conversation
    kept beside it in ``<path>.history.jsonl``). One session per conversation; sessions share nothing, and
    one session is safe to use from several threads (calls take turns)."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *,
                 lock_timeout: float = LOCK_TIMEOUT) -> None:
        self.path = Path(path) if path is not None else None
        self.lock_timeout = lock_timeout
        self._mutex = threading.RLock()
        self._state: State | None = None
        self._history = b""
        self._counts = CountCache()  # what the last call counted, so the next one counts only what is new
        self._reread = Reread()  # what the last call read and cleaned, so the next one reads only what is new

    @property
    def history_path(self) -> Path | None:
        """Where a file session keeps the whole conversation it was shown (what the summary replaced)."""
        return self.path.with_name(self.path.name + HISTORY_SUFFIX) if self.path is not None else None

    @property
    def state(self) -> State | None:
        """The state as of the last call (a file session reads its file)."""
        with self._mutex:
            if self.path is None:
                return self._state
            return load_state(self.path)

    def history(self) -> bytes:
        """The whole conversation so far as the format's JSONL (what the summaries replaced included)."""
        with self._mutex:
            if self.path is None:
                return self._history
            state = load_state(self.path)
            return self._load_history(state)

    def observe(self, usage: Any) -> PromptUsage:
        """After-model hook: what the provider billed for the request just sent (its usage object or dict, or
        the whole response; docs/concepts/calibration.md#observeusage) calibrates the next call."""
        billed = prompt_tokens(usage)
        with self._mutex:
            if self.path is None:
                if self._state is None:
                    raise UsageError("observe: call compact first (the session has no estimate of a request)")
                record_real_tokens(self._state, billed.tokens)
                return billed
            with state_lock(self.path, timeout=self.lock_timeout):
                state = load_state(self.path)
                if state is None:
                    raise StateError(f"no state file at {self.path}: call compact first")
                record_real_tokens(state, billed.tokens)
                save_state(self.path, state)
        return billed

    def reset(self) -> None:
        """Forget everything (a new conversation)."""
        with self._mutex:
            self._state, self._history, self._reread = None, b"", Reread()
            if self.path is not None:
                with state_lock(self.path, timeout=self.lock_timeout):
                    for p in (self.path, self.history_path):
                        if p is not None and p.exists():
                            p.unlink()

    # -------------------------------------------------------------------------------------------------

    def _load_history(self, state: State | None) -> bytes:
        info = state.extra.get(_KEY) if state is not None else None
        if not isinstance(info, dict) or self.history_path is None:
            return b""
        size = info.get("bytes", 0)
        try:
            with open(self.history_path, "rb") as f:
                data = f.read(size)
        except FileNotFoundError:
            return b""
        if len(data) != size:
            raise StateError(f"{self.history_path} is shorter than the state {self.path} says "
                             f"({len(data)} of {size} bytes); delete both to start over")
        return data

    def _run(self, enc: _Encoded, opts: Options, warn: Callable[[str], None]) -> tuple[RunResult, bytes]:
        with self._mutex:
            if self.path is None:
                return self._step(self._state, self._history, enc, opts, warn, commit=self._keep)
            with state_lock(self.path, timeout=self.lock_timeout):
                state = load_state(self.path)
                return self._step(state, self._load_history(state), enc, opts, warn, commit=self._save)

    def _step(self, state: State | None, history: bytes, enc: _Encoded, opts: Options,
              warn: Callable[[str], None], commit: Callable[[State, bytes, bytes], None]
              ) -> tuple[RunResult, bytes]:
        info = state.extra.get(_KEY) if state is not None else None
        output = info.get("output", []) if isinstance(info, dict) else []
        data = enc.data
        if history and data.startswith(history):
            full = data  # the caller keeps the whole list and appended to it
        elif output and enc.digests[: len(output)] == output and len(enc.digests) >= len(output):
            # the caller replaced its list with our last output: the conversation is the history plus what
            # follows that output
            full = history + b"".join(data.splitlines(keepends=True)[len(output):])
        else:
            full = data
            if state is not None and history:
                fresh = new_state(state.fingerprint.format or REGISTERED_FORMATS.default)
                old = dataclasses.replace(state)
                fresh.calibration = reset_calibration(old)
                state = fresh
        try:
            counts = self._counts if self.path is None else self.path
            if self.path is not None:  # the history file is where the earlier conversation can be read
                opts = dataclasses.replace(opts, cite_source=True)
            result = run_held(full, opts, state, path=self.history_path, counts=counts, warn=warn,
                              reread=self._reread)
        except InputError as exc:
            if full is not data:  # the lines are the session's conversation, not the list given
                raise InputError(f"{exc} (a line of the session's conversation: Session.history())",
                                 list(getattr(exc, "problems", []))) from None
            raise _where_error(exc, enc.has_system) from None
        assert result.state is not None
        # what to recognise next time: the output, when it is not the conversation itself
        same = _unchanged(result, full)
        if full is data:  # (the list given is the conversation: what _decode asks, answered)
            enc.same = same
        out_digests = [] if same else [_digest(o) for o in output_messages(result)]
        result.state.extra[_KEY] = {"bytes": len(full), "output": out_digests}
        commit(result.state, full, history)
        return result, full

    def _keep(self, state: State, full: bytes, old: bytes) -> None:
        self._state, self._history = state, full

    def _save(self, state: State, full: bytes, old: bytes) -> None:
        assert self.path is not None and self.history_path is not None
        if full != old:
            staged = stage(self.history_path, full, what="history")
            try:
                staged.commit()
            except OSError:
                staged.discard()
                raise
        save_state(self.path, state)


def compact(messages: Sequence[Any], *, window: int | None = None, session: Session | None = None,
            system: Any = None, format: str = "auto", model: str | None = None, threshold: str | None = None,
            strategy: str | None = None, summarizer: str | None = None, options: Options | None = None,
            warn: Callable[[str], None] | None = None) -> CompactResult:
    """The list to send now: ``messages`` (OpenAI chat, Anthropic with ``system=`` apart, or Gemini
    ``Content``; dicts or the SDKs' objects) compacted when over the threshold, through ``run``'s pipeline.

    Without a session the call is stateless (each call decides from the list alone). ``options`` sets anything
    else ``run`` takes (``Options``); the keyword arguments win over it. Bad input raises InputError naming
    the message; a configuration problem UsageError."""
    fmt = format
    if system is not None and fmt == "auto":  # (the format that takes the system prompt apart)
        fmt = next(n for n in REGISTERED_FORMATS.names() if REGISTERED_FORMATS.has(n, SYSTEM_APART))
    opts = _options(options, fmt, window=window, model=model,
                    threshold=str(threshold) if threshold is not None else None, strategy=strategy,
                    summarizer=summarizer)
    enc = _encode(messages, system, opts.format)
    warnings: list[str] = []

    def collect(message: str) -> None:
        warnings.append(message)
        if warn is not None:
            warn(message)

    if session is None:
        try:
            result = run_held(enc.data, opts, None, warn=collect)
        except InputError as exc:
            raise _where_error(exc, enc.has_system) from None
    else:
        result, _ = session._run(enc, opts, collect)
    out, out_system, kept = _decode(result, enc, messages, collect)
    warnings.extend(w for w in result.warnings if w not in warnings)
    return CompactResult(
        messages=out, system=out_system, compacted=result.compacted, tokens_before=result.tokens_before,
        tokens_after=result.tokens_after, fits=result.exit_code != ExitCode.DOES_NOT_FIT,
        summary=result.summary.text if result.summary is not None else None, kept=kept,
        format=result.output_format, estimate=result.estimate, warnings=warnings, run=result)


async def acompact(messages: Sequence[Any], **kwargs: Any) -> CompactResult:
    """:func:`compact` off the event loop (a worker thread), for async frameworks."""
    return await asyncio.to_thread(compact, messages, **kwargs)

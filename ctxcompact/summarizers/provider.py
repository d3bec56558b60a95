"""What the LLM summarizers share: their options, the window, the flow of a summary, reading a context-length
error, and redacting anything a provider sends back. The key and the mapping of SDK errors to secret-free
reasons are :mod:`ctxcompact.sdk`'s (re-exported here)."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import importlib
import os
import re
import time
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

from .. import sdk
from ..errors import SummarizerError
from ..options import MAX_RETRIES, MAX_TOKENS
from ..secrets import redact, scrub  # re-exported: the one scrubber lives in the low layer
from .base import REPLIES, Summarizer, SummaryRequest, SummaryResult
from .prompt import (
    build_user_prompt,
    chunks,
    estimate_input_tokens,
    input_budget,
    min_input_budget,
    system_prompt,
)


def redact_result(result: SummaryResult, secrets: list[str]) -> SummaryResult:
    """The one boundary every summary crosses before it is stored or written
    (docs/reference/safety.md#api-keys): a server that answers 200 with the request's headers inside the
    summary (a misconfigured proxy, an echo endpoint) must not get the key into the output or the state. Every
    text a provider sent back is redacted: the summary, the model name, the fallback reason."""
    if not secrets:
        return result
    return dataclasses.replace(
        result,
        text=redact(result.text, list(secrets)),
        model=redact(result.model, list(secrets)) if result.model is not None else None,
        fallback_reason=(scrub(result.fallback_reason, list(secrets))
                         if result.fallback_reason is not None else None),
    )


# The summary asked of a model is at most a fifth of its window (never under MIN_OUTPUT_TOKENS), so a small
# local model's window still holds the system prompt and a useful piece of the conversation.
OUTPUT_WINDOW_DIVISOR = 5
MIN_OUTPUT_TOKENS = 256


class ContextTooLong(Exception):
    """The server said the request exceeds the model's window; ``window`` is the window it named, if any."""

    def __init__(self, reason: str, window: int | None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.window = window


# What servers say when a request does not fit the window
# (docs/guides/local-models.md#requests-that-fit-and-chunks): OpenAI and vLLM "maximum context length is N
# tokens", llama-cpp-python "context_length_exceeded" with the same words, llama.cpp's server
# "exceed_context_size_error" with ``n_ctx``, Anthropic "prompt is too long: X > N".
_OVERFLOW_CODES = ("context_length_exceeded", "exceed_context_size_error", "context_window_exceeded")
_OVERFLOW_WORDS = re.compile(r"context (?:length|window|size)|prompt is too long|too many tokens|"
                             r"maximum context|exceeds? the (?:available )?context", re.I)
_WINDOW_NUMBERS = (
    re.compile(r"maximum context length is (\d+)", re.I),
    re.compile(r"context (?:window|size|length) of (\d+)", re.I),
    re.compile(r"n_ctx\D{0,4}(\d+)", re.I),
    re.compile(r"> ?(\d+) maximum", re.I),
)


def context_overflow(err: BaseException) -> ContextTooLong | None:
    """A :class:`ContextTooLong` when ``err`` (an SDK status error) says the request did not fit the
    model's window, with the window when the server named it; else None."""
    status = getattr(err, "status_code", None)
    if status not in (400, 413, 422):
        return None
    body = getattr(err, "body", None)
    inner = body.get("error", body) if isinstance(body, dict) else None
    fields = inner if isinstance(inner, dict) else {}
    code = " ".join(str(fields.get(k) or getattr(err, k, None) or "") for k in ("code", "type"))
    message = str(fields.get("message") or getattr(err, "message", "") or "")
    if not (any(c in code for c in _OVERFLOW_CODES) or _OVERFLOW_WORDS.search(message) or status == 413):
        return None
    window: int | None = None
    if isinstance(fields.get("n_ctx"), int):
        window = fields["n_ctx"]
    for pattern in _WINDOW_NUMBERS:
        m = pattern.search(message) if window is None else None
        if m and len(m.group(1)) <= 12:  # int() of thousands of digits is refused: no window is that long
            window = int(m.group(1))
    window = sane_tokens(window)
    return ContextTooLong(f"HTTP {status}: the request exceeds the model's context window"
                          + (f" of {window:,} tokens" if window else ""), window)


T = TypeVar("T")


def call_with_deadline(fn: Callable[[], T], seconds: float, what: str) -> T:
    """``fn()``, or a SummarizerError once ``seconds`` of wall-clock time have passed
    (:func:`sdk.with_deadline`, the one deadline every provider call runs under); the caller falls back as
    documented."""
    try:
        return sdk.with_deadline(fn, seconds)
    except sdk.DeadlinePassed as passed:
        raise SummarizerError(f"{what}: request timed out: {passed}") from None


def sane_tokens(value: Any) -> int | None:
    """A token figure a server reported, if it is one (a whole number from 0 to ``MAX_TOKENS``); None for
    anything else, which is then treated as not reported."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TOKENS:
        return None
    return value


class ProviderSummarizer(Summarizer):
    """What the LLM summarizers share: their options, the window, the flow of a summary (fit, chunk, retry
    once on a context-length error) and a repr that never shows the key. A provider implements ``_key``,
    ``check`` and ``_send`` (one request, returning the reply's text and usage)."""

    default_context_window: int = 200_000
    #: the provider's usual key variable (ANTHROPIC_API_KEY, OPENAI_API_KEY)
    key_variable: str = ""
    #: the SDK module ``_send`` imports (loaded before the call's deadline starts)
    sdk: str = ""

    def __init__(
        self,
        *,
        model: str | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        context_window: int | None = None,
        window_source: str | None = None,
        instructions: str | None = None,
    ) -> None:
        self.model = model
        self._explicit_key = api_key
        self.base_url = base_url
        self.timeout = float(timeout)
        self.max_retries = min(int(max_retries), MAX_RETRIES)  # each retry waits: never without bound
        # the summarizer's own window: its input must fit 80 % of it (docs/concepts/calibration.md#budget);
        # None until known
        self.context_window: int | None = int(context_window) if context_window else None
        self.window_source: str | None = window_source if context_window else None
        self.instructions = instructions
        self.last_stats: Any = None  # prompt.PromptStats of the last request (what was dropped and cut)
        #: the seconds the replies answered again in this summary took when first sent (replies_kept)
        self.replayed = 0.0

    def secrets(self) -> list[str]:
        """Every key this summarizer might send (explicit, CTXCOMPACT_API_KEY, the provider's variable) and
        the password of a base URL: none of them may appear in what is written."""
        found = [v.strip() for v in (self._explicit_key, os.environ.get("CTXCOMPACT_API_KEY"),
                                     os.environ.get(self.key_variable) if self.key_variable else None)
                 if v and v.strip()]
        try:
            password = urlsplit(self.base_url).password if self.base_url else None
        except ValueError:
            password = None
        if password:
            found.append(password)
        return found

    def __repr__(self) -> str:  # never show the key
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    # --- what a provider implements -------------------------------------------------------------------

    def _key(self) -> str:
        raise NotImplementedError

    def _send(self, key: str, prompt: str, budget_tokens: int) -> SummaryResult:
        """One request; raise ContextTooLong when the server says it does not fit, else SummarizerError."""
        raise NotImplementedError

    def discover_window(self, key: str) -> tuple[int, str] | None:
        """The window the server reports for ``self.model``, with where it was read; None if it does not."""
        return None

    # --- the shared flow ------------------------------------------------------------------------------

    def window(self, key: str) -> tuple[int, str]:
        """The summarizer's window and its source: given (``--summary-window``, the models table or the
        config), else what the server reports, else the provider's default."""
        if self.context_window is None:
            kept = REPLIES.get()
            asked = ("window", type(self).__name__, self.model, self.base_url)  # (asked once in a run)
            if kept is not None and asked in kept:
                found = kept[asked]
            else:
                found = self._discovered(key)
                if kept is not None:
                    kept[asked] = found
            self.context_window, self.window_source = found or (self.default_context_window, "default")
        return self.context_window, self.window_source or "given"

    def _discovered(self, key: str) -> tuple[int, str] | None:
        try:  # as the discovery's own failures: a server that does not answer in time reports nothing
            found = call_with_deadline(lambda: self.discover_window(key), min(self.timeout, 10.0),
                                       f"{self.name}: asking the server for the window")
        except SummarizerError:
            return None
        if found is not None and sane_tokens(found[0]) is None:
            return None  # a window no model has is not taken (the default stays)
        return found

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.check()
        key = self._key()
        if self.instructions and not request.instructions:
            request = dataclasses.replace(request, instructions=self.instructions)
        window, _ = self.window(key)
        started, self.replayed = time.monotonic(), 0.0
        try:
            result = self._summarize_within(window, request, key)
        except ContextTooLong as exc:
            # retry once, the input cut to fit the window the server named (or half of what was sent)
            sent = self.last_stats.estimated_tokens + estimate_input_tokens(system_prompt(window)) \
                + request.budget_tokens if self.last_stats is not None else window
            smaller = exc.window if exc.window and exc.window < window else min(window, sent) // 2
            self.context_window, self.window_source = smaller, "the server's context-length error"
            try:
                result = self._summarize_within(smaller, request, key)
            except ContextTooLong as again:
                raise SummarizerError(scrub(
                    f"{self.name}: {again.reason}, also after cutting the input to fit a {smaller:,}-token "
                    "window", [key])) from None
        # (a reply answered again reports the time it took when sent)
        result.duration_s = round(time.monotonic() - started + self.replayed, 3)
        result.window, result.window_source = self.context_window, self.window_source
        return result

    def _send_within_deadline(self, key: str, prompt: str, budget_tokens: int) -> SummaryResult:
        """One ``_send`` under the wall-clock deadline of ``--timeout`` (:func:`call_with_deadline`). The
        SDK is imported first, outside the deadline: loading it is not the server's time."""
        kept = REPLIES.get()
        # (the prompt by its hash: a streamed run holds no piece's prompt after it is sent)
        asked = (type(self).__name__, self.model, self.base_url, self.instructions, self.context_window,
                 hashlib.sha256(prompt.encode("utf-8", "surrogatepass")).digest(), budget_tokens)
        if kept is not None and asked in kept:  # (sent already in this run: replies_kept)
            reply, took = kept[asked]
            self.replayed += took
            if isinstance(reply, BaseException):
                raise reply
            return copy.deepcopy(reply)  # (the caller fills in its figures)
        if self.sdk:
            importlib.import_module(self.sdk)
        sent = time.monotonic()
        try:
            result = call_with_deadline(lambda: self._send(key, prompt, budget_tokens), self.timeout,
                                        self.name)
        except (SummarizerError, ContextTooLong) as exc:
            if kept is not None:
                kept[asked] = (exc, time.monotonic() - sent)
            raise
        if kept is not None:
            kept[asked] = (copy.deepcopy(result), time.monotonic() - sent)
        return result

    def _summarize_within(self, window: int, request: SummaryRequest, key: str) -> SummaryResult:
        """Summarize ``request`` in requests that each fit ``window``: one when the conversation fits,
        else chunks, oldest first, each carrying the summary so far as the prior summary (the first, the
        request's)."""
        output = min(request.budget_tokens, max(MIN_OUTPUT_TOKENS, window // OUTPUT_WINDOW_DIVISOR))
        if output < request.budget_tokens:  # a small model's window: ask for a shorter summary
            request = dataclasses.replace(request, budget_tokens=output)
        budget = input_budget(window, request.budget_tokens)
        if budget < min_input_budget(window):
            raise SummarizerError(
                f"{self.name}: the summarizer window ({window:,} tokens) leaves no room for input "
                f"after the {request.budget_tokens:,}-token summary budget")
        carried = request.prior_summary
        results: list[SummaryResult] = []
        # one piece at a time: a streamed run's records are read again as the pieces are made, not held
        for records in chunks(request, budget):
            part = dataclasses.replace(request, records=records, prior_summary=carried)
            prompt, stats = build_user_prompt(part, budget)
            self.last_stats = stats
            result = self._send_within_deadline(key, prompt, request.budget_tokens)
            result.input_tokens = sane_tokens(result.input_tokens)
            result.output_tokens = sane_tokens(result.output_tokens)
            results.append(result)
            carried = result.text
        final = results[-1]
        final.chunks = len(results)
        final.truncated = any(r.truncated for r in results)
        final.input_tokens = _total([r.input_tokens for r in results])
        final.output_tokens = _total([r.output_tokens for r in results])
        return final


def _total(values: list[int | None]) -> int | None:
    """The sum of what each request reported; None when any did not report it."""
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)

"""The one boundary with the provider SDKs (``anthropic``, ``openai``): which key to use, and what a failed
call says. Every SDK call site (the summarizers, ``--exact anthropic``, ``eval --judge``) makes its request
through :func:`call`, so a failure reads the same everywhere (docs/reference/safety.md#api-keys-and-errors):

- the reason is built from the status code and the error's type only (plus, for Anthropic, its message on
  400/404/413, e.g. "prompt is too long" or an unknown model; never OpenAI's, whose 401 echoes part of the
  key), never from headers or the request;
- the key in use and any credential it quotes are scrubbed from it (:func:`ctxcompact.secrets.scrub`), and it
  fits on one line of at most 300 characters;
- it is raised outside the ``except`` block, so the SDK's exception (whose text may echo the key or the
  request) is not attached as ``__context__`` for a traceback printer to show.

The SDKs are imported inside the functions only.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

from .secrets import scrub

T = TypeVar("T")

# What an HTTP status means to a user (529 is Anthropic's "overloaded").
STATUS_WORDS = {
    400: "bad request",
    401: "authentication failed (check the API key)",
    403: "permission denied",
    404: "not found (check the model name and base URL)",
    413: "request too large",
    429: "rate limited",
    500: "server error",
    503: "service unavailable",
    529: "overloaded",
}


@dataclass(frozen=True, slots=True)
class Provider:
    """How one SDK's errors are read. ``labels``: the error attributes that name the kind of error, first
    found wins; ``detail_statuses``: statuses whose API message is added to the reason;
    ``base_url_variable``: where the SDK reads a base URL when none is given (named in a connection error)."""

    sdk: str
    labels: tuple[str, ...]
    detail_statuses: tuple[int, ...]
    base_url_variable: str


PROVIDERS = {
    "anthropic": Provider("anthropic", ("type",), (400, 404, 413), "ANTHROPIC_BASE_URL"),
    # OpenAI's messages are left out on purpose: its 401 message echoes part of the key
    "openai": Provider("openai", ("code", "type"), (), "OPENAI_BASE_URL"),
}


def host_of(url: str | None) -> str:
    """Host and port only: a base URL may carry credentials (user:pass@) or tokens in its query."""
    if not url:
        return "the default endpoint"
    try:
        parts = urlsplit(url)
        host = parts.hostname or "?"
        return f"{host}:{parts.port}" if parts.port else host
    except ValueError:
        return "the configured endpoint"


def error_reason(err: BaseException, provider: str, *, timeout: float, max_retries: int,
                 base_url: str | None) -> str:
    """A short reason for an exception of ``provider``'s SDK (both SDKs share the class names), built from
    the status code and error type only (see the module notes). Not yet scrubbed: :func:`call` does that."""
    spec = PROVIDERS[provider]
    sdk = importlib.import_module(spec.sdk)
    base_url = base_url or os.environ.get(spec.base_url_variable) or None
    retries = f" after {max_retries} retr{'y' if max_retries == 1 else 'ies'}" if max_retries else ""
    if isinstance(err, sdk.APITimeoutError):
        return f"request timed out ({timeout:g} s){retries}"
    if isinstance(err, sdk.APIConnectionError):
        return f"cannot connect to {host_of(base_url)}{retries}"
    if isinstance(err, sdk.APIStatusError):
        status = err.status_code
        labels = (getattr(err, a, None) for a in spec.labels)
        label = next((x for x in labels if isinstance(x, str) and x), None)
        words = STATUS_WORDS.get(status) or ("server error" if status >= 500 else "request rejected")
        reason = f"HTTP {status}" + (f" {label}" if label else "") + f": {words}"
        message = getattr(err, "api_message", None)
        if status in spec.detail_statuses and isinstance(message, str):
            reason += f" ({message})"
        if status == 429 or status >= 500:
            reason += retries
        return reason
    if isinstance(err, sdk.APIError):
        return "malformed response from the server"
    if isinstance(err, ValueError) and "JSON" in type(err).__name__:
        return "malformed response from the server (not valid JSON)"
    return f"unexpected error ({type(err).__name__})"


PROVIDER_CALL_THREAD = "ctxcompact-provider-call"  # the CLI ends without finalization while one is alive


class DeadlinePassed(Exception):
    """:func:`with_deadline`'s call had no result within its wall-clock limit."""


def with_deadline(fn: Callable[[], T], seconds: float) -> T:
    """``fn()``, or :class:`DeadlinePassed` once ``seconds`` of wall-clock time have passed
    (docs/reference/safety.md): an SDK's timeout is per read, so a server that drips a byte at a time never
    trips it, and its retries add up. The call runs in a daemon thread; one that is still waiting is abandoned
    (it ends with the process) and the caller goes on as documented."""
    box: dict[str, Any] = {}
    done = threading.Event()

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the caller's thread as it is
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=target, daemon=True, name=PROVIDER_CALL_THREAD).start()
    if not done.wait(seconds):
        raise DeadlinePassed(f"no complete reply within {seconds:g} s (--timeout covers the whole call, "
                             "retries included)")
    if "error" in box:
        raise box["error"]
    value: T = box["value"]
    return value


def call(provider: str, send: Callable[[], T], *, key: str, prefix: str, error: Callable[[str], Exception],
         timeout: float, max_retries: int, base_url: str | None,
         special: Callable[[BaseException], Exception | None] | None = None,
         deadline: float | None = None) -> T:
    """``send()``, or ``error("<prefix>: <reason>")`` with the reason mapped, scrubbed of ``key`` and raised
    with no SDK exception attached. ``special`` may turn an SDK error into another exception to raise instead
    (the summarizers' context-length error, which is retried with a smaller request). ``deadline``: a
    wall-clock limit on the whole call, retries included (:func:`with_deadline`)."""
    failure: Exception | None = None
    try:
        return send() if deadline is None else with_deadline(send, deadline)
    except DeadlinePassed as passed:
        failure = error(f"{prefix}: request timed out: {passed}")
    except Exception as err:  # any SDK or transport failure
        failure = special(err) if special is not None else None
        if failure is None:
            reason = error_reason(err, provider, timeout=timeout, max_retries=max_retries, base_url=base_url)
            failure = error(scrub(f"{prefix}: {reason}", [key]))
    raise failure  # outside the except block: no __context__


def resolve_api_key(explicit: str | None, provider_var: str) -> str | None:
    """The key to use: the explicit one, else CTXCOMPACT_API_KEY, else the provider's usual variable."""
    for value in (explicit, os.environ.get("CTXCOMPACT_API_KEY"), os.environ.get(provider_var)):
        if value and value.strip():
            return value.strip()
    return None

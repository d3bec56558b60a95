"""What the LLM summarizers share: their options, the key, one mapping of SDK errors to secret-free
reasons, and scrubbing of anything a provider sends back."""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

from .base import Summarizer

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


def error_reason(err: BaseException, sdk: ModuleType, *, timeout: float, max_retries: int,
                 base_url: str | None, labels: tuple[str, ...], detail_statuses: tuple[int, ...]) -> str:
    """A short reason for an exception of either official SDK (they share the class names), built from the
    status code and error type only, never from headers or the key. ``labels``: the error attributes that
    name the kind of error, first found wins; ``detail_statuses``: statuses whose API message is added."""
    retries = f" after {max_retries} retr{'y' if max_retries == 1 else 'ies'}" if max_retries else ""
    if isinstance(err, sdk.APITimeoutError):
        return f"request timed out ({timeout:g} s){retries}"
    if isinstance(err, sdk.APIConnectionError):
        return f"cannot connect to {host_of(base_url)}{retries}"
    if isinstance(err, sdk.APIStatusError):
        status = err.status_code
        label = next((x for x in (getattr(err, a, None) for a in labels) if isinstance(x, str) and x), None)
        words = STATUS_WORDS.get(status) or ("server error" if status >= 500 else "request rejected")
        reason = f"HTTP {status}" + (f" {label}" if label else "") + f": {words}"
        message = getattr(err, "api_message", None)
        if status in detail_statuses and isinstance(message, str):
            reason += f" ({message})"
        if status == 429 or status >= 500:
            reason += retries
        return reason
    if isinstance(err, sdk.APIError):
        return "malformed response from the server"
    if isinstance(err, ValueError) and "JSON" in type(err).__name__:
        return "malformed response from the server (not valid JSON)"
    return f"unexpected error ({type(err).__name__})"


def resolve_api_key(explicit: str | None, provider_var: str) -> str | None:
    """The key to use: the explicit one, else CTXCOMPACT_API_KEY, else the provider's usual variable."""
    for value in (explicit, os.environ.get("CTXCOMPACT_API_KEY"), os.environ.get(provider_var)):
        if value and value.strip():
            return value.strip()
    return None


def scrub(text: str, secrets: list[str | None]) -> str:
    """Remove any secret from a message meant for users, state or logs (belt and braces: reasons are built
    from status codes and error types, never from headers, but servers sometimes echo a key back)."""
    for s in secrets:
        if s and len(s) >= 4:
            text = text.replace(s, "***")
    return " ".join(text.split())[:300]


class ProviderSummarizer(Summarizer):
    """What the LLM summarizers share: their options, and a repr that never shows the key."""

    default_context_window: int = 200_000

    def __init__(
        self,
        *,
        model: str | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        context_window: int | None = None,
        instructions: str | None = None,
    ) -> None:
        self.model = model
        self._explicit_key = api_key
        self.base_url = base_url
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        # the summarizer's own window: its input must fit 80 % of it (README "Budget")
        self.context_window = int(context_window or self.default_context_window)
        self.instructions = instructions
        self.last_stats: Any = None  # prompt.PromptStats of the last request (what was dropped and cut)

    def __repr__(self) -> str:  # never show the key
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

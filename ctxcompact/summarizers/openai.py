"""LLM summarizer through OpenAI Chat Completions (the official ``openai`` SDK), also for any
OpenAI-compatible server (Ollama, vLLM, llama.cpp, LM Studio, gateways) through ``base_url``.

Decisions where servers differ:

- Output limit: api.openai.com gets ``max_completion_tokens`` (its reasoning models reject ``max_tokens``);
  any other server gets ``max_tokens``, the parameter every OpenAI-compatible server understands.
- Key: the explicit key, else ``CTXCOMPACT_API_KEY``, else ``OPENAI_API_KEY``. A server on this machine
  or a private network (localhost, 127.0.0.0/8, ::1, 10/8, 172.16/12, 192.168/16, ``*.local``) usually needs
  no key, so one is not demanded there and the placeholder ``not-needed`` is sent instead (the SDK refuses
  to build a client without some key). Everywhere else a missing key is an error before any work.
"""

from __future__ import annotations

import ipaddress
import os
import time
from typing import Any
from urllib.parse import urlsplit

from .. import sdk
from ..errors import SummarizerError, UsageError
from ..sdk import resolve_api_key
from ..secrets import scrub
from .base import SummaryResult, fit_summary
from .prompt import system_prompt
from .provider import ProviderSummarizer, context_overflow
from .server_window import server_window

DEFAULT_CONTEXT_WINDOW = 128_000
PLACEHOLDER_KEY = "not-needed"
OPENAI_HOST = "api.openai.com"



def is_local_url(url: str | None) -> bool:
    """True for servers on this machine or a private network (they usually need no key)."""
    if not url:
        return False
    try:
        host = (urlsplit(url).hostname or "").lower()
    except ValueError:
        return False
    if host in ("localhost", "host.docker.internal") or host.endswith((".localhost", ".local")):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_loopback or ip.is_private or ip.is_unspecified


def _is_openai_host(url: str | None) -> bool:
    if not url:
        return True
    try:
        return (urlsplit(url).hostname or "").lower() == OPENAI_HOST
    except ValueError:
        return False


class OpenAISummarizer(ProviderSummarizer):
    name = "openai"
    key_variable = "OPENAI_API_KEY"
    sdk = "openai"
    default_context_window = DEFAULT_CONTEXT_WINDOW

    @property
    def effective_base_url(self) -> str | None:
        return self.base_url or os.environ.get("OPENAI_BASE_URL") or None

    def _key(self) -> str:
        key = resolve_api_key(self._explicit_key, self.key_variable)
        if key is not None:
            return key
        if is_local_url(self.effective_base_url):
            return PLACEHOLDER_KEY
        raise SummarizerError("no API key: set OPENAI_API_KEY or CTXCOMPACT_API_KEY "
                              "(a server on localhost or a private network needs none)")

    def check(self) -> None:
        """Fail before any work when the summarizer cannot possibly run (no model, no key, bad options)."""
        if not self.model or not self.model.strip():
            raise UsageError("--summarizer openai needs --summary-model MODEL (e.g. gpt-4.1-mini, or the "
                             "name a local server knows, such as llama3.1)")
        if self.timeout <= 0:
            raise UsageError("--timeout must be greater than 0")
        if self.max_retries < 0:
            raise UsageError("--max-retries must be 0 or more")
        self._key()

    @property
    def output_param(self) -> str:
        """Which request field carries the output limit (see the module notes)."""
        return "max_completion_tokens" if _is_openai_host(self.effective_base_url) else "max_tokens"

    def discover_window(self, key: str) -> tuple[int, str] | None:
        """Ask an OpenAI-compatible server (not api.openai.com: its windows are in the models table)."""
        base = self.effective_base_url
        if not base or _is_openai_host(base):
            return None
        return server_window(base, self.model or "", key, min(self.timeout, 10.0))

    def _send(self, key: str, prompt: str, budget_tokens: int) -> SummaryResult:
        import openai

        limit: dict[str, Any] = {self.output_param: budget_tokens}
        started = time.monotonic()

        def send() -> Any:
            client = openai.OpenAI(
                api_key=key, base_url=self.base_url, timeout=self.timeout, max_retries=self.max_retries)
            return client.chat.completions.create(
                model=self.model or "",
                messages=[
                    {"role": "system", "content": system_prompt(self.context_window)},
                    {"role": "user", "content": prompt},
                ],
                **limit,
            )

        completion = sdk.call("openai", send, key=key, prefix="openai", error=SummarizerError,
                              timeout=self.timeout, max_retries=self.max_retries,
                              base_url=self.effective_base_url, special=context_overflow)
        duration = time.monotonic() - started
        return self._result(completion, budget_tokens, duration, key)

    def _result(self, completion: Any, budget_tokens: int, duration: float, key: str) -> SummaryResult:
        def fail(why: str) -> SummarizerError:
            return SummarizerError(scrub(f"openai: {why}", [key]))

        choices = getattr(completion, "choices", None)
        if not isinstance(choices, list) or not choices:
            raise fail("empty reply (no choices)")
        choice = choices[0]
        finish = getattr(choice, "finish_reason", None)
        message = getattr(choice, "message", None)
        if finish == "content_filter":
            raise fail("the reply was blocked by the content filter")
        if message is None:
            raise fail("empty reply (no message)")
        if getattr(message, "refusal", None):
            raise fail("the model refused to summarize")
        content = getattr(message, "content", None)
        if not isinstance(content, str):
            raise fail("the reply has no text content")
        text, cut = fit_summary(content, budget_tokens)
        if not text:
            raise fail("empty summary text")
        usage = getattr(completion, "usage", None)
        input_tokens = getattr(usage, "prompt_tokens", None) if usage is not None else None
        output_tokens = getattr(usage, "completion_tokens", None) if usage is not None else None
        return SummaryResult(
            text=text,
            summarizer=self.name,
            model=str(getattr(completion, "model", None) or self.model),
            input_tokens=int(input_tokens) if input_tokens is not None else None,
            output_tokens=int(output_tokens) if output_tokens is not None else None,
            duration_s=round(duration, 3),
            truncated=cut or finish == "length",
        )

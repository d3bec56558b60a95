"""LLM summarizer through Anthropic's Messages API (the official ``anthropic`` SDK).

The SDK is imported inside methods only, so ``import ctxcompact`` stays fast and works without it loaded.
Every failure becomes a :class:`~ctxcompact.errors.SummarizerError` whose message is built from the status
code and error type only, never from headers or the key, so the pipeline can record it in the state and
print it safely before falling back to the extractive summary.
"""

from __future__ import annotations

import time
from typing import Any

from .. import sdk
from ..errors import SummarizerError, UsageError
from ..sdk import resolve_api_key
from ..secrets import scrub
from .base import SummaryResult, fit_summary
from .prompt import system_prompt
from .provider import ProviderSummarizer, context_overflow

DEFAULT_CONTEXT_WINDOW = 200_000

class AnthropicSummarizer(ProviderSummarizer):
    name = "anthropic"
    key_variable = "ANTHROPIC_API_KEY"
    sdk = "anthropic"
    default_context_window = DEFAULT_CONTEXT_WINDOW

    def _key(self) -> str:
        key = resolve_api_key(self._explicit_key, self.key_variable)
        if key is None:
            raise SummarizerError("no API key: set ANTHROPIC_API_KEY or CTXCOMPACT_API_KEY")
        return key

    def check(self) -> None:
        """Fail before any work when the summarizer cannot possibly run (no model, no key, bad options)."""
        if not self.model or not self.model.strip():
            raise UsageError("--summarizer anthropic needs --summary-model MODEL (e.g. claude-sonnet-4-5)")
        if self.timeout <= 0:
            raise UsageError("--timeout must be greater than 0")
        if self.max_retries < 0:
            raise UsageError("--max-retries must be 0 or more")
        self._key()

    def _send(self, key: str, prompt: str, budget_tokens: int) -> SummaryResult:
        import anthropic

        started = time.monotonic()

        def send() -> Any:
            client = anthropic.Anthropic(
                api_key=key, base_url=self.base_url, timeout=self.timeout, max_retries=self.max_retries)
            return client.messages.create(
                model=self.model or "",
                max_tokens=budget_tokens,
                system=system_prompt(self.context_window),
                messages=[{"role": "user", "content": prompt}],
            )

        message = sdk.call("anthropic", send, key=key, prefix="anthropic", error=SummarizerError,
                           timeout=self.timeout, max_retries=self.max_retries, base_url=self.base_url,
                           special=context_overflow)
        duration = time.monotonic() - started
        return self._result(message, budget_tokens, duration, key)

    def _result(self, message: Any, budget_tokens: int, duration: float, key: str) -> SummaryResult:
        def fail(why: str) -> SummarizerError:
            return SummarizerError(scrub(f"anthropic: {why}", [key]))

        stop = getattr(message, "stop_reason", None)
        if stop == "refusal":
            raise fail("the model refused to summarize (stop_reason refusal)")
        content = getattr(message, "content", None)
        if not isinstance(content, list) or not content:
            raise fail("empty reply (no content)")
        texts = [b.text for b in content
                 if getattr(b, "type", None) == "text" and isinstance(getattr(b, "text", None), str)]
        if not texts:
            kinds = sorted({str(getattr(b, "type", "?")) for b in content})
            raise fail(f"the reply has no text block ({', '.join(kinds)})")
        text, cut = fit_summary("\n".join(texts), budget_tokens)
        if not text:
            raise fail("empty summary text")
        usage = getattr(message, "usage", None)
        input_tokens = output_tokens = None
        if usage is not None:
            # prompt tokens as billed: uncached input + cache writes + cache reads
            input_tokens = sum(int(getattr(usage, f, None) or 0) for f in (
                "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
            output_tokens = getattr(usage, "output_tokens", None)
        return SummaryResult(
            text=text,
            summarizer=self.name,
            model=str(getattr(message, "model", None) or self.model),
            input_tokens=input_tokens,
            output_tokens=int(output_tokens) if output_tokens is not None else None,
            duration_s=round(duration, 3),
            truncated=cut or stop == "max_tokens",
        )


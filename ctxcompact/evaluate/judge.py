"""`eval --judge anthropic|openai` (optional, off by default): ask a model each probe's ``question`` against
the compacted context and grade its answer against the probe's ``expect``
(docs/guides/eval.md#the-judge-judge), through the same providers, keys and ``--base-url`` as the
summarizers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import sdk
from ..errors import SummarizerError, UsageError
from ..options import Options
from ..summarizers.openai import PLACEHOLDER_KEY, is_local_url
from .probes import Probe

SYSTEM = (
    "You answer questions about an agent's conversation using only the context given. "
    "Answer in one short sentence; say 'unknown' when the context does not say."
)


def _ask_openai(opts: Options, prompt: str) -> str:
    import openai

    key = sdk.resolve_api_key(opts.api_key, "OPENAI_API_KEY") or (
        PLACEHOLDER_KEY if is_local_url(opts.base_url) else None
    )
    if key is None:
        raise UsageError("--judge openai: no API key (set OPENAI_API_KEY or CTXCOMPACT_API_KEY)")

    def send() -> Any:
        client = openai.OpenAI(api_key=key, base_url=opts.base_url, timeout=opts.timeout,
                               max_retries=opts.max_retries)
        return client.chat.completions.create(
            model=opts.summary_model or "",
            messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}],
        )

    completion = sdk.call("openai", send, key=key, prefix="--judge openai", error=SummarizerError,
                          timeout=opts.timeout, max_retries=opts.max_retries, base_url=opts.base_url)
    return str(completion.choices[0].message.content or "")


def _ask_anthropic(opts: Options, prompt: str) -> str:
    import anthropic

    key = sdk.resolve_api_key(opts.api_key, "ANTHROPIC_API_KEY")
    if key is None:
        raise UsageError("--judge anthropic: no API key (set ANTHROPIC_API_KEY or CTXCOMPACT_API_KEY)")

    def send() -> Any:
        client = anthropic.Anthropic(api_key=key, base_url=opts.base_url, timeout=opts.timeout,
                                     max_retries=opts.max_retries)
        return client.messages.create(
            model=opts.summary_model or "",
            max_tokens=200,
            system=SYSTEM,
            messages=[{"role": "user", "content": prompt}],
        )

    message = sdk.call("anthropic", send, key=key, prefix="--judge anthropic", error=SummarizerError,
                       timeout=opts.timeout, max_retries=opts.max_retries, base_url=opts.base_url)
    return "".join(getattr(b, "text", "") for b in message.content)


#: how each provider is asked, by its name in ``sdk.PROVIDERS`` (the names ``--judge`` takes)
ASK = {"anthropic": _ask_anthropic, "openai": _ask_openai}


def judge(provider: str, probes: Sequence[Probe], context: str, opts: Options) -> dict[str, Any]:
    """Each probe with a question, asked against ``context``; correct when the answer holds ``expect``
    (case-insensitive) or matches ``expect_regex``."""
    ask = ASK.get(provider)
    if ask is None:
        raise UsageError(f"judge {provider!r}: expected one of {', '.join(ASK)}")
    if not opts.summary_model:
        raise UsageError(f"--judge {provider} needs --summary-model MODEL")
    answers = []
    for p in probes:
        if not p.question:
            continue
        answer = ask(opts, f"<context>\n{context}\n</context>\n\nQuestion: {p.question}")
        correct = (p.expect.lower() in answer.lower()) if p.expect is not None else p.found_in(answer)
        answers.append({"question": p.question, "expect": p.label, "answer": answer, "correct": correct})
    return {
        "provider": provider,
        "asked": len(answers),
        "correct": sum(a["correct"] for a in answers),
        "answers": answers,
    }

"""Credentials never leave in what ctxcompact composes
(docs/reference/safety.md#credentials-in-what-ctxcompact-writes).

A transcript quotes keys: a user pastes one, a tool prints an environment, a command calls an API with its key
in the URL. The transcript's own records pass through as they are (they are the user's data); everything
ctxcompact writes of its own — summaries, the state's facts and latest request, the continuation, ``eval``
output, error messages, warnings and repairs — goes through :func:`scrub_credentials`, which replaces each
credential by ``***`` and changes nothing else. :func:`redact` removes known values (the key in use), and
:func:`scrub` makes a one-line message of at most 300 characters with both.

Recognised: OpenAI and Anthropic keys (``sk-…``, ``sk-proj-…``, ``sk-ant-…``), GitHub tokens (``ghp_…``,
``gho_…``, ``ghu_…``, ``ghs_…``, ``ghr_…``, ``github_pat_…``), AWS access key ids, Google API keys, Slack
tokens, JSON Web Tokens, ``Bearer``/``Token`` credentials, ``key=value`` pairs whose key names a secret
(``api_key``, ``token``, ``password``, ``authorization``…) and the password of a URL's ``user:password@``.
Every pattern is bounded and starts at a fixed prefix: the scan is linear in the text.
"""

from __future__ import annotations

import functools
import re
from typing import Any

MASK = "***"

_TOKEN = (
    r"\bsk-(?:ant-|proj-|svcacct-|admin-|live-|test-)?[A-Za-z0-9_\-]{20,}"  # OpenAI, Anthropic
    r"|\bgh[pousr]_[A-Za-z0-9]{30,}"  # GitHub tokens
    r"|\bgithub_pat_[A-Za-z0-9_]{30,}"
    r"|\bAKIA[0-9A-Z]{16}\b"  # AWS access key id
    r"|\bAIza[0-9A-Za-z_\-]{35}"  # Google API key
    r"|\bxox[abposr]-[A-Za-z0-9\-]{10,}"  # Slack
    r"|\beyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}"  # a JSON Web Token
)
# a credential after a word that announces it: the word stays, the value goes. Names are bounded (a run of
# ``a-a-a…`` would otherwise be rescanned from every hyphen)
_NAMES = (r"api[_\-]?key|apikey|secret|secret[_\-]?key|client[_\-]?secret|passwd|password|private[_\-]?key"
          r"|auth[_\-]?token|access[_\-]?token|refresh[_\-]?token|authorization|x-api-key")
_ANNOUNCED = (
    r"(?P<head>(?i:\b(?:bearer|token|basic)\s{1,3}))(?P<value>[A-Za-z0-9._~+/=\-]{16,})"
    # NAME: value, NAME=value, "NAME": "value"; a prefix joined by _ or - (OPENAI_API_KEY, GITHUB_TOKEN)
    r"|(?P<head2>(?i:\b(?:[a-z0-9]{1,30}[_\-]){0,3}(?:" + _NAMES + r"|(?<=[_\-])token)"
    r"[\"']?\s{0,3}[:=]\s{0,3}[\"']?))(?!(?i:bearer|basic|token)\s)(?P<value2>[^\s\"'&,;<>)\]}]{6,})"
    # a URL's query parameter that carries a key
    r"|(?P<head4>[?&](?i:key|token|sig|signature|api_key|apikey|access_token|auth|secret|password)=)"
    r"(?P<value4>[^\s&#\"'<>]{6,})"
    # the password in a URL's user:password@
    r"|(?P<head3>\b[a-zA-Z][\w+.\-]{0,20}://[^\s/:@\"'<>]{1,200}:)(?P<value3>[^\s@/\"'<>]{1,200})(?=@)"
)


@functools.cache
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """(every credential, what each of them needs), compiled on first use: compiling cost every process
    ~2 ms, and a hook's usual call has no message to scrub."""
    credential = re.compile(f"{_TOKEN}|{_ANNOUNCED}")
    # every pattern above needs one of these: most text has none, and one literal scan is much cheaper
    trigger = re.compile(r"sk-|gh[pousr]_|github_pat_|AKIA|AIza|xox|eyJ|bearer|token|basic|://|[:=]", re.I)
    return credential, trigger


def _replace(m: re.Match[str]) -> str:
    for head in ("head", "head2", "head3", "head4"):
        if m.group(head) is not None:
            value = m.group("value" if head == "head" else "value" + head[-1])
            if value == MASK or set(value) <= {"*"}:
                return m.group(0)  # already scrubbed
            return m.group(head) + MASK
    return MASK


def scrub_credentials(text: str) -> str:
    """``text`` with every credential it quotes replaced by ``***`` (see the module docstring)."""
    if not text:
        return text
    if len(text) <= 2_000:  # the facts carried from one summary to the next repeat their strings
        return _scrub_short(text)
    return _scrub(text)


def _scrub(text: str) -> str:
    credential, trigger = _patterns()
    if trigger.search(text) is None:
        return text
    return credential.sub(_replace, text)


# remembered before the trigger's search too: a sliding window's first run scrubs the carried rules once per
# event, and the search (an alternation under re.I) is most of a short text's cost
_scrub_short = functools.lru_cache(maxsize=16_384)(_scrub)


def scrub_json(value: Any) -> Any:
    """A JSON-like value (dicts, lists, strings) with every string scrubbed; keys too."""
    if isinstance(value, str):
        return scrub_credentials(value)
    if isinstance(value, dict):
        return {scrub_credentials(k) if isinstance(k, str) else k: scrub_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub_json(v) for v in value]
    if isinstance(value, tuple):
        return tuple(scrub_json(v) for v in value)
    return value


def redact(text: str, secrets: list[str | None]) -> str:
    """``text`` with every known secret value replaced by ``***`` and nothing else changed."""
    for s in secrets:
        if s and len(s) >= 4:
            text = text.replace(s, MASK)
    return text


def scrub(text: str, secrets: list[str | None]) -> str:
    """A message meant for users, state or logs: the known secrets and every recognised credential removed
    (belt and braces: reasons are built from status codes and error types, never from headers, but servers
    sometimes echo a key back), on one line of at most 300 characters."""
    return " ".join(scrub_credentials(redact(text, secrets)).split())[:300]

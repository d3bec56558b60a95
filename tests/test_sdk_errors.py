"""SDK errors are mapped to safe messages in one place (``ctxcompact.sdk.call``) for every SDK call site:
the two summarizers, ``--exact anthropic``'s token count and ``eval --judge``. Each call site is driven
through the real SDK against a 127.0.0.1 server whose error body echoes the key; the message must not hold
the key (not even OpenAI's partial echo), must be one line of at most 300 characters, must carry no SDK
exception as its context or cause, and must read the same at every call site of one provider."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from providers import ProviderServer, Reply, anthropic_error, openai_error

from ctxcompact import sdk
from ctxcompact.errors import SummarizerError
from ctxcompact.evaluate.judge import judge
from ctxcompact.evaluate.probes import Probe
from ctxcompact.model import Message, Origin, Record, Role, TextBlock
from ctxcompact.options import Options
from ctxcompact.summarizers.anthropic import AnthropicSummarizer
from ctxcompact.summarizers.base import SummaryRequest
from ctxcompact.summarizers.openai import OpenAISummarizer
from ctxcompact.tokens.provider import ProviderCountError, anthropic_count_tokens

KEY = "sk-proj-PLANTED-0123456789abcdefghijKLMNOP"
PARTIAL = "sk-proj-***MNOP"  # the way OpenAI's 401 echoes a key: its ends


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ProviderServer]:
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY",
                "OPENAI_BASE_URL", "CTXCOMPACT_API_KEY", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
                "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    with ProviderServer() as s:
        yield s


def _request() -> SummaryRequest:
    rec = Record(index=0, line=1, raw=None, data=None, origin=Origin.INPUT,
                 message=Message(role=Role.USER, blocks=[TextBlock("fix the test — ünïcode")]))
    return SummaryRequest(records=[rec], budget_tokens=500)


def _judge_opts(base: str) -> Options:
    return Options(summary_model="judge-test", base_url=base, api_key=KEY, max_retries=0, timeout=5.0)


PROBES = [Probe(1, expect="x", question="what?")]

# call site -> (provider, prefix of its messages, the call)
SITES: dict[str, tuple[str, str, Callable[[ProviderServer], object]]] = {
    "summarizer anthropic": ("anthropic", "anthropic", lambda s: AnthropicSummarizer(
        model="m", api_key=KEY, base_url=s.url, max_retries=0, timeout=5.0).summarize(_request())),
    "summarizer openai": ("openai", "openai", lambda s: OpenAISummarizer(
        model="m", api_key=KEY, base_url=s.openai_url, max_retries=0, timeout=5.0).summarize(_request())),
    "exact anthropic": ("anthropic", "--exact anthropic: token count failed",
                        lambda s: anthropic_count_tokens([{"role": "user", "content": "hi"}], None, "m",
                                                         api_key=KEY, base_url=s.url, max_retries=0)),
    "judge anthropic": ("anthropic", "--judge anthropic",
                        lambda s: judge("anthropic", PROBES, "context", _judge_opts(s.url))),
    "judge openai": ("openai", "--judge openai",
                     lambda s: judge("openai", PROBES, "context", _judge_opts(s.openai_url))),
}


def _echo(provider: str, status: int) -> Reply:
    text = f"Incorrect API key provided: {PARTIAL}. You sent Authorization: Bearer {KEY} to this model"
    return anthropic_error(status, text) if provider == "anthropic" else openai_error(status, text)


def _failure(site: str, server: ProviderServer, status: int) -> str:
    provider, prefix, run = SITES[site]
    server.push(_echo(provider, status))
    with pytest.raises((SummarizerError, ProviderCountError)) as info:
        run(server)
    err = info.value
    assert err.__context__ is None and err.__cause__ is None  # no SDK exception attached to show
    message = str(err)
    assert message.startswith(f"{prefix}: HTTP {status}")
    return message.removeprefix(f"{prefix}: ")


# a 413 is a context-length error to a summarizer (retried smaller, tested in test_summarizer_window.py)
CASES = [(site, status) for site in sorted(SITES) for status in (400, 401, 403, 404, 413, 429, 500, 529)
         if not (status == 413 and site.startswith("summarizer"))]


@pytest.mark.parametrize(("site", "status"), CASES)
def test_an_error_echoing_the_key_is_safe_at_every_call_site(site: str, status: int,
                                                             server: ProviderServer) -> None:
    reason = _failure(site, server, status)
    assert KEY not in reason and "PLANTED" not in reason
    assert "\n" not in reason and len(reason) <= 300
    if SITES[site][0] == "openai":  # OpenAI's messages are never shown: its 401 echoes the key's ends
        assert PARTIAL not in reason and "Incorrect API key" not in reason


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
@pytest.mark.parametrize("status", [400, 404, 500])
def test_one_provider_reads_the_same_everywhere(provider: str, status: int, server: ProviderServer) -> None:
    reasons = {site: _failure(site, server, status) for site, (p, _, _) in SITES.items() if p == provider}
    assert len(reasons) >= 2 and len(set(reasons.values())) == 1, reasons


def test_call_returns_the_answer_and_maps_any_other_failure(server: ProviderServer) -> None:
    assert sdk.call("openai", lambda: 42, key=KEY, prefix="p", error=SummarizerError, timeout=1,
                    max_retries=0, base_url=None) == 42

    def boom() -> None:
        raise KeyError(KEY)

    with pytest.raises(SummarizerError) as info:
        sdk.call("anthropic", boom, key=KEY, prefix="p", error=SummarizerError, timeout=1, max_retries=0,
                 base_url=None)
    assert str(info.value) == "p: unexpected error (KeyError)" and info.value.__context__ is None


def test_a_connection_failure_names_the_host_only(server: ProviderServer) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://user:{KEY}@127.0.0.1:{port}/v1?token={KEY}"
    opts = Options(summary_model="m", base_url=url, api_key=KEY, max_retries=0, timeout=2.0)
    with pytest.raises(SummarizerError) as info:
        judge("openai", PROBES, "context", opts)
    assert str(info.value) == f"--judge openai: cannot connect to 127.0.0.1:{port}"

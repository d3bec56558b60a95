"""The summarizer's own window: --summary-window, the models table and config for --summary-model, what an
OpenAI-compatible server reports (vLLM's max_model_len, llama.cpp's /props n_ctx), and the one retry after a
context-length error, against a loopback server speaking the OpenAI wire format."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from helpers import coding_session, ctxcompact, jsonl, sys_msg, user
from hypothesis import given, settings
from hypothesis import strategies as st
from providers import (
    CHAT,
    ProviderServer,
    Reply,
    anthropic_error,
    openai_completion,
    openai_context_error,
    openai_error,
)

from ctxcompact.budget import buffer_for, summary_budget_for
from ctxcompact.errors import SummarizerError
from ctxcompact.model import Message, Origin, Record, Role, TextBlock
from ctxcompact.options import Options
from ctxcompact.summarizers import summary_window
from ctxcompact.summarizers.anthropic import AnthropicSummarizer
from ctxcompact.summarizers.base import SummaryRequest
from ctxcompact.summarizers.openai import OpenAISummarizer
from ctxcompact.summarizers.prompt import (
    INPUT_CHARS_PER_TOKEN,
    build_user_prompt,
    chunk_records,
    input_budget,
)
from ctxcompact.summarizers.server_window import window_in_models, window_in_props

BUDGET = summary_budget_for(buffer_for(8_000))  # 800


@pytest.fixture(autouse=True)
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "CTXCOMPACT_API_KEY", "HTTP_PROXY", "HTTPS_PROXY",
                "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy", "CTXCOMPACT_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


def records(n: int = 40, chars: int = 900) -> list[Record]:
    return [Record(index=i, line=i + 1, raw=None, data=None, origin=Origin.INPUT,
                   message=Message(role=Role.USER if i % 2 == 0 else Role.ASSISTANT,
                                   blocks=[TextBlock(f"message {i} about src/mod_{i}.py " + "z" * chars)]))
            for i in range(n)]


def request(n: int = 40) -> SummaryRequest:
    return SummaryRequest(records=records(n), budget_tokens=BUDGET)


def summarizer(server: ProviderServer, **kw: object) -> OpenAISummarizer:
    opts: dict[str, object] = dict(model="smollm2", base_url=server.openai_url, max_retries=0, timeout=5.0)
    opts.update(kw)
    return OpenAISummarizer(**opts)  # type: ignore[arg-type]


def fits(body: dict, window: int) -> bool:
    prompt = body["messages"][1]["content"]
    return -(-len(prompt) // INPUT_CHARS_PER_TOKEN) <= input_budget(window, BUDGET)


# --- where the window comes from ----------------------------------------------------------------------

def test_window_sources_in_order(tmp_path: Path) -> None:
    given = Options(summary_model="gpt-4o-mini", summary_window=4096)
    assert summary_window(given) == (4096, "--summary-window")
    assert summary_window(Options(summary_model="gpt-4o-mini"))[1] == "model:gpt-4o-mini"
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"models": {"smollm2": 8192}}))
    assert summary_window(Options(summary_model="smollm2", config_path=config)) == (8192, "config:smollm2")
    assert summary_window(Options(summary_model="smollm2")) == (None, None)  # unknown: ask the server
    assert summary_window(Options()) == (None, None)


def test_vllm_max_model_len_is_read_and_respected() -> None:
    with ProviderServer() as server:
        server.get_routes["/v1/models"] = Reply(200, {"object": "list", "data": [
            {"id": "other", "object": "model", "max_model_len": 131072},
            {"id": "smollm2", "object": "model", "owned_by": "vllm", "max_model_len": 8192}]})
        s = summarizer(server)
        result = s.summarize(request(20))
        assert (s.context_window, s.window_source) == (8192, "server: /models max_model_len")
        assert all(fits(r.body, 8192) for r in server.requests_to(CHAT))
        assert result.chunks == len(server.requests_to(CHAT)) >= 2


def test_llama_cpp_props_n_ctx_wins_over_the_training_window() -> None:
    with ProviderServer() as server:
        server.get_routes["/v1/models"] = Reply(200, {"object": "list", "data": [
            {"id": "smollm2", "object": "model", "meta": {"n_ctx_train": 8192, "n_vocab": 49152}}]})
        server.get_routes["/props"] = Reply(200, {"default_generation_settings": {"n_ctx": 4096}})
        s = summarizer(server)
        s.summarize(request(10))
        assert (s.context_window, s.window_source) == (4096, "server: /props n_ctx")
        assert server.gets == ["/v1/models", "/props"]


def test_a_given_window_asks_the_server_nothing() -> None:
    with ProviderServer() as server:
        s = summarizer(server, context_window=6000, window_source="--summary-window")
        s.summarize(request(10))
        assert server.gets == [] and all(fits(r.body, 6000) for r in server.requests_to(CHAT))


@pytest.mark.parametrize(("body", "expected"), [
    ({"data": [{"id": "m", "max_model_len": 4096}]}, (4096, None, "max_model_len")),
    ({"data": [{"id": "x", "loaded_context_length": 2048}]}, (2048, None, "loaded_context_length")),
    ({"data": [{"id": "a"}, {"id": "b", "max_model_len": 5}]}, (None, None, None)),  # neither is "m"
    ({"data": [{"id": "m", "meta": {"n_ctx_train": 8192}}]}, (None, 8192, None)),
    ({"data": [{"id": "m", "max_model_len": True}]}, (None, None, None)),
    ({"data": "nope"}, (None, None, None)),
    ([], (None, None, None)),
    (None, (None, None, None)),
])
def test_models_replies(body: object, expected: tuple) -> None:
    assert window_in_models(body, "m") == expected


def test_props_replies() -> None:
    assert window_in_props({"default_generation_settings": {"n_ctx": 4096}}) == 4096
    assert window_in_props({"n_ctx": 2048}) == 2048
    assert window_in_props({"default_generation_settings": {"n_ctx": -1}}) is None
    assert window_in_props("x") is None


# --- the context-length error and the one retry -------------------------------------------------------

def test_context_length_error_is_retried_once_within_the_named_window() -> None:
    with ProviderServer() as server:
        server.push(openai_context_error(4096))
        s = summarizer(server)  # nothing reported: the default 128k window, far too big
        result = s.summarize(request(30))
        sent = server.requests_to(CHAT)
        assert len(sent) >= 3  # the rejected one, then chunks that fit 4,096
        assert not fits(sent[0].body, 4096)
        assert all(fits(r.body, 4096) for r in sent[1:])
        assert result.chunks == len(sent) - 1
        assert (s.context_window, s.window_source) == (4096, "the server's context-length error")


def test_context_length_error_without_a_number_halves_what_was_sent() -> None:
    with ProviderServer() as server:
        server.push(openai_context_error(None))
        s = summarizer(server, context_window=32_000)
        s.summarize(request(30))
        sent = server.requests_to(CHAT)
        first = len(sent[0].body["messages"][1]["content"])
        assert all(len(r.body["messages"][1]["content"]) <= first // 2 for r in sent[1:])
        assert s.context_window is not None and s.context_window < 32_000 // 2


def test_a_second_context_length_error_gives_up() -> None:
    with ProviderServer() as server:
        server.push(openai_context_error(4096), openai_context_error(2048))
        with pytest.raises(SummarizerError, match="also after cutting the input to fit a 4,096-token window"):
            summarizer(server).summarize(request(30))


def test_other_400s_are_not_retried() -> None:
    with ProviderServer() as server:
        server.push(openai_error(400, "temperature must be positive"))
        with pytest.raises(SummarizerError, match="HTTP 400"):
            summarizer(server).summarize(request(5))
        assert len(server.requests_to(CHAT)) == 1


def test_anthropic_prompt_too_long_is_retried() -> None:
    with ProviderServer() as server:
        server.push(anthropic_error(400, "prompt is too long: 250000 tokens > 8000 maximum"))
        s = AnthropicSummarizer(model="claude-x", api_key="k", base_url=server.url, max_retries=0, timeout=5)
        s.summarize(request(20))
        sent = server.requests_to("/v1/messages")
        assert len(sent) >= 2 and s.context_window == 8000


# --- the CLI --------------------------------------------------------------------------------------------

def test_run_summary_window_flag_chunks_and_records_it(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"
    log.write_bytes(jsonl([sys_msg("You are a coding agent."), *coding_session(14), user("Carry on.")]))
    with ProviderServer() as server:
        for n in range(12):
            server.push(openai_completion(f"## Timeline\n- explained handle_{n} in src/module_{n}.py",
                                          prompt_tokens=3000, completion_tokens=50))
        proc = ctxcompact("run", str(log), "--window", "32000", "--threshold", "1000", "--summarizer",
                          "openai", "--summary-model", "smollm2", "--summary-window", "8192", "--base-url",
                          server.openai_url, "-o", str(tmp_path / "o.jsonl"),
                          env={"NO_PROXY": "127.0.0.1,localhost", "OPENAI_API_KEY": "", "HTTP_PROXY": ""})
        sent = server.requests_to(CHAT)
        gets = list(server.gets)
    assert proc.returncode == 0, proc.stderr
    assert gets == [] and len(sent) >= 2
    budget = sent[0].body["max_tokens"]
    assert budget == 8192 // 5  # a fifth of the summarizer's window, not the 3,200 of the 32k one
    for r in sent:
        prompt = r.body["messages"][1]["content"]
        assert -(-len(prompt) // INPUT_CHARS_PER_TOKEN) <= input_budget(8192, budget)
    summary = orjson.loads((tmp_path / "s.jsonl.ctxstate.json").read_bytes())["summary"]
    assert summary["chunks"] == len(sent)
    assert (summary["window"], summary["window_source"]) == (8192, "--summary-window")
    assert (summary["input_tokens"], summary["output_tokens"]) == (3000 * len(sent), 50 * len(sent))
    assert f"8,192-token window (--summary-window); {len(sent)} chunks" in proc.stderr.decode()


# --- chunking: an invariant ------------------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=20_000), min_size=0, max_size=30),
       st.integers(min_value=1_000, max_value=6_000), st.integers(min_value=0, max_value=8_000))
def test_chunks_keep_every_record_once_in_order_and_fit(sizes: list[int], budget: int, prior: int) -> None:
    recs = [Record(index=i, line=i + 1, raw=None, data=None, origin=Origin.INPUT,
                   message=Message(role=Role.USER, blocks=[TextBlock(f"m{i} " + "q" * n)]))
            for i, n in enumerate(sizes)]
    req = SummaryRequest(records=recs, budget_tokens=300, prior_summary="p" * prior or None,
                         latest_request="do the thing")
    chunks = chunk_records(req, budget)
    assert [r.index for c in chunks for r in c] == list(range(len(sizes)))
    assert all(chunks) or chunks == [[]]
    for k, chunk in enumerate(chunks):  # each request, with the summary carried so far, fits its budget
        carried = req.prior_summary if k == 0 else "s" * 300 * 4
        prompt, _ = build_user_prompt(SummaryRequest(records=chunk, budget_tokens=300, prior_summary=carried,
                                                     latest_request="do the thing"), budget)
        assert -(-len(prompt) // INPUT_CHARS_PER_TOKEN) <= budget
        if len(chunk) > 1:  # several records share a request only when they fit it uncut
            _, stats = build_user_prompt(SummaryRequest(records=chunk, budget_tokens=300,
                                                        prior_summary=carried,
                                                        latest_request="do the thing"), budget)
            assert stats.records_dropped == 0

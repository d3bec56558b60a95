"""The LiteLLM adapter driven by LiteLLM itself against a fake OpenAI-compatible server on 127.0.0.1 that
speaks the real wire format (no network): ``litellm.acompletion`` with the adapter in ``litellm.callbacks``,
``litellm.completion`` with ``compaction.compact`` / ``observe``, and LiteLLM's proxy started with the adapter
in its config.yaml ``callbacks:``. The client keeps its whole history (as a LiteLLM user does) and runs the
tool calls; across a long session the window is never exceeded by what the server receives (counted by the
fake model's own tokenizer), the user's rule and the latest request survive three compactions, every tool
call keeps its result, the result the model just asked for is visible, and the usage the server reports
calibrates the next call."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch of the price list at import
litellm = pytest.importorskip("litellm", reason="the litellm extra is not installed")
from providers import ProviderServer, Received, Reply  # noqa: E402

import ctxcompact.messages  # noqa: E402
from ctxcompact.integrations.litellm import Compaction  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning")  # pydantic on LiteLLM's types

RULE = "Rule: never push to main; always run the tests before committing."
SYSTEM = "You are a coding agent."
WINDOW = 6_000
MODEL = "openai/gpt-test"
TOOLS = [{"type": "function", "function": {"name": "read_file", "description": "Read a file.", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]


def read_file(path: str) -> str:
    return f"# {path}\n" + f"def handler_{path.replace('/', '_')}(x):\n    return x * 2\n" * 40


def _json(messages: list[Any]) -> str:
    return orjson.dumps(messages).decode()


def _tokens(messages: list[Any]) -> int:
    """The fake model's tokenizer: one token per 3.5 bytes of the messages' JSON."""
    return int(len(orjson.dumps(messages)) / 3.5)


class Upstream:
    """The scripted model behind the fake server: a read_file call for the file the latest user message names,
    then an answer; records every request; reports its own count of it as prompt_tokens (a cached part
    included, as OpenAI does)."""

    def __init__(self, server: ProviderServer, cache: int = 0) -> None:
        self.server, self.cache = server, cache
        self.seen: list[list[dict[str, Any]]] = []
        self._lock = threading.Lock()
        server.push(*(Reply(200, self.respond) for _ in range(2_000)))

    def respond(self, request: Received) -> dict[str, Any]:
        messages = request.body["messages"]
        with self._lock:
            self.seen.append(messages)
            n = len(self.seen)
        last = messages[-1]
        if last["role"] == "tool":
            message: dict[str, Any] = {"role": "assistant", "content": "It doubles its input."}
            finish = "stop"
        else:
            path = next(w.strip(".") for w in str(last["content"]).split() if w.startswith("src/"))
            message = {"role": "assistant", "content": None, "tool_calls": [{
                "id": f"call_{n}", "type": "function",
                "function": {"name": "read_file", "arguments": orjson.dumps({"path": path}).decode()}}]}
            finish = "tool_calls"
        prompt = _tokens(messages) + self.cache
        return {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": int(time.time()),
                "model": "gpt-test", "choices": [{"index": 0, "message": message, "finish_reason": finish,
                                                  "logprobs": None}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": 5, "total_tokens": prompt + 5,
                          "prompt_tokens_details": {"cached_tokens": self.cache}}}

    def of(self, rule: str) -> list[list[dict[str, Any]]]:
        """The requests of the conversation whose rule this is."""
        return [m for m in self.seen if rule in orjson.dumps(m).decode()]


def _ask(t: int, rule: str) -> str:
    return f"{rule} Start with src/m0.py." if t == 0 else f"Now explain src/m{t}.py."


Call = Callable[[list[dict[str, Any]]], Awaitable[Any]]


async def _conversation(call: Call, turns: int, rule: str = RULE) -> list[dict[str, Any]]:
    """An agent loop over chat completions: the client keeps its whole history and runs the tools."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    for t in range(turns):
        messages.append({"role": "user", "content": _ask(t, rule)})
        while True:
            msg = (await call(list(messages))).choices[0].message
            if not msg.tool_calls:
                messages.append({"role": "assistant", "content": msg.content})
                break
            calls = [{"id": c.id, "type": "function",
                      "function": {"name": c.function.name, "arguments": c.function.arguments}}
                     for c in msg.tool_calls]
            messages.append({"role": "assistant", "content": msg.content, "tool_calls": calls})
            for c in calls:
                args = orjson.loads(c["function"]["arguments"])
                messages.append({"role": "tool", "tool_call_id": c["id"], "content": read_file(**args)})
    return messages


def _check(seen: list[list[dict[str, Any]]], turns: int, rule: str = RULE) -> None:
    assert len(seen) == 2 * turns
    for k, sent in enumerate(seen):
        text = orjson.dumps(sent).decode()
        assert _tokens(sent) <= WINDOW, f"request {k}: {_tokens(sent)} tokens"
        assert rule.split(";")[0] in text, f"request {k} lost the rule"
        assert sent[0] == {"role": "system", "content": SYSTEM}, f"request {k} lost the system prompt"
        ids = {c["id"] for m in sent for c in m.get("tool_calls") or []}
        answered = {m["tool_call_id"] for m in sent if m["role"] == "tool"}
        assert ids <= answered, f"request {k}: a tool call without its result"
    for t in range(1, turns):
        for k in (2 * t, 2 * t + 1):
            assert f"Now explain src/m{t}.py." in _json(seen[k]), f"request {k}: no latest ask"
        assert f"handler_src_m{t}.py" in _json(seen[2 * t + 1]), f"turn {t}: the result is not visible"


class Recording(Compaction):
    """Records the estimate of every call (what calibration is checked on)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.estimates: list[int] = []

    async def acompact(self, messages: list[Any], **kwargs: Any) -> list[Any]:
        out = await super().acompact(messages, **kwargs)
        assert self.last is not None
        self.estimates.append(self.last.tokens_before)
        return out

    def compact(self, messages: list[Any], **kwargs: Any) -> list[Any]:
        out = super().compact(messages, **kwargs)
        assert self.last is not None
        self.estimates.append(self.last.tokens_before)
        return out


@pytest.fixture
def provider_server() -> Iterator[ProviderServer]:
    with ProviderServer() as server:
        yield server


@pytest.fixture
def callbacks() -> Iterator[list[Any]]:
    saved = list(litellm.callbacks)
    yield litellm.callbacks
    litellm.callbacks[:] = saved


def _sdk(server: ProviderServer) -> Call:
    async def call(messages: list[dict[str, Any]]) -> Any:
        return await litellm.acompletion(model=MODEL, api_base=server.openai_url, api_key="k",
                                         messages=messages, tools=TOOLS)
    return call


def _check_calibration(estimates: list[int], billed: list[int]) -> None:
    assert len(estimates) == len(billed)
    for k in range(1, len(billed)):  # what was billed is the floor of the next estimate
        assert estimates[k] >= billed[k - 1], (k, estimates, billed)
    for k in range(2, len(billed)):  # and once calibrated the estimate is the model's count, not 5,000 over
        assert abs(estimates[k] - billed[k]) < 1_000, (k, estimates, billed)


# --------------------------------------------------------------------------------------------- the SDK


def test_acompletion_loop(provider_server: ProviderServer, callbacks: list[Any]) -> None:
    turns = 24
    upstream = Upstream(provider_server)
    compaction = Compaction(window=WINDOW)
    callbacks.append(compaction)
    history = asyncio.run(_conversation(_sdk(provider_server), turns))
    _check(upstream.seen, turns)
    state = compaction.session_for(history).state
    assert state is not None and len(state.compactions) >= 3
    assert len(history) == 1 + 4 * turns  # the client's own history stays whole


def test_acompletion_usage_calibrates_the_next_call(provider_server: ProviderServer,
                                                    callbacks: list[Any]) -> None:
    """prompt_tokens holds the cached tokens (OpenAI, and LiteLLM's normalised usage): not counted twice."""
    upstream = Upstream(provider_server, cache=5_000)
    compaction = Recording(window=200_000)
    callbacks.append(compaction)
    asyncio.run(_conversation(_sdk(provider_server), 4))
    _check_calibration(compaction.estimates, [_tokens(m) + 5_000 for m in upstream.seen])


def test_completion_sync_with_compact_and_observe(provider_server: ProviderServer) -> None:
    """litellm.completion runs no hook that can change the request: compact() and observe() around it."""
    turns = 24
    upstream = Upstream(provider_server)
    compaction = Recording(window=WINDOW)

    async def call(messages: list[dict[str, Any]]) -> Any:
        response = litellm.completion(model=MODEL, api_base=provider_server.openai_url, api_key="k",
                                      messages=compaction.compact(messages), tools=TOOLS)
        compaction.observe(response)
        return response

    asyncio.run(_conversation(call, turns))
    _check(upstream.seen, turns)
    state = compaction.session_for(upstream.seen[0]).state
    assert state is not None and len(state.compactions) >= 3 and state.calibration.points
    billed = [_tokens(m) for m in upstream.seen]
    assert all(compaction.estimates[k] >= billed[k - 1] for k in range(1, len(billed)))


def test_two_conversations_share_nothing(provider_server: ProviderServer, callbacks: list[Any]) -> None:
    """One instance serves every conversation (as in the proxy): each has its own session, by its opening or
    by litellm_session_id."""
    turns = 12
    upstream = Upstream(provider_server)
    compaction = Compaction(window=WINDOW)
    callbacks.append(compaction)
    rules = [RULE, "Rule: answer in French; never touch the database.", "Rule: use tabs; never log secrets."]

    def named(session_id: str) -> Call:
        async def call(messages: list[dict[str, Any]]) -> Any:
            return await litellm.acompletion(model=MODEL, api_base=provider_server.openai_url, api_key="k",
                                             messages=messages, tools=TOOLS, litellm_session_id=session_id)
        return call

    async def all_three() -> None:
        await asyncio.gather(_conversation(_sdk(provider_server), turns, rules[0]),
                             _conversation(_sdk(provider_server), turns, rules[1]),
                             _conversation(named("conversation-3"), turns, rules[2]))

    asyncio.run(all_three())
    for rule in rules:
        mine = upstream.of(rule.split(";")[0])
        assert len(mine) == 2 * turns
        others = [r.split(";")[0] for r in rules if r != rule]
        assert not any(o in orjson.dumps(m).decode() for m in mine for o in others)
        _check(mine, turns, rule)


def test_the_loop_keeps_running_while_it_compacts(provider_server: ProviderServer, callbacks: list[Any],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    real = ctxcompact.messages.compact
    windows: list[tuple[float, float, int]] = []
    ticks: list[float] = []

    def slow(*args: Any, **kwargs: Any) -> Any:
        start = time.monotonic()
        # (held until the loop has ticked 3 times, not for a fixed 50 ms: a loaded machine may not run the
        # loop's thread within 50 ms; a loop that stopped while this runs never ticks, and the check fails)
        seen, give_up = len(ticks), start + 30
        while sum(t >= start for t in ticks[seen:]) < 3 and time.monotonic() < give_up:
            time.sleep(0.005)
        out = real(*args, **kwargs)
        windows.append((start, time.monotonic(), threading.get_ident()))
        return out

    monkeypatch.setattr(ctxcompact.messages, "compact", slow)
    Upstream(provider_server)
    callbacks.append(Compaction(window=WINDOW))

    async def main() -> int:
        async def ticker() -> None:
            while True:
                ticks.append(time.monotonic())
                await asyncio.sleep(0.005)

        task = asyncio.create_task(ticker())
        await _conversation(_sdk(provider_server), 2)
        task.cancel()
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert windows and all(tid != loop_thread for _, _, tid in windows)
    for start, end, _ in windows:
        assert sum(start <= t <= end for t in ticks) >= 3


def test_other_calls_and_empty_lists_pass_untouched() -> None:
    compaction = Compaction(window=WINDOW)
    data = {"input": ["some text"], "model": "m"}
    assert asyncio.run(compaction.async_pre_call_hook(None, None, dict(data), "aembedding")) == data
    empty: dict[str, Any] = {"messages": [], "model": "m"}
    assert asyncio.run(compaction.async_pre_call_hook(None, None, empty, "acompletion"))["messages"] == []
    compaction.observe(None)  # nothing compacted yet: nothing to calibrate, no error


def test_proxy_hooks_compact_each_request_once_when_requests_interleave() -> None:
    """In the proxy both pre-call hooks run; with two requests in flight the deployment hook of each still
    sees its request done."""
    compaction = Recording(window=WINDOW)
    requests = [{"model": "fake", "messages": [{"role": "system", "content": SYSTEM},
                                               {"role": "user", "content": _ask(0, rule)}]}
                for rule in (RULE, "Rule: answer in French.")]

    async def interleaved() -> None:
        for data in requests:
            await compaction.async_pre_call_hook(None, None, data, "acompletion")
        for data in requests:
            await compaction.async_pre_call_deployment_hook(data, "acompletion")

    asyncio.run(interleaved())
    assert len(compaction.estimates) == 2
    # the same list again, as an SDK call would send it: compacted again
    asyncio.run(compaction.async_pre_call_deployment_hook(requests[0], "acompletion"))
    assert len(compaction.estimates) == 3


# ------------------------------------------------------------------------------------------- the proxy

#: what LiteLLM's proxy imports beyond the SDK (its `proxy` extra needs `litellm-proxy`, which the registry
#: this project installs from does not carry; .ci/run installs these instead)
PROXY_MODULES = ("fastapi", "backoff", "redis", "apscheduler", "semver", "expression", "fastapi_sso",
                 "soundfile", "uvloop")
MASTER_KEY = "sk-ctxcompact-test-0123456789abcdef"

HOOK = '''
import json
import sys
from ctxcompact.integrations.litellm import Compaction


class Logged(Compaction):
    """The adapter, writing each call's estimate where the test can read it."""

    async def acompact(self, messages, **kwargs):
        out = await super().acompact(messages, **kwargs)
        with open(LOG, "a") as f:
            f.write(json.dumps({"tokens_before": self.last.tokens_before, "compacted": self.last.compacted,
                                "via": sys._getframe(2).f_code.co_name}) + "\\n")
        return out


compaction = Logged(window=WINDOW)
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def proxy(tmp_path: Path, provider_server: ProviderServer) -> Iterator[tuple[str, Path]]:
    missing = [m for m in PROXY_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"LiteLLM's proxy needs {', '.join(missing)} (see .ci/run)")
    log = tmp_path / "calls.jsonl"
    (tmp_path / "ctxcompact_hook.py").write_text(f"LOG = {str(log)!r}\nWINDOW = {WINDOW}\n" + HOOK)
    (tmp_path / "config.yaml").write_text(
        "model_list:\n  - model_name: fake\n    litellm_params:\n"
        f"      model: {MODEL}\n      api_base: {provider_server.openai_url}\n      api_key: k\n"
        "litellm_settings:\n  callbacks: ctxcompact_hook.compaction\n")
    port = _free_port()
    env = {**os.environ, "LITELLM_MASTER_KEY": MASTER_KEY, "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "NO_PROXY": "127.0.0.1,localhost"}
    cli = Path(sys.executable).with_name("litellm")
    out = (tmp_path / "proxy.log").open("wb")
    command = [str(cli), "--config", str(tmp_path / "config.yaml"), "--host", "127.0.0.1",
               "--port", str(port)]
    process = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        import httpx

        deadline = time.monotonic() + 180
        while True:
            if process.poll() is not None:
                pytest.fail("the proxy exited:\n" + (tmp_path / "proxy.log").read_text()[-3000:])
            try:
                if httpx.get(url + "/health/liveliness", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("no proxy in 180 s:\n" + (tmp_path / "proxy.log").read_text()[-3000:])
            time.sleep(0.5)
        yield url, log
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        out.close()


def test_litellm_proxy_with_the_hook_in_its_config(proxy: tuple[str, Path],
                                                   provider_server: ProviderServer) -> None:
    """The real proxy (litellm --config) loads the adapter from config.yaml and compacts what it forwards."""
    import openai

    url, log = proxy
    turns = 24
    upstream = Upstream(provider_server)
    client = openai.AsyncOpenAI(base_url=url + "/v1", api_key=MASTER_KEY, max_retries=0, timeout=60)

    async def call(messages: list[dict[str, Any]]) -> Any:
        return await client.chat.completions.create(model="fake", messages=messages,  # type: ignore[arg-type]
                                                    tools=TOOLS)  # type: ignore[arg-type]

    async def run() -> None:
        try:
            await _conversation(call, turns)
        finally:
            await client.close()

    asyncio.run(run())
    _check(upstream.seen, turns)
    calls = [orjson.loads(line) for line in log.read_bytes().splitlines()]
    # one compaction step per request, by the proxy's pre-call hook (the deployment hook sees it done)
    assert len(calls) == 2 * turns and {c["via"] for c in calls} == {"async_pre_call_hook"}
    assert sum(c["compacted"] for c in calls) >= 3
    _check_calibration([c["tokens_before"] for c in calls][:8], [_tokens(m) for m in upstream.seen][:8])

"""The message-list API (ctxcompact.compact, Session, observe, acompact): the lists SDKs hold, as dicts and as
the installed SDKs' own objects, through run's pipeline; the state carried across compactions when the caller
replaces its list with the result; sessions in threads."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import orjson
import pytest
from helpers import assistant, coding_session, sys_msg, tool, user
from providers import ProviderServer, anthropic_message, openai_completion

import ctxcompact
from ctxcompact import api
from ctxcompact.errors import InputError, StateError, UsageError
from ctxcompact.tokens.usage import prompt_tokens


@pytest.fixture
def provider_server() -> Iterator[ProviderServer]:
    with ProviderServer() as s:
        yield s


RULE = "Rule: never push to main; always run the tests before committing."


def _text(messages: list[Any]) -> str:
    return orjson.dumps([m if isinstance(m, dict) else m.model_dump(mode="json") for m in messages]).decode()


def _grow(cur: list[Any], turn: int) -> list[Any]:
    work = assistant("Working. " + "output line\n" * 150)
    return [*cur, work, user(f"Now do task {turn}: refactor m{turn}.")]


# ------------------------------------------------------------------------------------------- stateless


def test_below_threshold_gives_the_same_objects_back() -> None:
    msgs = [sys_msg("You are terse."), user("hi"), assistant("hello")]
    r = ctxcompact.compact(msgs, window=100_000)
    assert not r.compacted and r.fits
    assert r.messages == msgs and all(a is b for a, b in zip(r.messages, msgs, strict=True))
    assert r.kept == 3 and r.tokens_before == r.tokens_after > 0
    assert r.format == "openai" and r.estimate.would_compact is False


def test_over_threshold_compacts_and_keeps_the_latest_request() -> None:
    msgs = [sys_msg("You are a coding agent."), user(RULE), *coding_session(30)]
    msgs.append(user("Finally: rename handle_29 to serve_29."))
    r = ctxcompact.compact(msgs, window=8_000)
    assert r.compacted and r.tokens_after < r.tokens_before
    assert r.messages[0] is msgs[0]  # the system prompt, the caller's own object
    body = _text(r.messages)
    assert "never push to main" in body and "rename handle_29 to serve_29" in body
    assert r.summary is not None and "ctxcompact summary" in r.messages[1]["content"]
    assert len(r.messages) < len(msgs) and r.tokens_after <= r.window


def test_empty_list_and_one_message() -> None:
    assert ctxcompact.compact([], window=1000).messages == []
    one = [user("ünïcödé ✓")]
    r = ctxcompact.compact(one, window=1000)
    assert r.messages == one and not r.compacted


def test_bad_input_names_the_message() -> None:
    with pytest.raises(InputError, match=r"messages\[N-1\]") as exc:
        ctxcompact.compact([user("a"), {"role": "wizard", "content": "x"}], window=1000, format="openai")
    assert "line 2" in str(exc.value)
    with pytest.raises(UsageError, match=r"messages\[1\]: expected a message"):
        ctxcompact.compact([user("a"), "just text"], window=1000)
    with pytest.raises(UsageError, match="list of messages"):
        ctxcompact.compact(b'{"role":"user","content":"x"}\n', window=1000)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="format"):
        ctxcompact.compact([user("a")], window=1000, format="cobol")
    with pytest.raises(UsageError, match="system="):
        ctxcompact.compact([user("a")], window=1000, system="x", format="openai")


def test_openai_sdk_objects_from_a_real_response(provider_server: ProviderServer) -> None:
    provider_server.push(openai_completion("the parser is fixed", prompt_tokens=4321))
    client = openai.OpenAI(base_url=provider_server.openai_url, api_key="k", max_retries=0)
    msgs: list[Any] = [sys_msg("You are a coding agent."), user("fix the parser")]
    resp = client.chat.completions.create(model="gpt-test", messages=msgs)
    msgs.append(resp.choices[0].message)  # the SDK's own object, as people append it
    msgs.append(user("thanks; now the lexer"))
    r = ctxcompact.compact(msgs, window=100_000)
    assert r.messages[2] is resp.choices[0].message and r.kept == 4
    big = [*msgs, *coding_session(40)]
    r = ctxcompact.compact(big, window=8_000)
    assert r.compacted and "fix the parser" in _text(r.messages)


def test_anthropic_system_apart_and_sdk_blocks(provider_server: ProviderServer) -> None:
    provider_server.push(anthropic_message(content=[
        {"type": "text", "text": "Reading it."},
        {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.py"}}]))
    client = anthropic.Anthropic(base_url=provider_server.url, api_key="k", max_retries=0)
    system = "You are a coding agent. " + RULE
    msgs: list[Any] = [{"role": "user", "content": "look at a.py"}]
    resp = client.messages.create(model="claude-test", max_tokens=100, system=system, messages=msgs)
    msgs.append({"role": "assistant", "content": resp.content})  # a list of SDK blocks inside a dict
    msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                              "content": "print('a')\n" * 20}]})
    r = ctxcompact.compact(msgs, window=100_000, system=system)
    assert r.system is system and r.messages == msgs and r.format == "anthropic"
    for t in range(30):
        msgs.append({"role": "assistant", "content": f"step {t} " + "x " * 300})
        msgs.append({"role": "user", "content": f"go on with step {t + 1}"})
    r = ctxcompact.compact(msgs, window=6_000, system=system)
    assert r.compacted and r.system is system
    assert all(m["role"] in ("user", "assistant") for m in r.messages)  # the system stays apart
    assert r.messages[0]["role"] == "user" and "go on with step 30" in _text(r.messages)
    # what comes back is valid for the API: the SDK sends it (the server records the request)
    client.messages.create(model="claude-test", max_tokens=100, system=r.system, messages=r.messages)
    sent = provider_server.requests_to("/v1/messages")[-1].body
    assert sent["system"] == system and "go on with step 30" in orjson.dumps(sent["messages"][-1]).decode()


def test_gemini_contents() -> None:
    contents = [{"role": "user", "parts": [{"text": RULE}]}]
    for t in range(40):
        contents.append({"role": "model", "parts": [{"function_call": {"name": "ls", "args": {"d": t}}}]})
        contents.append({"role": "user", "parts": [{"function_response": {
            "name": "ls", "response": {"out": f"file_{t}.py\n" * 60}}}]})
        contents.append({"role": "model", "parts": [{"text": f"listed {t}"}]})
    contents.append({"role": "user", "parts": [{"text": "now open file_39.py"}]})
    r = ctxcompact.compact(contents, window=8_000, format="gemini")
    assert r.compacted and r.format == "genai"
    assert all(set(c) >= {"role", "parts"} for c in r.messages)
    assert "now open file_39.py" in _text(r.messages) and "never push to main" in _text(r.messages)


# ---------------------------------------------------------------------------------------------- sessions


def _three_compactions(session: ctxcompact.Session | None) -> list[tuple[bool, bool]]:
    cur: list[Any] = [sys_msg("You are a coding agent."), user(RULE + " First task: fix the parser.")]
    seen: list[tuple[bool, bool]] = []
    for turn in range(40):
        r = ctxcompact.compact(cur, window=6_000, session=session)
        assert r.tokens_after <= 6_000
        if r.compacted:
            body = _text(r.messages)
            seen.append(("never push to main" in body, f"task {turn - 1}" in body))
        cur = _grow(r.messages, turn)  # the caller replaces its list with the result, as frameworks do
        if len(seen) == 3:
            break
    return seen


def test_rules_and_latest_request_survive_three_compactions_in_a_session() -> None:
    s = ctxcompact.Session()
    assert _three_compactions(s) == [(True, True)] * 3
    state = s.state
    assert state is not None and state.watermark > 0 and len(state.compactions) == 3
    assert b"First task: fix the parser" in s.history()  # the whole conversation, for recall


def test_a_file_session_survives_a_new_process_object(tmp_path: Any) -> None:
    path = tmp_path / "s.ctxstate.json"
    cur: list[Any] = [sys_msg("You are a coding agent."), user(RULE)]
    results = 0
    for turn in range(40):
        r = ctxcompact.compact(cur, window=6_000, session=ctxcompact.Session(path))  # a new object each call
        results += r.compacted
        cur = _grow(r.messages, turn)
        if results == 3:
            break
    assert results == 3 and "never push to main" in _text(r.messages)
    history_file = tmp_path / "s.ctxstate.json.history.jsonl"
    assert f"{history_file}, lines 1-" in _text(r.messages)  # where the earlier conversation can be read
    state = api.load_state(path)
    assert state is not None and len(state.compactions) == 3
    history = ctxcompact.Session(path).history()
    assert history.count(b"\n") >= 2 * 20 and b"refactor m0." in history
    # a history cut short is a clear state error, not silent loss
    (tmp_path / "s.ctxstate.json.history.jsonl").write_bytes(history[:100])
    with pytest.raises(StateError, match="shorter"):
        ctxcompact.compact(cur, window=6_000, session=ctxcompact.Session(path))


def test_a_caller_keeping_the_whole_list_gets_the_same_compaction() -> None:
    s = ctxcompact.Session()
    full: list[Any] = [sys_msg("You are a coding agent."), user(RULE)]
    compactions = 0
    for turn in range(30):
        r = ctxcompact.compact(full, window=6_000, session=s)
        compactions += r.compacted
        full = _grow(full, turn)  # append-only: the caller never replaces its list
    assert compactions >= 2 and "never push to main" in _text(r.messages)
    assert s.history() == b"".join(orjson.dumps(m) + b"\n" for m in full[:-2])


def test_another_conversation_in_the_same_session_starts_over() -> None:
    s = ctxcompact.Session()
    _three_compactions(s)
    r = ctxcompact.compact([user("a new conversation")], window=6_000, session=s)
    assert [m["content"] for m in r.messages] == ["a new conversation"]
    assert s.state is not None and s.state.watermark == 0 and s.history().count(b"\n") == 1


def test_stateless_calls_recognise_their_own_summary() -> None:
    """No session: the earlier summary in the list is all there is; what it carried must carry on."""
    seen = _three_compactions(None)
    if seen and not all(rule for rule, _ in seen):
        pytest.xfail("recognising ctxcompact's own summary in a stateless list lands with the handoff work")
    assert seen == [(True, True)] * 3


def test_sessions_in_threads_share_nothing() -> None:
    results: dict[int, list[tuple[bool, bool]]] = {}
    histories: dict[int, bytes] = {}

    def work(k: int) -> None:
        s = ctxcompact.Session()
        cur: list[Any] = [sys_msg(f"agent {k}"), user(f"Rule: always tag commits with team-{k}.")]
        seen = []
        for turn in range(25):
            r = ctxcompact.compact(cur, window=6_000, session=s)
            if r.compacted:
                seen.append((f"team-{k}" in _text(r.messages), f"team-{1 - k}" in _text(r.messages)))
            cur = _grow(r.messages, turn)
        results[k], histories[k] = seen, s.history()

    threads = [threading.Thread(target=work, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in (0, 1):
        assert results[k] and all(own and not other for own, other in results[k])
        assert f"team-{k}".encode() in histories[k] and f"team-{1 - k}".encode() not in histories[k]


def test_one_session_from_several_threads_takes_turns() -> None:
    s = ctxcompact.Session()
    msgs = [user("hi"), assistant("hello")]
    errors: list[BaseException] = []

    def call() -> None:
        try:
            for _ in range(5):
                ctxcompact.compact(msgs, window=10_000, session=s)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and s.history() == b"".join(orjson.dumps(m) + b"\n" for m in msgs)


def test_acompact_runs_off_the_loop() -> None:
    msgs = [sys_msg("sys"), *coding_session(30), user("last")]

    async def main() -> tuple[ctxcompact.CompactResult, int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(ticker())
        r = await ctxcompact.acompact(msgs, window=8_000, session=ctxcompact.Session())
        task.cancel()
        return r, ticks

    r, ticks = asyncio.run(main())
    assert r.compacted and ticks > 1  # the loop kept running while the work was done in a thread


# ------------------------------------------------------------------------------------------- observe


def test_observe_calibrates_the_next_call_with_prompt_caching(provider_server: ProviderServer) -> None:
    """Anthropic's input_tokens leaves out cache reads and writes: the prompt is their sum."""
    provider_server.push(anthropic_message("ok", input_tokens=12, cache_creation_input_tokens=3_000,
                                           cache_read_input_tokens=22_000))
    client = anthropic.Anthropic(base_url=provider_server.url, api_key="k", max_retries=0)
    s = ctxcompact.Session()
    msgs = [{"role": "user", "content": "hello " * 200}]
    first = ctxcompact.compact(msgs, window=200_000, session=s, system="sys")
    resp = client.messages.create(model="claude-test", max_tokens=10, system="sys", messages=msgs)
    billed = s.observe(resp.usage)
    assert billed.tokens == 25_012 and "cache" in billed.source
    msgs = [*msgs, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "more"}]
    nxt = ctxcompact.compact(msgs, window=200_000, session=s, system="sys")
    assert first.tokens_before < 2_000 and nxt.tokens_before >= 25_012  # never below what was billed


def test_observe_takes_each_providers_usage(provider_server: ProviderServer) -> None:
    provider_server.push(openai_completion("ok", prompt_tokens=777))
    client = openai.OpenAI(base_url=provider_server.openai_url, api_key="k", max_retries=0)
    resp = client.chat.completions.create(model="gpt-test", messages=[user("hi")])  # type: ignore[list-item]
    assert prompt_tokens(resp.usage).tokens == 777
    assert prompt_tokens(resp).tokens == 777  # the whole response
    cases: list[tuple[Any, int]] = [
        ({"input_tokens": 5, "cache_read_input_tokens": 100, "cache_creation_input_tokens": None}, 105),
        ({"input_tokens": 900, "output_tokens": 3, "input_tokens_details": {"cached_tokens": 800}}, 900),
        ({"usageMetadata": {"promptTokenCount": 321, "cachedContentTokenCount": 300}}, 321),
        ({"usage_metadata": {"prompt_token_count": 42}}, 42),
        ({"usage_metadata": {"input_tokens": 64, "output_tokens": 1,
                             "input_token_details": {"cache_read": 60}}}, 64),
        ({"prompt_tokens": 0}, 0),
    ]
    for usage, want in cases:
        assert prompt_tokens(usage).tokens == want, usage
    for bad, why in (({"output_tokens": 3}, "no prompt token count"), ({"prompt_tokens": -1}, "whole number"),
                     ("12", "expected a usage")):
        with pytest.raises(UsageError, match=why):
            prompt_tokens(bad)
    with pytest.raises(UsageError, match="compact first"):
        ctxcompact.Session().observe({"prompt_tokens": 5})


def test_observe_on_a_file_session(tmp_path: Any) -> None:
    s = ctxcompact.Session(tmp_path / "st.json")
    with pytest.raises(StateError, match="compact first"):
        s.observe({"prompt_tokens": 5})
    ctxcompact.compact([user("hello " * 100)], window=100_000, session=s)
    s.observe({"prompt_tokens": 9_000})
    state = api.load_state(tmp_path / "st.json")
    assert state is not None and state.calibration.real == 9_000
    r = ctxcompact.compact([user("hello " * 100), assistant("ok"), user("x")], window=100_000, session=s)
    assert r.tokens_before >= 9_000


def test_tool_calls_keep_their_results_after_compaction() -> None:
    msgs = [sys_msg("agent"), *coding_session(30)]
    msgs += [user("run the tests"), assistant(None, [("call_last", "run_tests", {})]),
             tool("call_last", "2 failed: test_a, test_b")]
    r = ctxcompact.compact(msgs, window=8_000)
    assert r.compacted
    calls = {c["id"] for m in r.messages if isinstance(m, dict) for c in m.get("tool_calls") or []}
    results = {m["tool_call_id"] for m in r.messages if isinstance(m, dict) and m.get("role") == "tool"}
    assert calls == results  # no call without its result, no result without its call
    assert "2 failed: test_a, test_b" in _text(r.messages)  # the result just asked for is visible


def test_cli_calibrate_usage_json(tmp_path: Any) -> None:
    from helpers import ctxcompact as cli
    from helpers import jsonl

    log, state_file = tmp_path / "log.jsonl", tmp_path / "s.json"
    log.write_bytes(jsonl([sys_msg("sys"), user("hello " * 50)]))
    assert cli("run", str(log), "--window", "100000", "--state", str(state_file), "-o",
               str(tmp_path / "o.jsonl")).returncode == 0
    usage = {"input_tokens": 7, "cache_creation_input_tokens": 1000, "cache_read_input_tokens": 24000}
    proc = cli("calibrate", "--state", str(state_file), "--usage-json", orjson.dumps(usage).decode())
    assert proc.returncode == 0, proc.stderr
    assert orjson.loads(state_file.read_bytes())["calibration"]["real"] == 25_007
    (tmp_path / "resp.json").write_bytes(orjson.dumps({"usageMetadata": {"promptTokenCount": 31337}}))
    at_file = f"@{tmp_path / 'resp.json'}"
    assert cli("calibrate", "--state", str(state_file), "--usage-json", at_file).returncode == 0
    assert orjson.loads(state_file.read_bytes())["calibration"]["real"] == 31_337
    piped = cli("calibrate", "--state", str(state_file), "--usage-json", "-",
                input=b'{"prompt_tokens": 4000}')
    assert piped.returncode == 0 and orjson.loads(state_file.read_bytes())["calibration"]["real"] == 4_000
    for args, why in ((["--usage-json", "{nope"], b"not JSON"), (["--usage-json", '{"output_tokens": 1}'],
                      b"no prompt token count"), ([], b"one of them"),
                      (["--usage-json", "@" + str(tmp_path / "missing.json")], b"cannot read")):
        bad = cli("calibrate", "--state", str(state_file), *args)
        assert bad.returncode == 2 and why in bad.stderr and b"Traceback" not in bad.stderr, bad.stderr


def test_a_session_counts_only_what_is_new_and_agrees_with_a_cold_call() -> None:
    s = ctxcompact.Session()
    msgs: list[Any] = [sys_msg("agent")]
    for t in range(12):
        new = coding_session(1, start=t)
        msgs = [*msgs, *new]
        warm = ctxcompact.compact(msgs, window=1_000_000, session=s)
        cold = ctxcompact.compact(msgs, window=1_000_000)
        assert warm.run is not None and not warm.run.compacted
        # the session's count cache counted the appended messages only (the first call: all of them)
        assert s._counts.counted == (len(new) if t else len(msgs)) and s._counts.found == len(msgs) - \
            s._counts.counted
        assert (warm.tokens_before, warm.estimate.exact, warm.estimate.heuristic) == \
            (cold.tokens_before, cold.estimate.exact, cold.estimate.heuristic)
        assert warm.messages == msgs and warm.messages[-1] is msgs[-1]


def test_openai_responses_input_items() -> None:
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage

    items: list[Any] = [{"role": "user", "content": RULE + " Fix the parser."}]  # an "easy" message
    for t in range(30):
        items.append(ResponseFunctionToolCall(type="function_call", call_id=f"c{t}", name="read_file",
                                              arguments=f'{{"path": "src/m{t}.py"}}', id=f"fc_{t}",
                                              status="completed"))
        items.append({"type": "function_call_output", "call_id": f"c{t}", "output": f"line {t}\n" * 120})
        items.append(ResponseOutputMessage.model_validate({
            "type": "message", "id": f"msg_{t}", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": f"m{t} is fine", "annotations": []}]}))
    items.append({"role": "user", "content": "now the lexer"})
    small = ctxcompact.compact(items[:4], window=100_000, format="responses")
    assert small.messages == items[:4] and small.messages[1] is items[1] and not small.compacted
    r = ctxcompact.compact(items, window=8_000, format="responses", session=ctxcompact.Session())
    assert r.compacted and r.tokens_after < r.tokens_before
    assert all(isinstance(m, dict) and m.get("type") in ("message", "function_call", "function_call_output")
               for m in r.messages)  # Responses items, out of the Codex envelope
    body = _text(r.messages)
    assert "never push to main" in body and "now the lexer" in body and "response_item" not in body
    calls = {m["call_id"] for m in r.messages if m.get("type") == "function_call"}
    outputs = {m["call_id"] for m in r.messages if m.get("type") == "function_call_output"}
    assert calls == outputs


def test_bad_message_after_a_compaction_names_the_session_conversation() -> None:
    s = ctxcompact.Session()
    msgs = [sys_msg("agent"), *coding_session(30), user("go")]
    r = ctxcompact.compact(msgs, window=8_000, session=s)
    assert r.compacted
    with pytest.raises(InputError, match="session's conversation"):
        ctxcompact.compact([*r.messages, {"role": "wizard", "content": "x"}], window=8_000, session=s,
                           format="openai")
    again = ctxcompact.compact([*r.messages, user("still fine")], window=8_000, session=s)
    assert "still fine" in _text(again.messages)  # the failed call left the session as it was


def test_the_system_prompt_apart_is_the_format_entry_s_trait(monkeypatch: pytest.MonkeyPatch) -> None:
    """``system=`` is for a format whose registry entry declares ``SYSTEM_APART`` (Anthropic's), never a name
    compared: the entry without it refuses ``system=`` and one given it takes it."""
    import dataclasses

    from ctxcompact import plugins

    msgs = [user("hi"), assistant("hello")]
    assert ctxcompact.compact(msgs, window=100_000, system="Be brief.").format == "anthropic"
    entries = plugins.FORMATS._builtins
    monkeypatch.setitem(entries, "anthropic", dataclasses.replace(entries["anthropic"], traits=frozenset()))
    monkeypatch.setitem(entries, "openai", dataclasses.replace(entries["openai"],
                                                               traits=frozenset({plugins.SYSTEM_APART})))
    with pytest.raises(UsageError, match="system= is for"):
        ctxcompact.compact(msgs, window=100_000, system="Be brief.", format="anthropic")
    r = ctxcompact.compact(msgs, window=100_000, system="Be brief.")
    assert r.format == "openai" and r.system == "Be brief." and r.messages == msgs
